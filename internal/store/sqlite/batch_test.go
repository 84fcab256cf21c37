package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

// heldStore opens a store whose writer a write holds until release is
// called: the writes queued meanwhile go together, in one batch. release
// waits for wg (the queued writes) and checks the holding write.
func heldStore(t *testing.T) (*Store, func(wg *sync.WaitGroup)) {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	held, hold := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- s.b.do(ctx, func(context.Context, *sql.Tx) error {
			close(held)
			<-hold
			return nil
		})
	}()
	<-held
	return s, func(wg *sync.WaitGroup) {
		t.Helper()
		time.Sleep(300 * time.Millisecond) // every write queued behind the first
		close(hold)
		wg.Wait()
		if err := <-first; err != nil {
			t.Fatalf("first write: %v", err)
		}
	}
}

// TestBatchKeepsOthersWrites queues writes behind one that holds the
// writer, some of them failing after they wrote: they are committed
// together, each caller gets its own error, and a failing write's rows go
// without the others'.
func TestBatchKeepsOthersWrites(t *testing.T) {
	ctx := context.Background()
	s, release := heldStore(t)

	const n = 10
	boom := errors.New("boom")
	fails := func(i int) bool { return i%3 == 1 }
	var (
		wg   sync.WaitGroup
		errs [n]error
		txs  [n]*sql.Tx
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.b.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
				txs[i] = tx
				if err := insertSandbox(ctx, tx, sample(fmt.Sprint("b", i))); err != nil {
					return err
				}
				if fails(i) {
					return boom
				}
				return nil
			})
		}()
	}
	release(&wg)

	shared := map[*sql.Tx]int{}
	for i := range n {
		shared[txs[i]]++
		if want := fails(i); errors.Is(errs[i], boom) != want || (!want && errs[i] != nil) {
			t.Errorf("write %d: err = %v, want boom %v", i, errs[i], want)
		}
		_, err := s.GetSandbox(ctx, fmt.Sprint("b", i))
		if stored := err == nil; stored == fails(i) {
			t.Errorf("write %d: stored %v (get: %v), want %v", i, stored, err, !fails(i))
		}
	}
	if len(shared) >= n {
		t.Errorf("%d writes queued together took %d transactions, want fewer", n, len(shared))
	}
}

// TestBatchClosed checks that a write after Close fails instead of
// waiting, and that closing twice is harmless.
func TestBatchClosed(t *testing.T) {
	s, err := Open(context.Background(), ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSandbox(context.Background(), sample("late")); !errors.Is(err, errClosed) {
		t.Errorf("create after close: err = %v, want %v", err, errClosed)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
}

func sample(id string) *store.Sandbox {
	now := time.Now().UTC()
	return &store.Sandbox{ID: id, Image: "agent2env/python", Status: "pending", CreatedAt: now, UpdatedAt: now}
}

// TestBatchPanic checks that a write that panics, alone or queued with
// others, panics in its caller's goroutine (not the batch's, which would
// end the process) with the value it panicked with, that its rows go and
// the others' stay, and that the store goes on writing.
func TestBatchPanic(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name  string
		n     int // writes queued with the one that panics
		value any
	}{
		{"alone", 0, "callback bug"},
		{"in a batch", 6, boom},
		{"nil, in a batch", 6, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s, release := heldStore(t)

			var wg sync.WaitGroup
			errs := make([]error, tc.n)
			for i := range tc.n {
				wg.Go(func() {
					errs[i] = s.b.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
						return insertSandbox(ctx, tx, sample(fmt.Sprint("ok", i)))
					})
				})
			}
			recovered := make(chan any, 1)
			wg.Go(func() {
				defer func() { recovered <- recover() }()
				_ = s.b.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
					if err := insertSandbox(ctx, tx, sample("bad")); err != nil {
						return err
					}
					panic(tc.value)
				})
			})
			release(&wg)

			var p *writePanic
			got := <-recovered
			if err, _ := got.(error); !errors.As(err, &p) {
				t.Fatalf("caller recovered %#v, want a *writePanic", got)
			}
			switch {
			case tc.value == nil:
				var pn *runtime.PanicNilError
				if !errors.As(p, &pn) {
					t.Errorf("panic(nil) recovered as %#v, want a *runtime.PanicNilError", p.value)
				}
			case p.value != tc.value:
				t.Errorf("panic value %#v, want %#v", p.value, tc.value)
			}
			if tc.value == boom && !errors.Is(p, boom) {
				t.Errorf("errors.Is(%v, boom) = false", p)
			}
			if !strings.Contains(p.Error(), "TestBatchPanic") {
				t.Errorf("the panic does not show where the write panicked:\n%s", p.Error())
			}
			if _, err := s.GetSandbox(ctx, "bad"); !errors.Is(err, errdefs.ErrNotFound) {
				t.Errorf("the panicking write's row: get err = %v, want not found", err)
			}
			for i := range tc.n {
				if errs[i] != nil {
					t.Errorf("write %d beside the panic: %v", i, errs[i])
				}
				if _, err := s.GetSandbox(ctx, fmt.Sprint("ok", i)); err != nil {
					t.Errorf("write %d beside the panic not kept: %v", i, err)
				}
			}
			if err := s.CreateSandbox(ctx, sample("after")); err != nil {
				t.Errorf("write after the panic: %v", err)
			}
		})
	}
}
