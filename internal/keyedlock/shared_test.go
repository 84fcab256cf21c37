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
