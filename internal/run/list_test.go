package run

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/store"
)

// TestListStatuses pages through runs of some statuses: each page full
// but the last, the runs in order (oldest or newest first), none twice,
// whichever page size, also when the runs of those statuses are rare (one
// in 97).
func TestListStatuses(t *testing.T) {
	// The service's loop is not started: the queued runs stay queued.
	svc, runs := newIdleService(t)
	const n = 1300
	byStatus := map[api.RunStatus][]string{}
	var all []string
	t0 := time.Now().UTC().Truncate(time.Microsecond)
	for i := range n {
		st := api.RunSucceeded
		switch {
		case i%97 == 5:
			st = api.RunFailed
		case i%5 == 1:
			st = api.RunQueued
		}
		id := fmt.Sprintf("run-%04d", i)
		if err := runs.CreateRun(bg, &store.Run{ID: id, BatchID: "b", Task: "t", Agent: "custom", Status: string(st),
			CreatedAt: t0.Add(time.Duration(i) * time.Millisecond), UpdatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		byStatus[st] = append(byStatus[st], id)
		all = append(all, id)
	}
	merged := func(sts ...api.RunStatus) []string {
		var out []string
		for _, id := range all {
			for _, st := range sts {
				if slices.Contains(byStatus[st], id) {
					out = append(out, id)
				}
			}
		}
		return out
	}
	tests := []struct {
		statuses []api.RunStatus
		limit    int
		want     []string
	}{
		{nil, 400, all},
		{[]api.RunStatus{api.RunFailed}, 3, byStatus[api.RunFailed]},
		{[]api.RunStatus{api.RunFailed}, 1000, byStatus[api.RunFailed]},
		{[]api.RunStatus{api.RunQueued}, 100, byStatus[api.RunQueued]},
		{[]api.RunStatus{api.RunQueued, api.RunFailed}, 7, merged(api.RunQueued, api.RunFailed)},
		{[]api.RunStatus{api.RunCancelled}, 10, nil},
		{[]api.RunStatus{api.RunFailed}, 0, byStatus[api.RunFailed]},
	}
	for _, tt := range tests {
		for _, order := range []api.Order{"", api.OrderDesc} {
			t.Run(fmt.Sprintf("%v/%d/%s", tt.statuses, tt.limit, order), func(t *testing.T) {
				var got []string
				cursor := ""
				for pages := 0; ; pages++ {
					opts := ListOptions{Statuses: tt.statuses, Cursor: cursor, Order: order}
					if tt.limit > 0 {
						opts.Limit = &tt.limit
					}
					l, err := svc.List(bg, opts)
					if err != nil {
						t.Fatal(err)
					}
					for _, r := range l.Items {
						if len(tt.statuses) > 0 && !slices.Contains(tt.statuses, r.Status) {
							t.Errorf("run %s is %s, not of %v", r.ID, r.Status, tt.statuses)
						}
						got = append(got, r.ID)
					}
					if l.NextCursor == "" {
						break
					}
					if len(l.Items) != tt.limit {
						t.Errorf("page %d holds %d runs, and another follows: want %d", pages, len(l.Items), tt.limit)
					}
					cursor = l.NextCursor
				}
				want := slices.Clone(tt.want)
				if order == api.OrderDesc {
					slices.Reverse(want) // newest first
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("runs (-want +got):\n%s", diff)
				}
			})
		}
	}
}
