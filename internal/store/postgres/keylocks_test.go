package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/keyedlock"
)

// A key locked by one store (daemon) makes another's lock of it wait
// until it is released, or its holder's connections end; other keys and
// spaces are free meanwhile, and a wait ends with its context.
func TestKeyLocks(t *testing.T) {
	ctx := context.Background()
	url := server.URL(t)
	a, b := open(t, url), open(t, url)
	unlock, err := a.KeyLocks("session").LockKey(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	// Free: another key, the same key in another space.
	for _, l := range []struct{ space, key string }{{"session", "k2"}, {"kernel", "k"}} {
		u, err := b.KeyLocks(l.space).LockKey(ctx, l.key)
		if err != nil {
			t.Fatalf("lock %s %s beside the held one: %v", l.space, l.key, err)
		}
		u()
	}
	waitsForRelease(t, b.KeyLocks("session"), "k", unlock)

	// A holder whose connection ends (its daemon died) releases its keys.
	c := open(t, url)
	dead, err := c.KeyLocks("session").LockKey(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dead) // gives the ended connection back, for Close
	done := make(chan error, 1)
	go func() {
		u, err := b.KeyLocks("session").LockKey(ctx, "k")
		if err == nil {
			u()
		}
		done <- err
	}()
	var n int
	if err := a.w.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_locks WHERE locktype = 'advisory'
		AND granted AND objsubid = 1 AND (classid::bigint << 32 | objid::bigint) = $1`,
		keyLocks{c, "session"}.hash("k")).Scan(&n); err != nil || n != 1 {
		t.Fatalf("end the holder's connection: %d ended, %v", n, err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the key of a store whose connections ended is still held")
	}
}

// waitsForRelease checks that key, held by another store until unlock,
// is not had from other: a wait ends with its context, holding nothing,
// and one that goes on gets the key once unlock has let it go.
func waitsForRelease(t *testing.T, other keyedlock.Remote, key string, unlock func()) {
	t.Helper()
	ctx := context.Background()
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := other.LockKey(short, key); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("lock of a held key past its deadline: %v, want deadline exceeded", err)
	}
	got := make(chan time.Time, 1)
	go func() {
		u, err := other.LockKey(ctx, key)
		if err != nil {
			t.Error(err)
		}
		got <- time.Now()
		u()
	}()
	time.Sleep(300 * time.Millisecond)
	released := time.Now()
	unlock()
	select {
	case at := <-got:
		if at.Before(released) {
			t.Fatalf("the other store took the key %v before its release", released.Sub(at))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the key let go is still held")
	}
}
