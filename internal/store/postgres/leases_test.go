package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// A key leased by one store (daemon) makes another's lease of it wait
// until it is let go, or its lease runs out (its holder died); other keys
// and spaces are free, more keys are held at once than a connection pool
// has connections, and a wait ends with its context.
func TestKeyLeases(t *testing.T) {
	ctx := context.Background()
	url := server.URL(t)
	a, b := open(t, url), open(t, url)
	unlock, err := a.KeyLeases("sandbox").LockKey(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	var held []func()
	for i := range 2 * keyLockConns {
		u, err := b.KeyLeases("sandbox").LockKey(ctx, fmt.Sprintf("other%d", i))
		if err != nil {
			t.Fatalf("lease key %d beside the held one: %v", i, err)
		}
		held = append(held, u)
	}
	if u, err := b.KeyLeases("other space").LockKey(ctx, "k"); err != nil {
		t.Fatalf("lease the same key in another space: %v", err)
	} else {
		u()
	}
	for _, u := range held {
		u()
	}
	waitsForRelease(t, b.KeyLeases("sandbox"), "k", unlock)

	// A holder that stopped renewing (its daemon died): once its lease
	// has run out, another takes the key.
	if _, err := a.KeyLeases("sandbox").LockKey(ctx, "dead"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.w.Exec(ctx, `UPDATE key_leases SET until = now() - interval '1 second' WHERE key = 'dead'`); err != nil {
		t.Fatal(err)
	}
	short2, cancel2 := context.WithTimeout(ctx, 5*time.Second)
	defer cancel2()
	u, err := b.KeyLeases("sandbox").LockKey(short2, "dead")
	if err != nil {
		t.Fatalf("a lease run out: %v; want it taken", err)
	}
	u()
}

// A tried lease is had only while no live lease holds the key: not while
// another store (daemon) holds it, at once once it is let go or has run
// out (its holder died).
func TestTryKeyLease(t *testing.T) {
	ctx := context.Background()
	url := server.URL(t)
	a, b := open(t, url), open(t, url)
	for _, tc := range []struct {
		name string
		end  func(unlock func()) // what becomes of the first holder
	}{
		{"let go", func(unlock func()) { unlock() }},
		{"run out", func(func()) {
			if _, err := a.w.Exec(ctx, `UPDATE key_leases SET until = now() - interval '1 second' WHERE key = 'run out'`); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			unlock, err := a.KeyLeases("maker").TryLockKey(ctx, tc.name)
			if err != nil || unlock == nil {
				t.Fatalf("try a free key: %v, %v", unlock != nil, err)
			}
			defer unlock() // a holder whose lease ran out lets go of nothing else's
			if u, err := b.KeyLeases("maker").TryLockKey(ctx, tc.name); u != nil || err != nil {
				t.Fatalf("try a key another holds: %v, %v; want not had", u != nil, err)
			}
			tc.end(unlock)
			u, err := b.KeyLeases("maker").TryLockKey(ctx, tc.name)
			if u == nil || err != nil {
				t.Fatalf("try the key after its holder %s: %v, %v; want had", tc.name, u != nil, err)
			}
			u()
		})
	}
}
