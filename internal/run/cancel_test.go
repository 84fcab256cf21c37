package run

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/contexts/contextstest"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/service"
	"github.com/agent2env/agent2env/internal/store"
	tasks "github.com/agent2env/agent2env/internal/task"
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

// failsCreate is a store whose CreateRun fails from the nth call on.
type failsCreate struct {
	store.Runs
	n, calls int
}

func (s *failsCreate) CreateRun(ctx context.Context, r *store.Run) error {
	if s.calls++; s.calls >= s.n {
		return errors.New("the store is out of reach")
	}
	return s.Runs.CreateRun(ctx, r)
}

// TestSubmitFailsMidway: a submission whose runs cannot all be recorded
// leaves none: not the records made before the failure (left queued,
// listed and never run until a restart ended them), not its files.
func TestSubmitFailsMidway(t *testing.T) {
	ce := contextstest.NewEnv(t, manager.Config{KeepDeadFiles: []string{ManagedBy}}, nil)
	st := &failsCreate{Runs: ce.St, n: 3}
	s, err := New(Config{Dir: filepath.Join(t.TempDir(), "runs")}, service.NewSandboxes(ce.M, ""), st, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(bg, api.RunSubmitRequest{Task: "name: t\nagent: custom\ngoal: g\nentrypoint: 'true'\n", Repeats: 4}); err == nil {
		t.Fatal("submit: no error from a store that failed")
	}
	if list, err := s.List(bg, ListOptions{}); err != nil || len(list.Items) != 0 {
		t.Errorf("runs left by a failed submission: %+v, %v", list, err)
	}
	if len(s.jobs) != 0 || len(s.queue) != 0 {
		t.Errorf("jobs %v, queue %v left by a failed submission", s.jobs, s.queue)
	}
	if ents, _ := os.ReadDir(s.batchesDir()); len(ents) != 0 {
		t.Errorf("files left by a failed submission: %v", ents)
	}
}

// TestMaxTimeoutIsTheExecLimit: the longest timeout a task may give is
// the longest its agent's command may run, so that a run's timeout is
// what ends it. (A task could ask for 48h, and its agent was killed at
// 24h, the run reported as past its timeout of 48h.)
func TestMaxTimeoutIsTheExecLimit(t *testing.T) {
	if got, want := time.Duration(tasks.MaxTimeout), service.MaxExecTimeout; got != want {
		t.Errorf("task.MaxTimeout = %s; the sandbox service runs a command at most %s", got, want)
	}
}

// TestCancelOnAnotherDaemon: a run another daemon of the store carries
// out, cancelled here, is cancelled there, its artifacts collected and its
// sandbox deleted. (Cancel answered with the run running, and it went on
// to its end.)
func TestCancelOnAnotherDaemon(t *testing.T) {
	ce := contextstest.NewEnv(t, manager.Config{KeepDeadFiles: []string{ManagedBy}}, nil)
	notes := &store.LocalNotifier{}
	daemon := func(owner string) *Service {
		s, err := New(Config{Dir: filepath.Join(t.TempDir(), owner), Owner: owner, Tick: 50 * time.Millisecond},
			service.NewSandboxes(ce.M, ""), ce.St, slog.New(slog.DiscardHandler), WithNotifier(notes))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	e := &env{Env: ce, svc: daemon("a")}
	e.start(t)
	other := daemon("b") // serves the API only: its loop does not run
	b := e.submit(t, taskYAML("echo c > c.txt; echo wrote; sleep 300", "10m", "true", "1m", "30s"), api.RunSubmitRequest{})
	id := b.Runs[0].ID
	waitOutput(t, e, id, "wrote")
	if r, err := other.Cancel(bg, id); err != nil || r.Status.Final() {
		t.Fatalf("cancel on the other daemon: %+v, %v; want the run, still running", r, err)
	}
	runs := e.wait(t, b, 10*time.Second)
	if r := runs[0]; r.Status != api.RunCancelled || r.Reason != reasonCancelled || len(r.Artifacts) != 1 {
		t.Errorf("the run cancelled on the other daemon: %s %q, artifacts %+v", r.Status, r.Reason, r.Artifacts)
	}
	e.noSandboxes(t)
}
