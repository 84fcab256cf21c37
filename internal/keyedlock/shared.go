package keyedlock

import (
	"context"
	"fmt"
	"sync"
)

// Remote locks keys among the processes that share it (the daemons of one
// PostgreSQL store): while one holds a key, the others' LockKey of it
// waits.
type Remote interface {
	// LockKey waits for key's lock and returns the function that releases
	// it; it gives up with ctx's error when ctx is done first.
	LockKey(ctx context.Context, key string) (unlock func(), err error)
}

// Shared is a set of locks, one per key, that the processes sharing its
// Remote honour too: a key is locked in this process first (so one
// goroutine per key at most waits on the Remote), then in the Remote.
// With no Remote (one daemon owns its store) it is Locks. The zero value
// is ready to use; set Remote before first use. It is safe for concurrent
// use.
type Shared struct {
	local Locks
	// Remote, when set, locks the keys among processes too.
	Remote Remote
}

// LockContext waits for key's lock, here and in the Remote, and returns
// the function that releases both; it gives up when ctx is done first or
// the Remote fails, holding nothing. Calling unlock more than once
// releases the lock once.
func (s *Shared) LockContext(ctx context.Context, key string) (unlock func(), err error) {
	local, err := s.local.LockContext(ctx, key)
	if err != nil || s.Remote == nil {
		return local, err
	}
	remote, err := s.Remote.LockKey(ctx, key)
	if err != nil {
		local()
		return nil, fmt.Errorf("lock %q among daemons: %w", key, err)
	}
	return both(remote, local), nil
}

// both returns the unlock of a key held in a Remote and in this process:
// the Remote's first, each once however often it is called.
func both(remote, local func()) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			remote()
			local()
		})
	}
}

// Len returns how many keys are held or waited for in this process.
func (s *Shared) Len() int { return s.local.Len() }

// TryRemote is a Remote whose keys can also be taken without waiting.
type TryRemote interface {
	Remote
	// TryLockKey takes key's lock if no process holds it and returns the
	// function that releases it; nil and no error when one holds it.
	TryLockKey(ctx context.Context, key string) (unlock func(), err error)
}

// Claims are keys taken without waiting, in this process and among the
// processes that share Remote: a claim says that its holder is at work
// on the key, and a key no one claims is one whose last holder is gone.
// With no Remote (one daemon owns its store) they are this process's.
// The zero value is ready to use; set Remote before first use. It is safe
// for concurrent use.
type Claims struct {
	local Locks
	// Remote, when set, holds the claims among processes too.
	Remote TryRemote
}

// TryLock claims key if no one, here or in the Remote, holds it, and
// returns the function that releases the claim; nil and no error when
// someone holds it. Calling unlock more than once releases it once.
func (c *Claims) TryLock(ctx context.Context, key string) (unlock func(), err error) {
	local, ok := c.local.TryLock(key)
	if !ok || c.Remote == nil {
		return local, nil
	}
	remote, err := c.Remote.TryLockKey(ctx, key)
	if err != nil || remote == nil {
		local()
		if err != nil {
			return nil, fmt.Errorf("claim %q among daemons: %w", key, err)
		}
		return nil, nil
	}
	return both(remote, local), nil
}
