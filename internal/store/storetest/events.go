package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

var eventTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"EventsWithWrites", testEventsWithWrites},
}

// testEventsWithWrites checks that a write's events are stored with it,
// under its sandbox whatever their own SandboxID, and not at all when the
// write fails.
func testEventsWithWrites(t *testing.T, s store.Store) {
	ctx := context.Background()
	at := time.Now().UTC().Truncate(time.Microsecond)
	ev := func(status, msg string) store.Event {
		return store.Event{SandboxID: "elsewhere", At: at, Status: status, Message: msg}
	}
	abort := errors.New("abort")
	setStatus := func(status string) func(*store.Sandbox) error {
		return func(sb *store.Sandbox) error { sb.Status = status; return nil }
	}
	steps := []struct {
		name    string
		write   func() error
		wantErr error // matched with errors.Is
		want    []string
	}{
		{"create", func() error { return s.CreateSandbox(ctx, sample("w"), ev("pending", "created")) }, nil,
			[]string{"pending created"}},
		{"duplicate create", func() error { return s.CreateSandbox(ctx, sample("w"), ev("pending", "again")) }, errdefs.ErrAlreadyExists,
			[]string{"pending created"}},
		{"update", func() error {
			_, err := s.UpdateSandbox(ctx, "w", setStatus("running"), ev("running", "started"), ev("running", "ready"))
			return err
		}, nil, []string{"pending created", "running started", "running ready"}},
		{"aborted update", func() error {
			_, err := s.UpdateSandbox(ctx, "w", func(*store.Sandbox) error { return abort }, ev("failed", "lost"))
			return err
		}, abort, []string{"pending created", "running started", "running ready"}},
		{"update without events", func() error { _, err := s.UpdateSandbox(ctx, "w", setStatus("paused")); return err }, nil,
			[]string{"pending created", "running started", "running ready"}},
		{"update of an unknown sandbox", func() error {
			_, err := s.UpdateSandbox(ctx, "nope", setStatus("running"), ev("running", "started"))
			return err
		}, errdefs.ErrNotFound, []string{"pending created", "running started", "running ready"}},
	}
	for _, st := range steps {
		err := st.write()
		if (st.wantErr == nil && err != nil) || (st.wantErr != nil && !errors.Is(err, st.wantErr)) {
			t.Fatalf("%s: err = %v, want %v", st.name, err, st.wantErr)
		}
		got, err := s.Events(ctx, "w")
		if err != nil {
			t.Fatal(err)
		}
		var msgs []string
		for _, e := range got {
			if e.SandboxID != "w" || !e.At.Equal(at) {
				t.Errorf("%s: event %+v, want sandbox w at %v", st.name, e, at)
			}
			msgs = append(msgs, e.Status+" "+e.Message)
		}
		if diff := cmp.Diff(st.want, msgs); diff != "" {
			t.Errorf("%s: events (-want +got):\n%s", st.name, diff)
		}
	}
	if got, err := s.Events(ctx, "nope"); err != nil || len(got) != 0 {
		t.Errorf("events of the unknown sandbox = %v, %v; want none", got, err)
	}

	// A create refused for its limit stores neither the record nor its
	// events.
	full := &store.LimitError{}
	if err := s.CreateSandboxLimited(ctx, sample("over"), 1, ev("pending", "created")); !errors.As(err, &full) {
		t.Fatalf("create over the limit: err = %v, want a *LimitError", err)
	}
	if got, err := s.Events(ctx, "over"); err != nil || len(got) != 0 {
		t.Errorf("events of the refused sandbox = %v, %v; want none", got, err)
	}
	if err := s.CreateSandboxLimited(ctx, sample("under"), 2, ev("pending", "created")); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Events(ctx, "under"); err != nil || len(got) != 1 {
		t.Errorf("events of the limited create = %v, %v; want one", got, err)
	}
}
