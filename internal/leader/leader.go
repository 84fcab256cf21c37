// Package leader elects one leader among the daemons that share a store,
// for the background work that must happen once however many daemons
// there are (the sandbox sweep, the warm pools' refills, the session
// reaper, the LLM archive's retention).
//
// The store gives the lock (Lock): on PostgreSQL a session-level advisory
// lock held on a connection of its own, which the server releases when
// that connection ends, whether its daemon shut down, died or lost the
// network; on SQLite, whose file one daemon owns, a lock always held
// (Always). An Elector campaigns for the lock (Run), retrying every few
// seconds while another daemon holds it, and runs the leader's work
// (WhileLeader) only while it holds it: when its lock is lost the work's
// context ends, and the elector campaigns again. So when the leader dies
// another daemon leads within the retry period plus the time the server
// takes to notice the dead connection.
package leader

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Lock is the leadership lock of one store.
type Lock interface {
	// TryLock takes the lock if it is free and returns it held; nil and
	// no error when another holder has it.
	TryLock(ctx context.Context) (Held, error)
}

// Held is a lock taken.
type Held interface {
	// Lost is closed when the lock is no longer held (its connection
	// ended) without Unlock.
	Lost() <-chan struct{}
	// Unlock gives the lock up; it may be called after Lost.
	Unlock()
}

// DefaultRetry is how often an elector that is not the leader tries to
// take the lock.
const DefaultRetry = 2 * time.Second

// Elector campaigns for a Lock and runs the leader's work while it holds
// it. Its methods are safe for concurrent use; create it with New.
type Elector struct {
	lock  Lock
	log   *slog.Logger
	retry time.Duration

	mu sync.Mutex
	// term is the context of the current leadership, nil while not
	// leading; changed is closed, and replaced, when it changes.
	term    context.Context
	changed chan struct{}
	// first is the lock TryLead took, for Run to lead with.
	first Held
}

// Option configures an Elector.
type Option func(*Elector)

// WithRetry sets how often a follower tries to take the lock (default
// DefaultRetry).
func WithRetry(d time.Duration) Option { return func(e *Elector) { e.retry = d } }

// New returns an Elector for lock that logs to log (slog.Default() when
// nil).
func New(lock Lock, log *slog.Logger, opts ...Option) *Elector {
	if log == nil {
		log = slog.Default()
	}
	e := &Elector{lock: lock, log: log, retry: DefaultRetry, changed: make(chan struct{})}
	for _, o := range opts {
		o(e)
	}
	return e
}

// Leading reports whether this elector leads now.
func (e *Elector) Leading() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.term != nil
}

// setTerm makes ctx the current term (nil: none) and wakes the waiters.
func (e *Elector) setTerm(ctx context.Context) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.term = ctx
	close(e.changed)
	e.changed = make(chan struct{})
}

// TryLead tries the lock once, before Run: true when it took it, and Run
// then leads with it from its start. A daemon that is the first of its
// store to start (no other leads) may recover what the previous ones
// left; one joining others must not. Close gives the lock up if Run never
// runs.
func (e *Elector) TryLead(ctx context.Context) (bool, error) {
	h, err := e.lock.TryLock(ctx)
	if err != nil || h == nil {
		return false, err
	}
	e.mu.Lock()
	e.first = h
	e.mu.Unlock()
	return true, nil
}

// Close gives up the lock TryLead took if Run has not taken it over.
func (e *Elector) Close() {
	e.mu.Lock()
	h := e.first
	e.first = nil
	e.mu.Unlock()
	if h != nil {
		h.Unlock()
	}
}

// Run campaigns until ctx ends: it takes the lock when it is free, leads
// until the lock is lost, and tries again every retry period. It logs
// each change of role. It returns ctx's error.
func (e *Elector) Run(ctx context.Context) error {
	following := false
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		e.mu.Lock()
		h, err := e.first, error(nil)
		e.first = nil
		e.mu.Unlock()
		if h == nil {
			h, err = e.lock.TryLock(ctx)
		}
		switch {
		case err != nil && ctx.Err() == nil:
			e.log.Warn("leader election: cannot try the lock", "err", err, "retry_in", e.retry)
		case h != nil:
			e.lead(ctx, h)
			following = false
		case !following && err == nil:
			e.log.Info("leader election: another daemon leads; this one follows", "retry", e.retry)
			following = true
		}
		t.Reset(e.retry)
	}
}

// lead is one term: it runs until h is lost or ctx ends, then gives the
// lock up.
func (e *Elector) lead(ctx context.Context, h Held) {
	term, end := context.WithCancel(ctx)
	e.log.Info("leader election: this daemon leads")
	e.setTerm(term)
	select {
	case <-h.Lost():
		e.log.Warn("leader election: leadership lost (the lock's connection ended); stopping the leader's loops")
	case <-ctx.Done():
	}
	end()
	e.setTerm(nil)
	h.Unlock()
}

// WhileLeader runs fn whenever this elector leads, with a context that
// ends with the leadership (or ctx), until ctx ends. An error fn returns
// while the leadership holds is returned (the caller restarts it); ctx's
// error is returned when it ends.
func (e *Elector) WhileLeader(ctx context.Context, fn func(ctx context.Context) error) error {
	for {
		term, err := e.waitTerm(ctx)
		if err != nil {
			return err
		}
		runCtx, cancel := context.WithCancel(ctx)
		stop := context.AfterFunc(term, cancel)
		err = fn(runCtx)
		stop()
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if term.Err() == nil {
			return err
		}
	}
}

// waitTerm waits until this elector leads and returns the term's
// context, or ctx's error.
func (e *Elector) waitTerm(ctx context.Context) (context.Context, error) {
	for {
		e.mu.Lock()
		term, changed := e.term, e.changed
		e.mu.Unlock()
		if term != nil && term.Err() == nil {
			return term, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-changed:
		}
	}
}

// Always is the lock of a store that one daemon owns (SQLite): always
// free, never lost.
type Always struct{}

// TryLock returns the lock held.
func (Always) TryLock(context.Context) (Held, error) { return always{}, nil }

type always struct{}

func (always) Lost() <-chan struct{} { return nil }
func (always) Unlock()               {}
