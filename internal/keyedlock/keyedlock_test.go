package keyedlock

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Many goroutines hammer a few keys, locking in every way there is: no
// two ever hold one key's lock at once, different keys do not wait for
// each other, and the set is empty afterwards.
func TestMutualExclusion(t *testing.T) {
	var l Locks
	const keys, goroutines, rounds = 3, 48, 300
	var holders [keys]atomic.Int32
	var held, gaveUp atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for r := range rounds {
				k := (g + r) % keys
				key := fmt.Sprintf("key-%d", k)
				var unlock func()
				switch r % 3 {
				case 0:
					unlock = l.Lock(key)
				case 1:
					// Some give up waiting: that path must not break the
					// lock or leak its entry either.
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r%5)*time.Microsecond)
					var err error
					unlock, err = l.LockContext(ctx, key)
					cancel()
					if err != nil {
						if !errors.Is(err, context.DeadlineExceeded) {
							t.Errorf("LockContext: %v", err)
						}
						gaveUp.Add(1)
						continue
					}
				case 2:
					var ok bool
					if unlock, ok = l.TryLock(key); !ok {
						gaveUp.Add(1)
						continue
					}
				}
				if n := holders[k].Add(1); n != 1 {
					t.Errorf("%d goroutines hold %s at once", n, key)
				}
				held.Add(1)
				runtime.Gosched()
				holders[k].Add(-1)
				unlock()
				if r%7 == 0 {
					unlock() // a second call releases nothing more
				}
			}
		})
	}
	wg.Wait()
	if held.Load() == 0 || held.Load()+gaveUp.Load() != goroutines*rounds {
		t.Errorf("%d locks held and %d given up of %d tries", held.Load(), gaveUp.Load(), goroutines*rounds)
	}
	if n := l.Len(); n != 0 {
		t.Errorf("%d entries left after every lock was released; want none", n)
	}
}

func TestTryLock(t *testing.T) {
	var l Locks
	unlock, ok := l.TryLock("a")
	if !ok {
		t.Fatal("TryLock of a free key failed")
	}
	if _, ok := l.TryLock("a"); ok {
		t.Fatal("TryLock of a held key succeeded")
	}
	other, ok := l.TryLock("b")
	if !ok {
		t.Fatal("TryLock of another key waited for the first")
	}
	other()
	unlock()
	again, ok := l.TryLock("a")
	if !ok {
		t.Fatal("TryLock after unlock failed")
	}
	again()
	if n := l.Len(); n != 0 {
		t.Errorf("Len = %d after release, want 0", n)
	}
}

func TestLockContextGivesUp(t *testing.T) {
	var l Locks
	unlock := l.Lock("a")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := l.LockContext(ctx, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("LockContext of a held key = %v, want deadline exceeded", err)
	}
	if n := l.Len(); n != 1 {
		t.Errorf("Len = %d while one holds a, want 1", n)
	}
	unlock()
	if n := l.Len(); n != 0 {
		t.Errorf("Len = %d after release, want 0", n)
	}
}

// A waiter gets the lock when the holder releases it, even though the
// holder's release would delete an entry no one else needed.
func TestWaiterKeepsEntry(t *testing.T) {
	var l Locks
	unlock := l.Lock("a")
	got := make(chan func())
	go func() { got <- l.Lock("a") }()
	for l.refs("a") != 2 {
		runtime.Gosched()
	}
	unlock()
	second := <-got
	if _, ok := l.TryLock("a"); ok {
		t.Fatal("a newcomer took the lock the waiter holds")
	}
	second()
	if n := l.Len(); n != 0 {
		t.Errorf("Len = %d after release, want 0", n)
	}
}

// refs returns how many hold or wait for key.
func (l *Locks) refs(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.m[key]; e != nil {
		return e.refs
	}
	return 0
}
