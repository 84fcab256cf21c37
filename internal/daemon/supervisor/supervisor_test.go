package supervisor

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// records is a slog.Handler that keeps each record's message and
// attributes, as text, for the test to look for.
type records struct {
	mu  sync.Mutex
	got []string
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }

func (r *records) Handle(_ context.Context, rec slog.Record) error {
	line := rec.Message
	rec.Attrs(func(a slog.Attr) bool {
		line += " " + a.String()
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, line)
	return nil
}

// find returns the first record that starts with msg, or "".
func (r *records) find(msg string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, line := range r.got {
		if strings.HasPrefix(line, msg) {
			return line
		}
	}
	return ""
}

func newSupervisor(t *testing.T) (*Supervisor, *records) {
	t.Helper()
	log := &records{}
	return New(slog.New(log)), log
}

// run runs s in the background and returns a func that cancels it and
// returns Run's result, failing the test if Run does not return within 5s.
func run(t *testing.T, s *Supervisor) (stop func() error, done <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Run(ctx) }()
	t.Cleanup(cancel)
	return func() error {
		cancel()
		select {
		case err := <-errc:
			return err
		case <-time.After(5 * time.Second):
			t.Fatalf("Run still waiting 5s after cancel; running: %v", s.Running())
			return nil
		}
	}, errc
}

// waitFor waits up to 5s for ch.
func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("no %s within 5s", what)
	}
}

// Run ends every loop's context and returns only once each has returned,
// however long a loop takes to finish.
func TestRunWaitsForLoops(t *testing.T) {
	s, _ := newSupervisor(t)
	var finished atomic.Int32
	started := make(chan struct{}, 3)
	for _, name := range []string{"a", "b", "c"} {
		s.Go(name, func(ctx context.Context) error {
			started <- struct{}{}
			<-ctx.Done()
			time.Sleep(50 * time.Millisecond) // a loop's own clean-up
			finished.Add(1)
			return ctx.Err()
		})
	}
	stop, _ := run(t, s)
	for range 3 {
		waitFor(t, started, "start")
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, s.Running()); diff != "" {
		t.Errorf("Running (-want +got):\n%s", diff)
	}
	if err := stop(); err != nil {
		t.Errorf("Run after cancel: %v, want nil", err)
	}
	if n := finished.Load(); n != 3 {
		t.Errorf("Run returned with %d of 3 loops finished", n)
	}
	if got := s.Running(); len(got) != 0 {
		t.Errorf("still running after Run: %v", got)
	}
}

// A loop that panics, fails or returns before it is told to stop is logged
// and run again.
func TestRestart(t *testing.T) {
	tests := []struct {
		name    string
		fail    func() error
		wantLog string
	}{
		{"panic", func() error { panic("boom") }, "panic: boom"},
		{"error", func() error { return errors.New("lost the store") }, "lost the store"},
		{"early return", func() error { return nil }, "returned before it was told to stop"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, log := newSupervisor(t)
			var runs atomic.Int32
			again := make(chan struct{})
			s.Go("flaky", func(ctx context.Context) error {
				if runs.Add(1) == 1 {
					return tt.fail()
				}
				close(again)
				<-ctx.Done()
				return nil
			}, Backoff(time.Millisecond, 10*time.Millisecond))
			stop, _ := run(t, s)
			waitFor(t, again, "restart")
			if err := stop(); err != nil {
				t.Errorf("Run: %v", err)
			}
			if got := log.find("loop failed: restarting"); !strings.Contains(got, "loop=flaky") || !strings.Contains(got, tt.wantLog) {
				t.Errorf("restart logged as %q; want the loop's name and %q", got, tt.wantLog)
			}
		})
	}
}

// A panic's stack says where it happened.
func TestPanicStack(t *testing.T) {
	err := runOnce(context.Background(), &loop{run: func(context.Context) error { panic("boom") }})
	var pe *PanicError
	if !errors.As(err, &pe) || pe.Value != "boom" || !bytes.Contains(pe.Stack, []byte("TestPanicStack")) {
		t.Errorf("runOnce of a panicking loop: %v", err)
	}
}

// Failures in a row wait longer each time (at least first, 2×first,
// 4×first), up to the limit.
func TestBackoffGrows(t *testing.T) {
	s, _ := newSupervisor(t)
	const first = 20 * time.Millisecond
	var mu sync.Mutex
	var at []time.Time
	fourth := make(chan struct{})
	s.Go("failing", func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if at = append(at, time.Now()); len(at) == 5 {
			close(fourth)
		}
		if len(at) >= 5 {
			<-ctx.Done()
			return nil
		}
		return errors.New("again")
	}, Backoff(first, 3*first))
	stop, _ := run(t, s)
	waitFor(t, fourth, "fifth run")
	stop()
	mu.Lock()
	defer mu.Unlock()
	for i, want := range []time.Duration{first, 2 * first, 3 * first, 3 * first} {
		if gap := at[i+1].Sub(at[i]); gap < want {
			t.Errorf("restart %d came after %v, want at least %v", i+1, gap, want)
		}
	}
}

// A critical loop's failure is not restarted: Run ends the other loops,
// waits for them and returns the failure.
func TestCriticalStops(t *testing.T) {
	s, _ := newSupervisor(t)
	boom := errors.New("archive lost")
	var otherDone atomic.Bool
	s.Go("other", func(ctx context.Context) error {
		<-ctx.Done()
		otherDone.Store(true)
		return nil
	})
	var runs atomic.Int32
	s.Go("flusher", func(ctx context.Context) error {
		runs.Add(1)
		return boom
	}, Critical())
	_, done := run(t, s)
	select {
	case err := <-done:
		if !errors.Is(err, boom) || !strings.Contains(err.Error(), "loop flusher") {
			t.Errorf("Run: %v, want the flusher's failure", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run still running 5s after a critical loop failed")
	}
	if !otherDone.Load() {
		t.Error("Run returned before the other loop did")
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("critical loop ran %d times, want 1", n)
	}
}

// Go while Run runs starts the loop at once; Go after Run returned does
// not run it; Run runs once.
func TestGoWhileAndAfterRun(t *testing.T) {
	s, log := newSupervisor(t)
	stop, _ := run(t, s)
	started := make(chan struct{})
	s.Go("late", func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		return nil
	})
	waitFor(t, started, "start of a loop registered while running")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	s.Go("too late", func(ctx context.Context) error {
		t.Error("a loop registered after Run returned ran")
		return nil
	})
	if log.find("loop registered after the supervisor stopped") == "" {
		t.Error("registering after Run logged nothing")
	}
	if err := s.Run(context.Background()); err == nil {
		t.Error("second Run: no error")
	}
}
