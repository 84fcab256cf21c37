package image

import (
	"context"
	"sort"
	"sync"
	"time"
)

// group runs at most one operation per key at a time and shares it, its
// progress and its result with every caller that asks for the same key
// while it runs. Unlike singleflight, a caller that gives up (its ctx is
// done) leaves the operation running for the others; the operation is
// cancelled only when no caller waits for it any more.
//
// The zero value is ready to use.
type group[T any] struct {
	mu    sync.Mutex
	calls map[string]*call[T]
}

// call is one shared operation.
type call[T any] struct {
	done    chan struct{}
	cancel  context.CancelFunc
	started time.Time
	val     T
	err     error

	mu      sync.Mutex // guards the fields below and serializes progress
	waiters int
	subs    map[*ProgressFunc]struct{}
	last    []Progress     // latest progress per phase and item, replayed to joiners
	lastIdx map[string]int // phase+item → index in last
	latest  Progress       // the last event, for those who ask how it goes
}

// do runs fn under key, or joins the run already in progress. fn gets a
// context that is cancelled when the last waiter is gone, and a progress
// function that fans out to every waiter. A caller whose ctx ends returns
// ctx.Err() at once, unless it was the last one waiting: that one returns
// after fn, so fn must return soon after its context is cancelled.
func (g *group[T]) do(ctx context.Context, key string, p ProgressFunc, fn func(context.Context, ProgressFunc) (T, error)) (T, error) {
	if err := ctx.Err(); err != nil {
		var zero T
		return zero, err
	}
	g.mu.Lock()
	if g.calls == nil {
		g.calls = make(map[string]*call[T])
	}
	c, ok := g.calls[key]
	if !ok {
		// The operation outlives the caller that started it, so it keeps
		// ctx's values but not its cancellation.
		opCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		c = &call[T]{
			done:    make(chan struct{}),
			cancel:  cancel,
			started: time.Now(),
			subs:    make(map[*ProgressFunc]struct{}),
			lastIdx: make(map[string]int),
		}
		g.calls[key] = c
		go func() {
			defer cancel()
			v, err := fn(opCtx, c.emit)
			g.mu.Lock()
			if g.calls[key] == c {
				delete(g.calls, key)
			}
			c.val, c.err = v, err
			g.mu.Unlock()
			close(c.done)
		}()
	}
	sub := c.subscribe(p, 1)
	g.mu.Unlock()

	select {
	case <-c.done:
		c.unsubscribe(sub)
		return c.val, c.err
	case <-ctx.Done():
		g.mu.Lock()
		c.mu.Lock()
		delete(c.subs, sub)
		c.waiters--
		last := c.waiters == 0
		if last {
			// Nobody wants the result: stop the operation, and let the
			// next caller start afresh rather than join a dying run.
			c.cancel()
			if g.calls[key] == c {
				delete(g.calls, key)
			}
		}
		c.mu.Unlock()
		g.mu.Unlock()
		if last {
			// Return only once the operation has stopped and cleaned up,
			// so that a cancelled call leaves nothing running behind it.
			<-c.done
		}
		var zero T
		return zero, ctx.Err()
	}
}

// follow waits for the operation in flight under key, if there is one
// (ok), passing its progress so far and from now on to p, and returns its
// result. Unlike a waiter of do, a follower neither keeps the operation
// running nor stops it by leaving: ctx's end only ends its own wait.
func (g *group[T]) follow(ctx context.Context, key string, p ProgressFunc) (val T, err error, ok bool) {
	g.mu.Lock()
	c, ok := g.calls[key]
	if !ok {
		g.mu.Unlock()
		return val, nil, false
	}
	sub := c.subscribe(p, 0)
	g.mu.Unlock()
	defer c.unsubscribe(sub)
	select {
	case <-c.done:
		return c.val, c.err, true
	case <-ctx.Done():
		return val, ctx.Err(), true
	}
}

// flight is an operation in flight, as running reports it.
type flight struct {
	key     string
	started time.Time
	latest  Progress
}

// running returns the operations in flight, ordered by key.
func (g *group[T]) running() []flight {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]flight, 0, len(g.calls))
	for key, c := range g.calls {
		c.mu.Lock()
		out = append(out, flight{key: key, started: c.started, latest: c.latest})
		c.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

// subscribe replays the progress so far to p and has emit send it the
// rest, counting waiters more callers that wait for the result; the
// caller holds the group's lock.
func (c *call[T]) subscribe(p ProgressFunc, waiters int) *ProgressFunc {
	sub := &p
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waiters += waiters
	if p != nil {
		for _, ev := range c.last {
			p(ev)
		}
		c.subs[sub] = struct{}{}
	}
	return sub
}

// unsubscribe stops sending progress to sub.
func (c *call[T]) unsubscribe(sub *ProgressFunc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.subs, sub)
}

// emit sends ev to every current waiter.
func (c *call[T]) emit(ev Progress) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.latest = ev
	k := ev.Phase + "\x00" + ev.Item
	if i, ok := c.lastIdx[k]; ok {
		c.last[i] = ev
	} else {
		c.lastIdx[k] = len(c.last)
		c.last = append(c.last, ev)
	}
	for sub := range c.subs {
		(*sub)(ev)
	}
}

// report calls p if it is set.
func report(p ProgressFunc, ev Progress) {
	if p != nil {
		p(ev)
	}
}
