package run

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/store"
)

// startsFirst is a store on which the run starts (as execute starts it:
// its stop set, then its record running) just before the first update
// of the run someone else makes: the race of a cancel with the start.
type startsFirst struct {
	store.Runs
	start func()
}

func (s *startsFirst) UpdateRun(ctx context.Context, id string, fn func(*store.Run) error) (*store.Run, error) {
	if start := s.start; start != nil {
		s.start = nil
		start()
	}
	return s.Runs.UpdateRun(ctx, id, fn)
}

// TestCancelAsTheRunStarts: a run that starts between Cancel finding it
// not started and Cancel ending it as queued is cancelled all the same.
// (Cancel found the record running and returned it so, and the run went
// on.)
func TestCancelAsTheRunStarts(t *testing.T) {
	st := &startsFirst{Runs: newStore(t)}
	s := newRetainer(t, st, 0)
	const id = "run-1"
	record(t, st.Runs, id, "", api.RunQueued, time.Now())
	j := &job{id: id}
	s.jobs[id] = j // submitted, not started
	runCtx, stop := context.WithCancelCause(bg)
	defer stop(nil)
	st.start = func() {
		j.mu.Lock()
		j.stop = stop
		j.mu.Unlock()
		if _, err := st.Runs.UpdateRun(bg, id, func(r *store.Run) error {
			r.Status, r.Phase = string(api.RunRunning), api.PhaseCreate
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Cancel(bg, id); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if cause := context.Cause(runCtx); !errors.Is(cause, errCancelled) {
		t.Errorf("the run started as it was cancelled goes on (its context's cause: %v)", cause)
	}
}
