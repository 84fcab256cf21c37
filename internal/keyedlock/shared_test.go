package keyedlock

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// remote is a Remote that records the keys it holds and may fail.
type remote struct {
	mu       sync.Mutex
	held     map[string]int
	max      int // most keys held at once for one key
	fail     error
	unlocked int
}

func (r *remote) LockKey(_ context.Context, key string) (func(), error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return nil, r.fail
	}
	r.held[key]++
	r.max = max(r.max, r.held[key])
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.held[key]--
		r.unlocked++
	}, nil
}

// A Shared key is taken in the process before the Remote, so the Remote
// sees one holder per key; its unlock releases both, once; a Remote that
// fails leaves nothing held.
func TestShared(t *testing.T) {
	r := &remote{held: map[string]int{}}
	s := &Shared{Remote: r}
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			unlock, err := s.LockContext(context.Background(), "k")
			if err != nil {
				t.Error(err)
				return
			}
			unlock()
			unlock()
		})
	}
	wg.Wait()
	if r.max != 1 || r.held["k"] != 0 || r.unlocked != 50 || s.Len() != 0 {
		t.Fatalf("remote held at most %d at once, %d left, %d unlocks; %d local keys; want 1, 0, 50, 0",
			r.max, r.held["k"], r.unlocked, s.Len())
	}

	r.fail = errors.New("store gone")
	if _, err := s.LockContext(context.Background(), "k"); !errors.Is(err, r.fail) {
		t.Fatalf("lock with a failing remote: %v, want its error", err)
	}
	if s.Len() != 0 {
		t.Fatalf("%d local keys held after the remote failed", s.Len())
	}

	// Without a Remote it is Locks.
	var local Shared
	unlock, err := local.LockContext(context.Background(), "k")
	if err != nil || local.Len() != 1 {
		t.Fatalf("local lock: %v, %d keys", err, local.Len())
	}
	unlock()
}

// TryLockKey takes key unless some holder has it.
func (r *remote) TryLockKey(ctx context.Context, key string) (func(), error) {
	r.mu.Lock()
	held := r.held[key] > 0
	r.mu.Unlock()
	if held {
		return nil, nil
	}
	return r.LockKey(ctx, key)
}

// A claim is had only while no one holds its key, in this process or in
// the Remote; a failing Remote leaves nothing claimed; its release
// frees the key for the next claim.
func TestClaims(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		remote   *remote // nil: none
		heldHere bool    // this process holds the key already
		want     bool    // the claim is had
		wantErr  bool
	}{
		{name: "free", remote: &remote{held: map[string]int{}}, want: true},
		{name: "held here", remote: &remote{held: map[string]int{}}, heldHere: true},
		{name: "held by another process", remote: &remote{held: map[string]int{"k": 1}}},
		{name: "remote fails", remote: &remote{held: map[string]int{}, fail: errors.New("store gone")}, wantErr: true},
		{name: "no remote, free", want: true},
		{name: "no remote, held here", heldHere: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Claims{}
			if tc.remote != nil {
				c.Remote = tc.remote
			}
			if tc.heldHere {
				c.local.Lock("k")
			}
			unlock, err := c.TryLock(ctx, "k")
			if (err != nil) != tc.wantErr || (unlock != nil) != tc.want {
				t.Fatalf("TryLock: claimed %v, %v; want claimed %v, error %v", unlock != nil, err, tc.want, tc.wantErr)
			}
			if unlock == nil {
				if !tc.heldHere && c.local.Len() != 0 {
					t.Errorf("%d local keys held after a claim not had", c.local.Len())
				}
				return
			}
			if again, err := c.TryLock(ctx, "k"); again != nil || err != nil {
				t.Errorf("a second claim while the first holds: %v, %v; want none", again != nil, err)
			}
			unlock()
			unlock()
			again, err := c.TryLock(ctx, "k")
			if again == nil || err != nil {
				t.Fatalf("a claim after the release: %v, %v", again != nil, err)
			}
			again()
		})
	}
}
