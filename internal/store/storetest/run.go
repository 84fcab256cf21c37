package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

// runTests are Run's cases for store.Runs.
var runTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"RunCreateGet", testRunCreateGet},
	{"RunDuplicate", testRunDuplicate},
	{"RunNotFound", testRunNotFound},
	{"RunListPage", testRunListPage},
	{"RunEndedBefore", testRunEndedBefore},
	{"RunConcurrentUpdates", testRunConcurrentUpdates},
	{"RunClaims", testRunClaims},
	{"RunConcurrentClaims", testRunConcurrentClaims},
}

// sampleRun returns run id of batch using every field.
func sampleRun(id, batch string, created time.Time) *store.Run {
	created = created.UTC().Truncate(time.Microsecond)
	started, ended, lease := created.Add(time.Second), created.Add(time.Minute), created.Add(time.Hour)
	code := 3
	return &store.Run{
		ID: id, BatchID: batch, Task: "hello", Spec: []byte(`{"name":"hello"}`), Agent: "custom", Model: "coder",
		Repeat: 2, Status: "running", Phase: "agent", Reason: "why ✓", ExitCode: &code, SandboxID: "sb-" + id,
		CreatedAt: created, UpdatedAt: created, StartedAt: &started, EndedAt: &ended, Result: []byte(`{"timings":{}}`),
		Tenant: "key-a", ClaimedBy: "daemon-a", LeaseUntil: &lease,
	}
}

func mustCreateRun(t *testing.T, s store.Store, r *store.Run) {
	t.Helper()
	if err := s.CreateRun(context.Background(), r); err != nil {
		t.Fatalf("create run %s: %v", r.ID, err)
	}
}

func testRunCreateGet(t *testing.T, s store.Store) {
	ctx := context.Background()
	want := sampleRun("r1", "b1", time.Now())
	mustCreateRun(t, s, want)
	got, err := s.GetRun(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("get (-want +got):\n%s", diff)
	}
	bare := &store.Run{ID: "r2", BatchID: "b1", Task: "t", Agent: "custom", Status: "queued", CreatedAt: want.CreatedAt, UpdatedAt: want.CreatedAt}
	mustCreateRun(t, s, bare)
	if got, err := s.GetRun(ctx, "r2"); err != nil || !cmp.Equal(bare, got) {
		t.Errorf("run without optional fields: %s, %v", cmp.Diff(bare, got), err)
	}
}

func testRunDuplicate(t *testing.T, s store.Store) {
	mustCreateRun(t, s, sampleRun("r1", "b", time.Now()))
	if err := s.CreateRun(context.Background(), sampleRun("r1", "b", time.Now())); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("duplicate: %v, want ErrAlreadyExists", err)
	}
}

func testRunNotFound(t *testing.T, s store.Store) {
	ctx := context.Background()
	if _, err := s.GetRun(ctx, "none"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("get: %v", err)
	}
	if _, err := s.UpdateRun(ctx, "none", func(*store.Run) error { return nil }); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("update: %v", err)
	}
	if err := s.DeleteRun(ctx, "none"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("delete: %v", err)
	}
}

