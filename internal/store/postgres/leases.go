package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agent2env/agent2env/internal/keyedlock"
)

// The leases' timing: a holder renews its lease every leaseTTL/3, and a
// lease not renewed for leaseTTL (its daemon died, or lost the store) is
// another's to take; a waiter asks again every leasePollMin, doubling up
// to leasePollMax.
const (
	leaseTTL     = 15 * time.Second
	leasePollMin = 5 * time.Millisecond
	leasePollMax = 100 * time.Millisecond
)

// KeyLeases returns the locks, among the daemons on this store, of the
// keys of space, held as leases: a row of key_leases that its holder
// renews while it holds the key and deletes when it lets go, and that
// another daemon takes once it has not been renewed for leaseTTL (its
// holder died). Unlike KeyLocks they hold no connection, so any number
// may be held at once, nested too (a sandbox's deletion holds its
// sandbox's and takes those of the sandboxes it owned): they are for the
// keys taken often and held long, such as sandboxes. A waiter polls, so
// it gets the key up to leasePollMax after it is let go. A key must be
// text PostgreSQL stores (no NUL byte).
func (s *Store) KeyLeases(space string) keyedlock.TryRemote { return keyLeases{s, space} }

type keyLeases struct {
	s     *Store
	space string
}

// LockKey waits until it takes key's lease, and keeps it renewed until
// the unlock it returns.
func (l keyLeases) LockKey(ctx context.Context, key string) (func(), error) {
	holder := newHolder()
	for delay := leasePollMin; ; delay = min(2*delay, leasePollMax) {
		got, err := l.take(ctx, key, holder)
		if err != nil {
			return nil, err
		}
		if got {
			return l.held(key, holder), nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("lease %s %q: %w", l.space, key, ctx.Err())
		case <-time.After(delay):
		}
	}
}

// TryLockKey takes key's lease if no live lease holds it, and keeps it
// renewed until the unlock it returns; nil when another holds it.
func (l keyLeases) TryLockKey(ctx context.Context, key string) (func(), error) {
	holder := newHolder()
	got, err := l.take(ctx, key, holder)
	if err != nil || !got {
		return nil, err
	}
	return l.held(key, holder), nil
}

// newHolder returns a fresh holder's name for a lease.
func newHolder() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// take makes holder key's lease unless a lease that has not run out
// holds it, and reports whether it did.
func (l keyLeases) take(ctx context.Context, key, holder string) (bool, error) {
	var got string
	err := l.s.w.QueryRow(ctx, `INSERT INTO key_leases (space, key, holder, until)
		VALUES ($1, $2, $3, now() + make_interval(secs => $4))
		ON CONFLICT (space, key) DO UPDATE SET holder = excluded.holder, until = excluded.until
		WHERE key_leases.until < now() RETURNING holder`, l.space, key, holder, leaseTTL.Seconds()).Scan(&got)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil
	}
	return false, fmt.Errorf("lease %s %q: %w", l.space, key, serverErr(err))
}

// held keeps holder's lease of key renewed, and returns the unlock that
// ends it.
func (l keyLeases) held(key, holder string) func() {
	stop, done := make(chan struct{}), make(chan struct{})
	go l.renew(key, holder, stop, done)
	var once sync.Once
	return func() {
		once.Do(func() {
			close(stop)
			<-done
			ctx, cancel := context.WithTimeout(context.Background(), keyUnlockTimeout)
			defer cancel()
			// Failing, the lease ends at its until.
			_, _ = l.s.w.Exec(ctx, `DELETE FROM key_leases WHERE space = $1 AND key = $2 AND holder = $3`, l.space, key, holder)
		})
	}
}

// renew extends the lease every leaseTTL/3 until stop is closed.
func (l keyLeases) renew(key, holder string, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(leaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), leaseTTL/3)
		// A renewal that fails is tried again at the next tick; past
		// until, another daemon may take the key.
		_, _ = l.s.w.Exec(ctx, `UPDATE key_leases SET until = now() + make_interval(secs => $4)
			WHERE space = $1 AND key = $2 AND holder = $3`, l.space, key, holder, leaseTTL.Seconds())
		cancel()
	}
}
