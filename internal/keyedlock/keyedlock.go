// Package keyedlock provides one mutual-exclusion lock per key (a sandbox
// id, a session name) without keeping a lock for every key ever used.
//
// A key's entry exists only while some goroutine holds or waits for its
// lock: each entry counts them, and the last to leave deletes it. So the
// map is as large as the number of keys in use, whatever keys clients
// choose, and an entry is never deleted while another goroutine is about
// to lock it (which would let a newcomer make a second lock for the same
// key and hold it at the same time).
package keyedlock

import (
	"context"
	"sync"
)

// Locks is a set of locks, one per key. The zero value is ready to use;
// a Locks must not be copied after first use. It is safe for concurrent
// use.
type Locks struct {
	mu sync.Mutex
	m  map[string]*entry
}

type entry struct {
	// token is held by whoever holds the lock: a channel rather than a
	// sync.Mutex, so that waiting can end with a context.
	token chan struct{}
	refs  int // holders and waiters; guarded by Locks.mu
}

// Lock waits for key's lock and returns the function that releases it.
// Calling that function more than once releases the lock once.
func (l *Locks) Lock(key string) (unlock func()) {
	e := l.enter(key)
	e.token <- struct{}{}
	return l.unlocker(key, e)
}

// LockContext is Lock that gives up when ctx is done first, returning
// ctx's error and holding nothing.
func (l *Locks) LockContext(ctx context.Context, key string) (unlock func(), err error) {
	e := l.enter(key)
	select {
	case e.token <- struct{}{}:
		return l.unlocker(key, e), nil
	case <-ctx.Done():
		l.leave(key, e)
		return nil, ctx.Err()
	}
}

// TryLock takes key's lock if it is free, without waiting.
func (l *Locks) TryLock(key string) (unlock func(), ok bool) {
	e := l.enter(key)
	select {
	case e.token <- struct{}{}:
		return l.unlocker(key, e), true
	default:
		l.leave(key, e)
		return nil, false
	}
}

// Len returns how many keys are held or waited for.
func (l *Locks) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}

// enter finds or makes key's entry and counts the caller in it.
func (l *Locks) enter(key string) *entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = make(map[string]*entry)
	}
	e := l.m[key]
	if e == nil {
		e = &entry{token: make(chan struct{}, 1)}
		l.m[key] = e
	}
	e.refs++
	return e
}

// leave counts the caller out of key's entry, deleting it when no one is
// left in it.
func (l *Locks) leave(key string, e *entry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.refs--; e.refs == 0 {
		delete(l.m, key)
	}
}

func (l *Locks) unlocker(key string, e *entry) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			<-e.token
			l.leave(key, e)
		})
	}
}
