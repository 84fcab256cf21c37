package storetest

import (
	"context"
	"errors"
	"fmt"
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
	{"RunConcurrentUpdates", testRunConcurrentUpdates},
}

// sampleRun returns run id of batch using every field.
func sampleRun(id, batch string, created time.Time) *store.Run {
	created = created.UTC().Truncate(time.Microsecond)
	started, ended := created.Add(time.Second), created.Add(time.Minute)
	code := 3
	return &store.Run{
		ID: id, BatchID: batch, Task: "hello", Spec: []byte(`{"name":"hello"}`), Agent: "custom", Model: "coder",
		Repeat: 2, Status: "running", Phase: "agent", Reason: "why ✓", ExitCode: &code, SandboxID: "sb-" + id,
		CreatedAt: created, UpdatedAt: created, StartedAt: &started, EndedAt: &ended, Result: []byte(`{"timings":{}}`),
		Tenant: "key-a",
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
		if i == 3 {
			r.Tenant = ""
		}
		if i == 1 {
			r.Tenant = "key-b"
		}
		mustCreateRun(t, s, r)
	}
	ids := func(rs []*store.Run) []string {
		out := []string{}
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
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
	}
	for _, tt := range tests {
		var got []string
		p := store.Page{Limit: 2}
		for {
			page, next, err := s.ListRunPage(ctx, tt.f, p)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ids(page)...)
			if next == "" {
				break
			}
			p.After = next
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("filter %+v, pages of 2 (-want +got):\n%s", tt.f, diff)
		}
	}
	if err := s.DeleteRun(ctx, "r0"); err != nil {
		t.Fatal(err)
	}
	if all, _, err := s.ListRunPage(ctx, store.RunFilter{}, store.Page{}); err != nil || len(all) != 4 {
		t.Errorf("after delete: %d runs, %v", len(all), err)
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
