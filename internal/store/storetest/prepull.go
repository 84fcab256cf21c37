package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

// prepullTests are Run's cases for store.Prepulls.
var prepullTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"PrepullCreateGet", testPrepullCreateGet},
	{"PrepullNotFound", testPrepullNotFound},
	{"PrepullList", testPrepullList},
	{"PrepullUpdate", testPrepullUpdate},
	{"PrepullConcurrentUpdates", testPrepullConcurrentUpdates},
}

func samplePrepull(id, image, status string, started time.Time) *store.Prepull {
	return &store.Prepull{ID: id, Image: image, Status: status, StartedAt: started.UTC().Truncate(time.Microsecond)}
}

func testPrepullCreateGet(t *testing.T, s store.Store) {
	ctx := context.Background()
	now := time.Now()
	done := now.Add(time.Minute).UTC().Truncate(time.Microsecond)
	for _, want := range []*store.Prepull{
		samplePrepull("pp-00000001", "python:3.12", "pending", now),
		{ID: "pp-00000002", Image: "agent2env/node", Template: "node", Status: "failed", Ready: 1, Total: 3,
			Error: "pull image: ü→✓ 'quoted'", StartedAt: now.UTC().Truncate(time.Microsecond), CompletedAt: &done},
	} {
		if err := s.CreatePrepull(ctx, want); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetPrepull(ctx, want.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("get %s (-want +got):\n%s", want.ID, diff)
		}
	}
	if err := s.CreatePrepull(ctx, samplePrepull("pp-00000001", "alpine", "pending", now)); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("duplicate create: %v, want already exists", err)
	}
	if err := s.DeletePrepull(ctx, "pp-00000001"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetPrepull(ctx, "pp-00000001"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("get after delete: %v, want not found", err)
	}
}

func testPrepullNotFound(t *testing.T, s store.Store) {
	ctx := context.Background()
	checks := map[string]error{}
	_, checks["get"] = s.GetPrepull(ctx, "nope")
	_, checks["update"] = s.UpdatePrepull(ctx, "nope", func(*store.Prepull) error { return nil })
	checks["delete"] = s.DeletePrepull(ctx, "nope")
	for op, err := range checks {
		if !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("%s unknown id: %v, want not found", op, err)
		}
	}
}

func testPrepullList(t *testing.T, s store.Store) {
	ctx := context.Background()
	got, err := s.ListPrepulls(ctx, store.PrepullFilter{})
	if err != nil || len(got) != 0 {
		t.Fatalf("empty list = %v, %v", got, err)
	}
	base := time.Now()
	for i, p := range []*store.Prepull{
		samplePrepull("pp-a", "alpine", "completed", base),
		samplePrepull("pp-b", "python", "pulling", base.Add(time.Second)),
		samplePrepull("pp-c", "alpine", "pulling", base.Add(2*time.Second)),
		samplePrepull("pp-d", "alpine:latest", "failed", base.Add(3*time.Second)),
	} {
		if err := s.CreatePrepull(ctx, p); err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	tests := []struct {
		filter store.PrepullFilter
		want   []string
	}{
		{store.PrepullFilter{}, []string{"pp-d", "pp-c", "pp-b", "pp-a"}},
		{store.PrepullFilter{Image: "alpine"}, []string{"pp-c", "pp-a"}},
		{store.PrepullFilter{Status: "pulling"}, []string{"pp-c", "pp-b"}},
		{store.PrepullFilter{Image: "alpine", Status: "pulling"}, []string{"pp-c"}},
		{store.PrepullFilter{Image: "ALPINE"}, []string{}},
		{store.PrepullFilter{Status: "nonsense"}, []string{}},
	}
	for _, tt := range tests {
		got, err := s.ListPrepulls(ctx, tt.filter)
		if err != nil {
			t.Fatalf("list %+v: %v", tt.filter, err)
		}
		ids := []string{}
		for _, p := range got {
			ids = append(ids, p.ID)
		}
		if diff := cmp.Diff(tt.want, ids); diff != "" {
			t.Errorf("list %+v (-want +got):\n%s", tt.filter, diff)
		}
	}
}

func testPrepullUpdate(t *testing.T, s store.Store) {
	ctx := context.Background()
	if err := s.CreatePrepull(ctx, samplePrepull("pp-u", "alpine", "pending", time.Now())); err != nil {
		t.Fatal(err)
	}
	done := time.Now().UTC().Truncate(time.Microsecond)
	updated, err := s.UpdatePrepull(ctx, "pp-u", func(p *store.Prepull) error {
		p.Status, p.Ready, p.Total, p.CompletedAt = "completed", 2, 2, &done
		p.ID = "renamed" // ignored: the id is the key
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.GetPrepull(ctx, "pp-u")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(updated, got); diff != "" || got.Status != "completed" || got.Ready != 2 || got.CompletedAt == nil {
		t.Errorf("after update (-returned +stored):\n%s\nstored %+v", diff, got)
	}

	boom := errors.New("boom")
	if _, err := s.UpdatePrepull(ctx, "pp-u", func(p *store.Prepull) error {
		p.Status = "failed"
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("aborted update err = %v, want boom", err)
	}
	if got, _ := s.GetPrepull(ctx, "pp-u"); got.Status != "completed" {
		t.Errorf("aborted update was stored: status %q", got.Status)
	}
}

func testPrepullConcurrentUpdates(t *testing.T, s store.Store) {
	ctx := context.Background()
	if err := s.CreatePrepull(ctx, samplePrepull("pp-c", "alpine", "pulling", time.Now())); err != nil {
		t.Fatal(err)
	}
	const n = 20
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if _, err := s.UpdatePrepull(ctx, "pp-c", func(p *store.Prepull) error {
				p.Ready++
				return nil
			}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got, _ := s.GetPrepull(ctx, "pp-c"); got.Ready != n {
		t.Errorf("ready = %d after %d increments: lost updates", got.Ready, n)
	}
}
