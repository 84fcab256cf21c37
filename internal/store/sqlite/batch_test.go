package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/store"
)

// TestBatchKeepsOthersWrites queues writes behind one that holds the
// writer, some of them failing after they wrote: they are committed
// together, each caller gets its own error, and a failing write's rows go
// without the others'.
func TestBatchKeepsOthersWrites(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	release := make(chan struct{})
	held := make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- s.b.do(ctx, func(context.Context, *sql.Tx) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held

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
	time.Sleep(500 * time.Millisecond) // every write queued behind the first
	close(release)
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatalf("first write: %v", err)
	}

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
