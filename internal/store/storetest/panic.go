package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/store"
)

// testUpdatePanic checks that an UpdateSandbox callback that panics
// panics in UpdateSandbox's caller (which can recover it, as a server
// recovers a request's panic) rather than ending the process, leaves the
// sandbox and its events as they were, and that the store goes on.
func testUpdatePanic(t *testing.T, s store.Store) {
	ctx := context.Background()
	if err := s.CreateSandbox(ctx, sample("sb1")); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if v := recover(); v == nil {
				t.Error("UpdateSandbox returned; want its callback's panic")
			}
		}()
		_, _ = s.UpdateSandbox(ctx, "sb1", func(sb *store.Sandbox) error {
			sb.Status = "running"
			panic("callback bug")
		}, store.Event{At: time.Now().UTC(), Status: "running", Message: "started"})
	}()
	sb, err := s.GetSandbox(ctx, "sb1")
	if err != nil || sb.Status != "pending" {
		t.Fatalf("after the panic: %+v, %v; want status pending", sb, err)
	}
	if evs, _, err := s.Events(ctx, "sb1"); err != nil || len(evs) != 0 {
		t.Errorf("events after the panic: %+v, %v; want none", evs, err)
	}
	if _, err := s.UpdateSandbox(ctx, "sb1", func(sb *store.Sandbox) error { sb.Status = "running"; return nil }); err != nil {
		t.Errorf("update after the panic: %v", err)
	}
}