func testRunListPage(t *testing.T, s store.Store) {
	ctx := context.Background()
	base := time.Now()
	for i := range 5 {
		r := sampleRun(fmt.Sprintf("r%d", i), []string{"a", "b"}[i%2], base.Add(time.Duration(i)*time.Second))
		if i == 4 {
			r.Status = "succeeded"
		}
		if i == 0 {
			r.Status = "queued"
		}
		if i == 3 {
			r.Tenant = ""
		}
		if i == 1 {
			r.Tenant = "key-b"
		}
		r.Agent = []string{"claude-code", "codex", "claude-code", "custom", "codex"}[i]
		r.Model = []string{"opus", "", "sonnet", "opus", "gpt"}[i]
		mustCreateRun(t, s, r)
	}
	tests := []struct {
		f    store.RunFilter
		want []string
	}{
		{store.RunFilter{}, []string{"r0", "r1", "r2", "r3", "r4"}},
		{store.RunFilter{BatchID: "a"}, []string{"r0", "r2", "r4"}},
		{store.RunFilter{Active: true}, []string{"r0", "r1", "r2", "r3"}},
		{store.RunFilter{BatchID: "a", Active: true}, []string{"r0", "r2"}},
		{store.RunFilter{ByTenant: true, Tenant: "key-a"}, []string{"r0", "r2", "r4"}},
		{store.RunFilter{ByTenant: true, Tenant: "key-b", Active: true}, []string{"r1"}},
		{store.RunFilter{ByTenant: true}, []string{"r3"}},
		{store.RunFilter{ByTenant: true, Tenant: "key-c"}, nil},
		{store.RunFilter{Tenant: "key-b"}, []string{"r0", "r1", "r2", "r3", "r4"}},
		{store.RunFilter{Statuses: []string{"succeeded"}}, []string{"r4"}},
		{store.RunFilter{Statuses: []string{"queued", "succeeded"}}, []string{"r0", "r4"}},
		{store.RunFilter{Statuses: []string{"running", "succeeded"}, BatchID: "a"}, []string{"r2", "r4"}},
		{store.RunFilter{Statuses: []string{"failed"}}, nil},
		{store.RunFilter{Agents: []string{"claude-code"}}, []string{"r0", "r2"}},
		{store.RunFilter{Agents: []string{"codex", "custom"}}, []string{"r1", "r3", "r4"}},
		{store.RunFilter{Agents: []string{"gemini-cli"}}, nil},
		{store.RunFilter{Models: []string{"opus"}}, []string{"r0", "r3"}},
		{store.RunFilter{Models: []string{"sonnet", "gpt"}}, []string{"r2", "r4"}},
		{store.RunFilter{Models: []string{"Opus"}}, nil},
		{store.RunFilter{Agents: []string{"claude-code"}, Models: []string{"opus"}}, []string{"r0"}},
		{store.RunFilter{Agents: []string{"codex"}, Statuses: []string{"succeeded"}}, []string{"r4"}},
		{store.RunFilter{Agents: []string{"codex"}, ByTenant: true, Tenant: "key-a"}, []string{"r4"}},
		{store.RunFilter{Agents: []string{"claude-code", "codex"}, BatchID: "b", Active: true}, []string{"r1"}},
	}
	for _, tt := range tests {
		for _, desc := range []bool{false, true} {
			got := slices.Concat(pages(t, store.Page{Limit: 2, Desc: desc}, func(p store.Page) ([]*store.Run, string, error) {
				return s.ListRunPage(ctx, tt.f, p)
			}, func(r *store.Run) string { return r.ID })...)
			want := slices.Clone(tt.want)
			if desc {
				slices.Reverse(want)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("filter %+v, pages of 2, newest first %v (-want +got):\n%s", tt.f, desc, diff)
			}
		}
	}
	if err := s.DeleteRun(ctx, "r0"); err != nil {
		t.Fatal(err)
	}
	if all, _, err := s.ListRunPage(ctx, store.RunFilter{}, store.Page{}); err != nil || len(all) != 4 {
		t.Errorf("after delete: %d runs, %v", len(all), err)
	}
}

