// Package storetest is the conformance suite every store.Store backend
// must pass: Run(t, newStore) from the backend's tests.
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

// Run runs the suite; newStore returns an empty store, closed by the suite.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"CreateGet", testCreateGet},
		{"Duplicate", testDuplicate},
		{"NotFound", testNotFound},
		{"List", testList},
		{"Update", testUpdate},
		{"UpdateAbort", testUpdateAbort},
		{"UpdatePanic", testUpdatePanic},
		{"ConcurrentUpdates", testConcurrentUpdates},
		{"EventsDeletedWithSandbox", testEvents},
	}
	tests = append(tests, templateTests...)
	tests = append(tests, prepullTests...)
	tests = append(tests, contextTests...)
	tests = append(tests, pageTests...)
	tests = append(tests, sessionTests...)
	tests = append(tests, llmTests...)
	tests = append(tests, runTests...)
	tests = append(tests, ownerTests...)
	tests = append(tests, metadataTests...)
	tests = append(tests, snapshotTests...)
	tests = append(tests, eventTests...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			defer s.Close()
			tt.fn(t, s)
		})
	}
}

func sample(id string) *store.Sandbox {
	now := time.Now().UTC().Truncate(time.Microsecond)
	exp := now.Add(time.Hour)
	return &store.Sandbox{
		ID: id, Image: "agent2env/python", CPU: "500m", Memory: "512Mi", TTL: 3600,
		Env: map[string]string{"A": "1", "UNICODE": "ü→✓"}, Status: "pending", Runtime: "oci",
		CreatedAt: now, UpdatedAt: now, ExpiresAt: &exp,
		AccessToken: "0123abcd", Spec: []byte(`{"startup":{}}`),
	}
}

func testCreateGet(t *testing.T, s store.Store) {
	ctx := context.Background()
	want := sample("sb1")
	want.Pool, want.ManagedBy = "python", "sessions"
	if err := s.CreateSandbox(ctx, want); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSandbox(ctx, "sb1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("get (-want +got):\n%s", diff)
	}
	never := sample("sb2")
	never.TTL, never.ExpiresAt, never.Env = 0, nil, nil
	if err := s.CreateSandbox(ctx, never); err != nil {
		t.Fatal(err)
	}
	got, err = s.GetSandbox(ctx, "sb2")
	if err != nil || got.ExpiresAt != nil {
		t.Errorf("sandbox without ttl: %+v, %v", got, err)
	}
}

func testDuplicate(t *testing.T, s store.Store) {
	ctx := context.Background()
	if err := s.CreateSandbox(ctx, sample("dup")); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSandbox(ctx, sample("dup")); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("duplicate create: %v, want already exists", err)
	}
}

func testNotFound(t *testing.T, s store.Store) {
	ctx := context.Background()
	checks := map[string]error{}
	_, checks["get"] = s.GetSandbox(ctx, "nope")
	_, checks["update"] = s.UpdateSandbox(ctx, "nope", func(*store.Sandbox) error { return nil })
	checks["delete"] = s.DeleteSandbox(ctx, "nope")
	checks["event"] = s.AddEvent(ctx, store.Event{SandboxID: "nope", At: time.Now(), Status: "x"})
	for op, err := range checks {
		if !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("%s unknown id: %v, want not found", op, err)
		}
	}
}

func testList(t *testing.T, s store.Store) {
	ctx := context.Background()
	got, err := s.ListSandboxes(ctx)
	if err != nil || len(got) != 0 {
		t.Fatalf("empty list = %v, %v", got, err)
	}
	for i := range 3 {
		sb := sample(fmt.Sprintf("l%d", i))
		sb.CreatedAt = sb.CreatedAt.Add(time.Duration(i) * time.Second)
		if err := s.CreateSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	got, err = s.ListSandboxes(ctx)
	if err != nil || len(got) != 3 || got[0].ID != "l0" || got[2].ID != "l2" {
		t.Fatalf("list = %v, %v; want l0..l2 in creation order", got, err)
	}
}

func testUpdate(t *testing.T, s store.Store) {
	ctx := context.Background()
	if err := s.CreateSandbox(ctx, sample("u")); err != nil {
		t.Fatal(err)
	}
	updated, err := s.UpdateSandbox(ctx, "u", func(sb *store.Sandbox) error {
		sb.Status, sb.Reason, sb.ExpiresAt = "running", "agent ready", nil
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := s.GetSandbox(ctx, "u")
	if diff := cmp.Diff(updated, got); diff != "" || got.Status != "running" || got.ExpiresAt != nil {
		t.Errorf("after update (-returned +stored):\n%s\nstored %+v", diff, got)
	}
}

func testUpdateAbort(t *testing.T, s store.Store) {
	ctx := context.Background()
	if err := s.CreateSandbox(ctx, sample("a")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	_, err := s.UpdateSandbox(ctx, "a", func(sb *store.Sandbox) error {
		sb.Status = "failed"
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("update err = %v, want boom", err)
	}
	if got, _ := s.GetSandbox(ctx, "a"); got.Status != "pending" {
		t.Errorf("aborted update was stored: status %q", got.Status)
	}
}

func testConcurrentUpdates(t *testing.T, s store.Store) {
	ctx := context.Background()
	if err := s.CreateSandbox(ctx, sample("c")); err != nil {
		t.Fatal(err)
	}
	const n = 20
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.UpdateSandbox(ctx, "c", func(sb *store.Sandbox) error {
				sb.TTL++
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got, _ := s.GetSandbox(ctx, "c"); got.TTL != 3600+n {
		t.Errorf("ttl = %d after %d increments, want %d: lost updates", got.TTL, n, 3600+n)
	}
}

func testEvents(t *testing.T, s store.Store) {
	ctx := context.Background()
	if err := s.CreateSandbox(ctx, sample("e")); err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Truncate(time.Microsecond)
	want := []store.Event{
		{SandboxID: "e", At: at, Status: "pending", Message: "created"},
		{SandboxID: "e", At: at, Status: "running", Message: "agent ready"},
	}
	for _, ev := range want {
		if err := s.AddEvent(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	got, _, err := s.Events(ctx, "e")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if err := s.DeleteSandbox(ctx, "e"); err != nil {
		t.Fatal(err)
	}
	if got, _, err := s.Events(ctx, "e"); err != nil || len(got) != 0 {
		t.Errorf("events after delete = %v, %v; want none", got, err)
	}
}
