package leader

import (
	"context"
	"sync"
	"testing"
	"time"
)

// fakeLock is a Lock that one holder at a time takes, whose holding the
// test can end (lose). Through as, holders have names, and the holder
// that lost it cannot take it again (as a daemon whose host is gone).
type fakeLock struct {
	mu     sync.Mutex
	held   *fakeHeld
	holder int
	barred int // 0: none
}

// as is the lock as the holder named id (> 0) takes it.
func (l *fakeLock) as(id int) Lock { return named{l, id} }

type named struct {
	l  *fakeLock
	id int
}

func (n named) TryLock(ctx context.Context) (Held, error) {
	n.l.mu.Lock()
	barred := n.l.barred == n.id
	n.l.mu.Unlock()
	if barred {
		return nil, nil
	}
	h, err := n.l.TryLock(ctx)
	if h != nil {
		n.l.mu.Lock()
		n.l.holder = n.id
		n.l.mu.Unlock()
	}
	return h, err
}

type fakeHeld struct {
	l    *fakeLock
	lost chan struct{}
	once sync.Once
}

func (l *fakeLock) TryLock(context.Context) (Held, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held != nil {
		return nil, nil
	}
	l.held = &fakeHeld{l: l, lost: make(chan struct{})}
	return l.held, nil
}

// lose ends the current holding as a dropped connection would.
func (l *fakeLock) lose() {
	l.mu.Lock()
	h := l.held
	l.held, l.barred = nil, l.holder
	l.mu.Unlock()
	if h != nil {
		h.once.Do(func() { close(h.lost) })
	}
}

func (h *fakeHeld) Lost() <-chan struct{} { return h.lost }
func (h *fakeHeld) Unlock() {
	h.l.mu.Lock()
	if h.l.held == h {
		h.l.held = nil
	}
	h.l.mu.Unlock()
}

// The leader's work runs on one elector: on the leader, until its lock is
// lost, and then on the elector that takes it.
func TestWhileLeader(t *testing.T) {
	lock := &fakeLock{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu      sync.Mutex
		running = map[int]bool{}
		starts  = map[int]int{}
		both    bool
	)
	electors := []*Elector{New(lock.as(1), nil, WithRetry(5*time.Millisecond)), New(lock.as(2), nil, WithRetry(5*time.Millisecond))}
	var wg sync.WaitGroup
	for i, e := range electors {
		wg.Add(2)
		go func() { defer wg.Done(); e.Run(ctx) }()
		go func() {
			defer wg.Done()
			e.WhileLeader(ctx, func(ctx context.Context) error {
				mu.Lock()
				running[i], starts[i] = true, starts[i]+1
				both = both || running[1-i]
				mu.Unlock()
				<-ctx.Done()
				mu.Lock()
				running[i] = false
				mu.Unlock()
				return ctx.Err()
			})
		}()
	}
	leaderOf := func() int {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			mu.Lock()
			r0, r1 := running[0], running[1]
			mu.Unlock()
			if r0 != r1 {
				if r0 {
					return 0
				}
				return 1
			}
		}
		t.Fatal("the work does not run on exactly one elector")
		return -1
	}
	first := leaderOf()
	time.Sleep(50 * time.Millisecond) // the follower retries
	mu.Lock()
	if both || running[1-first] {
		t.Error("the work ran on both electors at once")
	}
	mu.Unlock()
	// (Once the lock is lost the old leader's work stops as the new one's
	// starts: the lock cannot say which comes first.)
	lock.lose()
	// The old leader's work stops, the other's starts.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		mu.Lock()
		n := starts[1-first]
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the work did not move to the other elector after the lock was lost")
		}
	}
	cancel()
	wg.Wait()
}

// Always leads at once and is never lost.
func TestAlways(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	e := New(Always{}, nil)
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	ran := make(chan struct{})
	go e.WhileLeader(ctx, func(ctx context.Context) error { close(ran); <-ctx.Done(); return nil })
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("the work did not start")
	}
	cancel()
	<-done
	if e.Leading() {
		t.Error("still leading after Run returned")
	}
}

// TryLead takes the lock for Run to lead with; another elector's TryLead
// then fails, and Close gives up a lock Run never took.
func TestTryLead(t *testing.T) {
	lock := &fakeLock{}
	a, b := New(lock, nil), New(lock, nil)
	if ok, err := a.TryLead(context.Background()); !ok || err != nil {
		t.Fatalf("first TryLead: %v, %v", ok, err)
	}
	if ok, err := b.TryLead(context.Background()); ok || err != nil {
		t.Fatalf("second TryLead: %v, %v; want false", ok, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.Run(ctx) }()
	for deadline := time.Now().Add(5 * time.Second); !a.Leading(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Run does not lead with the lock TryLead took")
		}
	}
	cancel()
	<-done
	// Run gave it up: b takes it, and Close gives it up again.
	if ok, err := b.TryLead(context.Background()); !ok || err != nil {
		t.Fatalf("TryLead after Run ended: %v, %v", ok, err)
	}
	b.Close()
	if h, _ := lock.TryLock(context.Background()); h == nil {
		t.Error("the lock is still held after Close")
	}
}
