package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/task"
)

// job is one run of a batch, as this process carries it out.
type job struct {
	id, batch string
	task      *task.Task
	// dir holds the input sources on the host ("" when the task has
	// none).
	dir    string
	repeat int

	// last is when the run last made progress (unix nanoseconds).
	last atomic.Int64

	// resume is the state a previous daemon left of the run, which this
	// one carries on (resume.go); nil for a run that starts here.
	resume *resumeState

	mu   sync.Mutex
	stop context.CancelCauseFunc // nil until the run starts
	// early is the cause a resumed run was cancelled with before it
	// started here: it ends with it at its start.
	early error
	ended bool
}

// touch records progress now.
func (j *job) touch() { j.last.Store(nowNanos()) }

// cancel ends the run's context with cause; false when the run has
// ended, or is queued and has not started (its record says it ended).
func (j *job) cancel(cause error) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	switch {
	case j.ended || (j.stop == nil && j.resume == nil):
		return false
	case j.stop == nil:
		j.early = cause
	default:
		j.stop(cause)
	}
	return true
}

// The causes a run's context ends with, which say how the run ends.
var (
	errCancelled = errors.New("cancelled")
	errTimeout   = errors.New("timeout")
	errHung      = errors.New("hung")
	errLost      = errors.New("sandbox lost")
	// errUnclaimed: this daemon could not renew its claim on the run for
	// longer than the lease, so another may have taken it over.
	errUnclaimed = errors.New("claim lapsed")
)

const reasonCancelled = "cancelled by request"

// cause is a run's end cause: its message is the run's reason, and it
// matches its kind (errHung, errLost).
type cause struct {
	kind error
	msg  string
}

func (c *cause) Error() string        { return c.msg }
func (c *cause) Is(target error) bool { return target == c.kind }

func endCause(kind error, format string, args ...any) error {
	return &cause{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// Run carries out the submitted runs until ctx ends; first, once per
// Service, it claims and recovers the runs a previous daemon left active
// (its own, and those whose claim lapsed). Every third of the lease it
// renews its claims and takes over the runs whose claim lapsed: those of
// a daemon sharing the store that died. When ctx ends it waits for the
// runs in flight to stop, leaving their records active, and claimed, for
// the next daemon's recovery.
func (s *Service) Run(ctx context.Context) error {
	s.recoverOnce.Do(func() { s.recover(ctx) })
	s.renewed = s.now()
	var wg sync.WaitGroup
	defer wg.Wait()
	if s.notes != nil {
		wg.Add(2)
		go func() {
			defer wg.Done()
			s.sendEvents(ctx)
		}()
		go func() {
			defer wg.Done()
			s.followCancels(ctx)
		}()
	}
	tick := time.NewTicker(s.cfg.Lease / 3)
	defer tick.Stop()
	for {
		s.mu.Lock()
		q, resumed := s.queue, s.resumed
		s.queue, s.resumed = nil, nil
		s.mu.Unlock()
		for _, j := range resumed {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.executeInSlot(ctx, j)
			}()
		}
		for _, b := range q {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.runBatch(ctx, b)
			}()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.wake:
		case <-tick.C:
			s.renew(ctx)
		}
	}
}

// runBatch runs b's jobs, b.parallel at a time (all when 0), each within
// the daemon-wide limit.
func (s *Service) runBatch(ctx context.Context, b *batch) {
	n := b.parallel
	if n <= 0 {
		n = len(b.jobs)
	}
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		if ctx.Err() == nil {
			s.removeBatch(b.id) // its files; the daemon's recovery removes those of batches it ends
		}
	}()
	for _, j := range b.jobs {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s.executeInSlot(ctx, j)
		}()
	}
}

// executeInSlot executes j once it has one of the daemon's MaxParallel
// slots, unless ctx ends first.
func (s *Service) executeInSlot(ctx context.Context, j *job) {
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return
	}
	defer func() { <-s.slots }()
	s.execute(ctx, j)
}

// batchesDir holds each submission's files while its runs go: its
// inputs, and its record (batchFile).
func (s *Service) batchesDir() string { return filepath.Join(s.cfg.Dir, "batches") }

// batchFile is the name of a submission's record in its directory.
const batchFile = "batch.json"

// batchRecord is what the queued runs of a submission need to be queued
// again by the next daemon (their tasks are in their records): it is
// written once they are all recorded, so a submission without it never
// completed.
type batchRecord struct {
	Parallel int `json:"parallel"`
	// Inputs is the host directory the runs' inputs are read from ("":
	// none).
	Inputs string `json:"inputs,omitempty"`
}

// writeBatch records b.
func (s *Service) writeBatch(b *batch) error {
	data, err := json.Marshal(batchRecord{Parallel: b.parallel, Inputs: b.inputs})
	if err != nil {
		return err
	}
	p := filepath.Join(s.batchesDir(), b.id, batchFile)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	return os.WriteFile(p, data, 0o600)
}

// readBatch returns batch id, without its jobs, from its record (an
// ErrNotExist when it has none), and marks it this process's (keepBatch).
func (s *Service) readBatch(id string) (*batch, error) {
	var rec batchRecord
	data, err := os.ReadFile(filepath.Join(s.batchesDir(), id, batchFile))
	if err == nil {
		err = json.Unmarshal(data, &rec)
	}
	if err != nil {
		return nil, fmt.Errorf("read submission %s: %w", id, err)
	}
	s.keepBatch(id)
	return &batch{id: id, parallel: rec.Parallel, inputs: rec.Inputs}, nil
}

// keepBatch marks batch id as this process's: recovery leaves its files.
func (s *Service) keepBatch(id string) {
	s.mu.Lock()
	s.batches[id] = true
	s.mu.Unlock()
}

// removeBatch removes the files of batch id.
func (s *Service) removeBatch(id string) {
	s.mu.Lock()
	delete(s.batches, id)
	s.mu.Unlock()
	if err := os.RemoveAll(filepath.Join(s.batchesDir(), id)); err != nil {
		s.log.Warn("remove the files of a submission", "batch", id, "err", err)
	}
}

// Final reports whether the run's status is an end state.
func final(status string) bool { return api.RunStatus(status).Final() }
