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

var eventTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"EventsWithWrites", testEventsWithWrites},
	{"EventsBounded", testEventsBounded},
	{"EventsBoundedConcurrently", testEventsBoundedConcurrently},
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
		got, _, err := s.Events(ctx, "w")
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
	if got, _, err := s.Events(ctx, "nope"); err != nil || len(got) != 0 {
		t.Errorf("events of the unknown sandbox = %v, %v; want none", got, err)
	}

	// A create refused for its limit stores neither the record nor its
	// events.
	full := &store.LimitError{}
	if err := s.CreateSandboxLimited(ctx, sample("over"), 1, ev("pending", "created")); !errors.As(err, &full) {
		t.Fatalf("create over the limit: err = %v, want a *LimitError", err)
	}
	if got, _, err := s.Events(ctx, "over"); err != nil || len(got) != 0 {
		t.Errorf("events of the refused sandbox = %v, %v; want none", got, err)
	}
	if err := s.CreateSandboxLimited(ctx, sample("under"), 2, ev("pending", "created")); err != nil {
		t.Fatal(err)
	}
	if got, _, err := s.Events(ctx, "under"); err != nil || len(got) != 1 {
		t.Errorf("events of the limited create = %v, %v; want one", got, err)
	}
}

// testEventsBounded checks that a sandbox's history keeps its newest
// store.MaxEvents events, dropped and counted in the write that goes
// beyond, whichever write adds them, and that the count goes with the
// sandbox.
func testEventsBounded(t *testing.T, s store.Store) {
	ctx := context.Background()
	at := time.Now().UTC().Truncate(time.Microsecond)
	added := 0 // events added to sandbox b so far, numbered from 1
	evs := func(n int) []store.Event {
		out := make([]store.Event, n)
		for i := range out {
			added++
			out[i] = store.Event{SandboxID: "b", At: at, Status: "running", Message: fmt.Sprint(added)}
		}
		return out
	}
	update := func(evs []store.Event) error {
		_, err := s.UpdateSandbox(ctx, "b", func(*store.Sandbox) error { return nil }, evs...)
		return err
	}
	steps := []struct {
		name  string
		write func() error
		// The events then kept are those numbered first to added.
		first, dropped int
	}{
		{"create", func() error { return s.CreateSandbox(ctx, sample("b"), evs(1)...) }, 1, 0},
		{"full", func() error { return update(evs(store.MaxEvents - 1)) }, 1, 0},
		{"one more", func() error { return s.AddEvent(ctx, evs(1)[0]) }, 2, 1},
		{"two more in an update", func() error { return update(evs(2)) }, 4, 3},
		{"aborted update", func() error {
			_, err := s.UpdateSandbox(ctx, "b", func(*store.Sandbox) error { return errors.New("abort") }, store.Event{At: at, Status: "failed"})
			if err == nil {
				return errors.New("the update was not aborted")
			}
			return nil
		}, 4, 3},
		{"more than the bound in one update", func() error { return update(evs(store.MaxEvents + 1)) }, store.MaxEvents + 5, store.MaxEvents + 4},
	}
	for _, st := range steps {
		if err := st.write(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		got, dropped, err := s.Events(ctx, "b")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != added-st.first+1 || len(got) > store.MaxEvents ||
			got[0].Message != fmt.Sprint(st.first) || got[len(got)-1].Message != fmt.Sprint(added) {
			t.Errorf("%s: %d events, %s to %s; want %d to %d", st.name, len(got), got[0].Message, got[len(got)-1].Message, st.first, added)
		}
		if dropped != st.dropped {
			t.Errorf("%s: dropped = %d, want %d", st.name, dropped, st.dropped)
		}
	}

	// Another sandbox's history is its own.
	if err := s.CreateSandbox(ctx, sample("c"), store.Event{At: at, Status: "pending", Message: "created"}); err != nil {
		t.Fatal(err)
	}
	if got, dropped, err := s.Events(ctx, "c"); err != nil || len(got) != 1 || dropped != 0 {
		t.Errorf("events of another sandbox = %d, %d dropped, %v; want 1, none dropped", len(got), dropped, err)
	}

	// The count goes with the sandbox: one made again under its id starts
	// afresh.
	if err := s.DeleteSandbox(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSandbox(ctx, sample("b"), store.Event{At: at, Status: "pending", Message: "again"}); err != nil {
		t.Fatal(err)
	}
	if got, dropped, err := s.Events(ctx, "b"); err != nil || len(got) != 1 || dropped != 0 {
		t.Errorf("events of the sandbox made again = %d, %d dropped, %v; want 1, none dropped", len(got), dropped, err)
	}
}

// testEventsBoundedConcurrently checks that a full history stays at
// exactly store.MaxEvents, the others counted dropped, while several
// writers add events to it at once: alone (AddEvent) in the first
// rounds, then half of them with updates of the sandbox. On PostgreSQL a
// write that did not wait for the others dropped the older events it
// saw, not those the others had just added, and an event added during
// an update could deadlock with it.
func testEventsBoundedConcurrently(t *testing.T, s store.Store) {
	ctx := context.Background()
	at := time.Now().UTC().Truncate(time.Microsecond)
	full := make([]store.Event, store.MaxEvents)
	for i := range full {
		full[i] = store.Event{At: at, Status: "running", Message: "full"}
	}
	if err := s.CreateSandbox(ctx, sample("many"), full...); err != nil {
		t.Fatal(err)
	}
	const rounds, alone, writers = 6, 3, 8
	total := store.MaxEvents
	for round := range rounds {
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := range writers {
			ev := store.Event{SandboxID: "many", At: at, Status: "running", Message: fmt.Sprintf("%d.%d", round, w)}
			update := round >= alone && w%2 == 1
			wg.Go(func() {
				if update {
					_, err := s.UpdateSandbox(ctx, "many", func(*store.Sandbox) error { return nil }, ev, ev)
					errs <- err
					return
				}
				errs <- s.AddEvent(ctx, ev)
			})
			if update {
				total += 2
			} else {
				total++
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		got, dropped, err := s.Events(ctx, "many")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != store.MaxEvents || dropped != total-store.MaxEvents {
			t.Errorf("round %d: %d events, %d dropped; want %d, %d dropped", round, len(got), dropped, store.MaxEvents, total-store.MaxEvents)
		}
	}
}

// CheckEventsCut checks that each sandbox of histories, given that many
// events with the messages "0", "1"… before s cut them (a migration),
// keeps its newest store.MaxEvents and counts the others dropped.
func CheckEventsCut(t *testing.T, s store.Store, histories map[string]int) {
	t.Helper()
	for id, n := range histories {
		evs, dropped, err := s.Events(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		wantDropped := max(n-store.MaxEvents, 0)
		if len(evs) != n-wantDropped || dropped != wantDropped || evs[0].Message != fmt.Sprint(wantDropped) {
			t.Errorf("%s: %d events from %s, %d dropped; want %d from %d, %d dropped",
				id, len(evs), evs[0].Message, dropped, n-wantDropped, wantDropped, wantDropped)
		}
	}
}