// EndedBefore selects the ended runs by their end (their last update
// when they have none), never an active one, and pages through runs
// deleted as they are read, as retention does.
func testRunEndedBefore(t *testing.T, s store.Store) {
	ctx := context.Background()
	base := time.Now().UTC().Truncate(time.Microsecond)
	cutoff := base.Add(-time.Hour)
	at := func(d time.Duration) *time.Time { v := base.Add(d); return &v }
	for i, r := range []struct {
		status, tenant string
		ended          *time.Time
		updated        time.Duration
	}{
		{"succeeded", "key-a", at(-2 * time.Hour), 0},            // r0: old
		{"failed", "key-a", at(-30 * time.Minute), 0},            // r1: recent
		{"running", "key-a", at(-2 * time.Hour), -2 * time.Hour}, // r2: active, whatever its times
		{"cancelled", "key-b", nil, -3 * time.Hour},              // r3: no end time, old update
		{"queued", "key-a", nil, -3 * time.Hour},                 // r4: active
		{"hung", "key-a", &cutoff, 0},                            // r5: ended at the cutoff, not before
		{"timeout", "", at(-5 * time.Hour), 0},                   // r6: old, another tenant
		{"sandbox_lost", "key-a", at(-90 * time.Minute), 0},      // r7: old
	} {
		mustCreateRun(t, s, &store.Run{ID: fmt.Sprintf("r%d", i), BatchID: "b", Task: "t", Agent: "custom", Status: r.status,
			CreatedAt: base.Add(time.Duration(i) * time.Second), UpdatedAt: base.Add(r.updated), EndedAt: r.ended, Tenant: r.tenant})
	}
	ids := func(f store.RunFilter, limit int, del bool) []string {
		t.Helper()
		got := []string{}
		p := store.Page{Limit: limit}
		for {
			page, next, err := s.ListRunPage(ctx, f, p)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page {
				got = append(got, r.ID)
				if del {
					if err := s.DeleteRun(ctx, r.ID); err != nil {
						t.Fatal(err)
					}
				}
			}
			if next == "" {
				return got
			}
			p.After = next
		}
	}
	tests := []struct {
		name string
		f    store.RunFilter
		want []string
	}{
		{"ended before", store.RunFilter{EndedBefore: cutoff}, []string{"r0", "r3", "r6", "r7"}},
		{"and a tenant", store.RunFilter{EndedBefore: cutoff, ByTenant: true, Tenant: "key-a"}, []string{"r0", "r7"}},
		{"and a batch", store.RunFilter{EndedBefore: cutoff, BatchID: "other"}, []string{}},
		{"and active", store.RunFilter{EndedBefore: cutoff, Active: true}, []string{}},
		{"long ago", store.RunFilter{EndedBefore: base.Add(-4 * time.Hour)}, []string{"r6"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, ids(tt.f, 0, false)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
	if diff := cmp.Diff([]string{"r0", "r3", "r6", "r7"}, ids(store.RunFilter{EndedBefore: cutoff}, 1, true)); diff != "" {
		t.Errorf("pages of 1, each deleted once read (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"r1", "r2", "r4", "r5"}, ids(store.RunFilter{}, 0, false)); diff != "" {
		t.Errorf("left (-want +got):\n%s", diff)
	}
}

func testRunConcurrentUpdates(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreateRun(t, s, sampleRun("r", "b", time.Now()))
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.UpdateRun(ctx, "r", func(r *store.Run) error { r.Repeat++; return nil }); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if r, err := s.GetRun(ctx, "r"); err != nil || r.Repeat != 22 {
		t.Errorf("after 20 increments from 2: %+v, %v", r, err)
	}
}

func testRunClaims(t *testing.T, s store.Store) {
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	past, future := now.Add(-time.Minute), now.Add(time.Minute)
	for i, r := range []struct {
		status, owner string
		lease         *time.Time
	}{
		{"queued", "", nil},       // r0: never claimed
		{"running", "a", &future}, // r1: a's, held
		{"running", "a", &past},   // r2: a's, lapsed
		{"succeeded", "", nil},    // r3: ended
		{"queued", "b", &future},  // r4: b's, held
		{"failed", "a", &past},    // r5: ended, lapsed
		{"queued", "gone", &past}, // r6: lapsed
	} {
		mustCreateRun(t, s, &store.Run{
			ID: fmt.Sprintf("r%d", i), BatchID: "b", Task: "t", Agent: "custom", Status: r.status,
			CreatedAt: now.Add(time.Duration(i) * time.Second), UpdatedAt: now, ClaimedBy: r.owner, LeaseUntil: r.lease,
		})
	}
	ids := func(rs []*store.Run) []string {
		out := []string{}
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	until := now.Add(30 * time.Second)
	got, err := s.ClaimRuns(ctx, store.RunClaim{Owner: "c", Until: until, Now: now, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"r0", "r2"}, ids(got)); diff != "" {
		t.Errorf("claim 2 (-want +got):\n%s", diff)
	}
	for _, r := range got {
		if r.ClaimedBy != "c" || r.LeaseUntil == nil || !r.LeaseUntil.Equal(until) {
			t.Errorf("claimed %s: by %q until %v, want c until %v", r.ID, r.ClaimedBy, r.LeaseUntil, until)
		}
		if stored, err := s.GetRun(ctx, r.ID); err != nil || !cmp.Equal(r, stored) {
			t.Errorf("claimed %s: returned %+v, stored %+v, %v", r.ID, r, stored, err)
		}
	}
	if got, err = s.ClaimRuns(ctx, store.RunClaim{Owner: "d", Until: until, Now: now}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"r6"}, ids(got)); diff != "" {
		t.Errorf("claim the rest (-want +got):\n%s", diff)
	}
	if got, err = s.ClaimRuns(ctx, store.RunClaim{Owner: "e", Until: until, Now: now}); err != nil || len(got) != 0 {
		t.Errorf("claim with nothing lapsed: %v, %v; want none", ids(got), err)
	}
	// A daemon back under its name takes its held runs back, and the
	// lapsed ones of others.
	if got, err = s.ClaimRuns(ctx, store.RunClaim{Owner: "a", Until: until, Now: now.Add(time.Hour), Mine: true}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"r0", "r1", "r2", "r4", "r6"}, ids(got)); diff != "" {
		t.Errorf("claim later, mine too (-want +got):\n%s", diff)
	}
	later := until.Add(time.Minute)
	if n, err := s.RenewRunLeases(ctx, "a", later); err != nil || n != 5 {
		t.Errorf("renew a's leases: %d, %v; want 5", n, err)
	}
	for _, id := range []string{"r0", "r4"} {
		if r, err := s.GetRun(ctx, id); err != nil || r.LeaseUntil == nil || !r.LeaseUntil.Equal(later) {
			t.Errorf("run %s after the renewal: %+v, %v; want its lease at %v", id, r, err, later)
		}
	}
	if r, err := s.GetRun(ctx, "r5"); err != nil || r.LeaseUntil == nil || !r.LeaseUntil.Equal(past) {
		t.Errorf("ended run after the renewal: %+v, %v; want its lease left at %v", r, err, past)
	}
	if n, err := s.RenewRunLeases(ctx, "nobody", later); err != nil || n != 0 {
		t.Errorf("renew the leases of a daemon with no runs: %d, %v", n, err)
	}
}

// Daemons claiming at once each get other runs, and together all.
func testRunConcurrentClaims(t *testing.T, s store.Store) {
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	const runs, claimers = 40, 4
	for i := range runs {
		mustCreateRun(t, s, &store.Run{ID: fmt.Sprintf("r%02d", i), BatchID: "b", Task: "t", Agent: "custom",
			Status: "queued", CreatedAt: now, UpdatedAt: now})
	}
	var (
		mu  sync.Mutex
		got = map[string]string{}
		wg  sync.WaitGroup
	)
	for c := range claimers {
		owner := fmt.Sprintf("d%d", c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				rs, err := s.ClaimRuns(ctx, store.RunClaim{Owner: owner, Until: now.Add(time.Hour), Now: now, Limit: 3})
				if err != nil {
					t.Error(err)
					return
				}
				if len(rs) == 0 {
					return
				}
				mu.Lock()
				for _, r := range rs {
					if prev, ok := got[r.ID]; ok {
						t.Errorf("run %s claimed by %s and %s", r.ID, prev, owner)
					}
					got[r.ID] = owner
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(got) != runs {
		t.Errorf("%d runs claimed, want %d", len(got), runs)
	}
}
