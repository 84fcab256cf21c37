package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
)

// maxBatch bounds how many writes one transaction commits together.
const maxBatch = 64

// errClosed answers a write queued after the store was closed.
var errClosed = errors.New("sqlite store closed")

// batcher commits the sandbox writes that wait for the writer connection
// together (group commit): one goroutine takes the first write queued, then
// whatever else is waiting at that moment (at most maxBatch, never waiting
// for more, so a lone write goes at once), runs each in a savepoint of one
// transaction and commits it once. Each write still gets its own error: a
// failing one is rolled back to its savepoint, the others are kept. Under a
// burst of creates the writer then hands its connection over once per
// batch instead of once per write.
type batcher struct {
	db   *sql.DB
	jobs chan *job // unbuffered: a write queued is one run will answer
	quit chan struct{}
	done chan struct{}
	stop sync.Once
}

// job is one queued write: fn runs in the batch's transaction.
type job struct {
	ctx context.Context
	fn  func(ctx context.Context, tx *sql.Tx) error
	err chan error
	// panicked is fn's panic, set before err is answered; do raises it
	// again in the caller's goroutine.
	panicked *writePanic
}

// writePanic is a write's panic, recovered on the batch goroutine (where
// it would end the process, whoever the write's caller) and raised again
// by do in the caller's. It keeps the value fn panicked with, and the
// stack where it did, which the panic raised again would not show.
type writePanic struct {
	value any
	stack []byte
}

func (p *writePanic) Error() string {
	return fmt.Sprintf("sqlite write panicked: %v\n\ngoroutine of the write batch:\n%s", p.value, p.stack)
}

// Unwrap returns the value fn panicked with when it is an error, so that
// errors.Is and errors.As on the value recovered in the caller see it.
func (p *writePanic) Unwrap() error {
	err, _ := p.value.(error)
	return err
}

func newBatcher(db *sql.DB) *batcher {
	b := &batcher{db: db, jobs: make(chan *job), quit: make(chan struct{}), done: make(chan struct{})}
	go b.run()
	return b
}

// do runs fn in a write transaction, with the writes queued beside it, and
// returns fn's error, or the commit's. fn's ctx carries ctx's values but
// not its cancellation: interrupting a statement would roll back the
// whole transaction, other callers' writes included. ctx bounds the wait
// in the queue. Should fn panic, its writes are rolled back, the others
// of its batch kept, and do panics with a *writePanic holding fn's
// panic: in the caller's goroutine, as a write done there would.
func (b *batcher) do(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	j := &job{ctx: ctx, fn: fn, err: make(chan error, 1)}
	select {
	case b.jobs <- j:
		err := <-j.err
		if j.panicked != nil {
			panic(j.panicked)
		}
		return noSpace(err)
	case <-ctx.Done():
		return ctx.Err()
	case <-b.quit:
		return errClosed
	}
}

// close stops the batcher once the batch under way is answered; closing
// it again does nothing.
func (b *batcher) close() {
	b.stop.Do(func() { close(b.quit) })
	<-b.done
}

func (b *batcher) run() {
	defer close(b.done)
	for {
		var batch []*job
		select {
		case j := <-b.jobs:
			batch = append(batch, j)
		case <-b.quit:
			return
		}
	more:
		for len(batch) < maxBatch {
			select {
			case j := <-b.jobs:
				batch = append(batch, j)
			default:
				break more
			}
		}
		b.commit(batch)
	}
}

// commit runs batch in one transaction and answers each job.
func (b *batcher) commit(batch []*job) {
	ctx := context.Background()
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		for _, j := range batch {
			j.err <- fmt.Errorf("begin write: %w", err)
		}
		return
	}
	if len(batch) == 1 { // alone: no savepoint needed
		j := batch[0]
		if err := j.call(tx); err != nil {
			_ = tx.Rollback()
			j.err <- err
			return
		}
		j.err <- commitErr(tx.Commit())
		return
	}
	var kept []*job // run without error, answered at the commit
	for i, j := range batch {
		if err := j.ctx.Err(); err != nil {
			j.err <- err
			continue
		}
		if _, err := tx.ExecContext(ctx, `SAVEPOINT w`); err != nil {
			abort(tx, append(kept, batch[i:]...), err)
			return
		}
		if err := j.call(tx); err != nil {
			// Only j's writes go; if the transaction itself is gone (SQLite
			// rolls back all on some errors), so are the others'.
			if rerr := rollbackTo(ctx, tx); rerr != nil {
				j.err <- err
				abort(tx, append(kept, batch[i+1:]...), rerr)
				return
			}
			j.err <- err
			continue
		}
		if _, err := tx.ExecContext(ctx, `RELEASE w`); err != nil {
			abort(tx, append(kept, batch[i:]...), err)
			return
		}
		kept = append(kept, j)
	}
	err = commitErr(tx.Commit())
	for _, j := range kept {
		j.err <- err
	}
}

// call runs j's write in tx. A panic ends the write with an error (its
// writes go as a failing one's do) and is kept in j.panicked.
func (j *job) call(tx *sql.Tx) (err error) {
	defer func() {
		// Since Go 1.21 even panic(nil) recovers a non-nil value.
		if v := recover(); v != nil {
			j.panicked = &writePanic{value: v, stack: debug.Stack()}
			err = j.panicked
		}
	}()
	return j.fn(context.WithoutCancel(j.ctx), tx)
}

// rollbackTo undoes the writes since the savepoint w and ends it.
func rollbackTo(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, `ROLLBACK TO w`); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `RELEASE w`)
	return err
}

// abort rolls tx back and answers jobs, whose writes it took, with err.
func abort(tx *sql.Tx, jobs []*job, err error) {
	_ = tx.Rollback()
	for _, j := range jobs {
		j.err <- fmt.Errorf("write batch: %w", err)
	}
}

func commitErr(err error) error {
	if err != nil {
		return fmt.Errorf("commit write: %w", err)
	}
	return nil
}
