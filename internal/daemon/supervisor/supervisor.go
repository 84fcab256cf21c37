// Package supervisor runs a daemon's background loops (the sandbox sweep,
// one refill loop per warm pool, the session reaper, the LLM keys' usage,
// the LLM archive's retention, the task runs, the built-in images'
// prebuild) under one owner: each loop has a name, a loop that returns or panics before it is
// told to stop is logged and restarted after a back-off, and Run stops them
// all and waits for them together. A loop marked Critical is not restarted:
// its failure ends Run, with its error, so that the daemon stops.
//
// A loop is a func(ctx) error that runs until ctx ends. The supervisor
// knows nothing of what loops do; the daemon registers them with Go while
// it wires its services and runs them from Serve.
package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"time"
)

// Log attribute key of a loop's name.
const logLoop = "loop"

// Default back-off between a loop's failure and its restart: doubled on
// each failure in a row, up to the maximum.
const (
	DefaultMinBackoff = time.Second
	DefaultMaxBackoff = time.Minute
)

// Option configures one loop.
type Option func(*loop)

// Critical makes the loop's failure stop the supervisor (and so the
// daemon) instead of restarting the loop. Give it to loops the daemon is
// wrong without: one whose loss would lose data, not one that only falls
// behind while it waits to restart.
func Critical() Option { return func(l *loop) { l.critical = true } }

// Backoff sets the loop's restart back-off: first after the first
// failure, doubled on each failure in a row, at most limit. A run that
// lasted longer than limit before it failed starts again from first.
func Backoff(first, limit time.Duration) Option {
	return func(l *loop) { l.minBackoff, l.maxBackoff = first, max(first, limit) }
}

// loop is one registered loop.
type loop struct {
	name                   string
	run                    func(ctx context.Context) error
	critical               bool
	minBackoff, maxBackoff time.Duration
}

// Supervisor runs loops. Its methods are safe for concurrent use; the zero
// value is not usable, create it with New. It runs once: Go after Run has
// returned does nothing.
type Supervisor struct {
	log *slog.Logger

	mu      sync.Mutex
	loops   []*loop
	ctx     context.Context // of Run; nil before and after it
	fail    context.CancelCauseFunc
	running map[string]int // loops running now, by name
	done    bool           // Run has returned
	wg      sync.WaitGroup
}

// New returns a Supervisor that logs to log (slog.Default() when nil).
func New(log *slog.Logger) *Supervisor {
	if log == nil {
		log = slog.Default()
	}
	return &Supervisor{log: log, running: map[string]int{}}
}

// Go registers run as the loop name. Loops registered before Run start
// when it does; a loop registered while Run runs starts at once. run must
// return soon after its ctx ends; its error then is not a failure.
func (s *Supervisor) Go(name string, run func(ctx context.Context) error, opts ...Option) {
	l := &loop{name: name, run: run, minBackoff: DefaultMinBackoff, maxBackoff: DefaultMaxBackoff}
	for _, o := range opts {
		o(l)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		s.log.Warn("loop registered after the supervisor stopped: not run", logLoop, name)
		return
	}
	s.loops = append(s.loops, l)
	if s.ctx != nil {
		s.start(s.ctx, l)
	}
}

// Run runs every loop until ctx ends or a critical loop fails, then ends
// the other loops' contexts and waits for all of them to return. It
// returns nil when ctx ended, or the critical loop's failure. Call it
// once; a caller that cannot wait for a loop that ignores its context
// bounds Run itself, and Running says which loops are still running.
func (s *Supervisor) Run(ctx context.Context) error {
	ctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	s.mu.Lock()
	if s.ctx != nil || s.done {
		s.mu.Unlock()
		return errors.New("supervisor: Run called twice")
	}
	s.ctx, s.fail = ctx, fail
	for _, l := range s.loops {
		s.start(ctx, l)
	}
	s.mu.Unlock()

	<-ctx.Done()
	s.mu.Lock()
	s.ctx, s.done = nil, true
	s.mu.Unlock()
	s.wg.Wait()
	if err := context.Cause(ctx); !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// Running returns the names of the loops running now, sorted.
func (s *Supervisor) Running() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for name, n := range s.running {
		for range n {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// start runs l in its own goroutine until ctx ends. The caller holds s.mu.
func (s *Supervisor) start(ctx context.Context, l *loop) {
	s.wg.Add(1)
	s.running[l.name]++
	go func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			if s.running[l.name]--; s.running[l.name] <= 0 {
				delete(s.running, l.name)
			}
			s.mu.Unlock()
		}()
		s.keep(ctx, l)
	}()
}

// keep runs l, and again after each failure, until ctx ends.
func (s *Supervisor) keep(ctx context.Context, l *loop) {
	backoff := l.minBackoff
	for {
		began := time.Now()
		err := runOnce(ctx, l)
		if ctx.Err() != nil {
			return // told to stop: whatever it returned is not a failure
		}
		if err == nil {
			err = errors.New("returned before it was told to stop")
		}
		err = fmt.Errorf("loop %s: %w", l.name, err)
		if l.critical {
			s.log.Error("critical loop failed: stopping", logLoop, l.name, "err", err)
			s.fail(err)
			return
		}
		if time.Since(began) > l.maxBackoff {
			backoff = l.minBackoff // it had been running fine
		}
		s.log.Error("loop failed: restarting", logLoop, l.name, "err", err, "retry_in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, l.maxBackoff)
	}
}

// PanicError is a loop's panic, recovered, with the stack where it
// happened.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v\n%s", e.Value, e.Stack) }

// runOnce runs l once, turning a panic into a *PanicError.
func runOnce(ctx context.Context, l *loop) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return l.run(ctx)
}
