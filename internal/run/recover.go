package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
	"github.com/agent2env/agent2env/internal/task"
)

// recover claims and takes up the runs a previous daemon left active:
// this daemon's under its name (Config.Owner), and any whose claim
// lapsed (takeOver); then it removes the files of the submissions left
// but those of this one's and of those queued again.
func (s *Service) recover(ctx context.Context) {
	now := s.now().UTC()
	// Now is left zero: no lease has lapsed before it, so the claim takes
	// this daemon's runs and those never claimed, not another daemon's
	// whose claim lapsed: those are orphans (takeOverLapsed), whether the
	// daemon that left them stopped before or after this one started.
	recs, err := s.store.ClaimRuns(ctx, store.RunClaim{Owner: s.cfg.Owner, Until: now.Add(s.cfg.Lease), Mine: true})
	if err != nil {
		s.log.Error("recover runs", "err", err)
		return
	}
	s.takeOver(ctx, recs, ReasonRestarted, false)
	s.takeOverLapsed(ctx, now)
	s.mu.Lock()
	keep := maps.Clone(s.batches)
	s.mu.Unlock()
	ents, _ := os.ReadDir(s.batchesDir())
	for _, e := range ents {
		if !keep[e.Name()] {
			s.removeBatch(e.Name())
		}
	}
}

// renew extends the leases of this daemon's runs, and takes over the
// runs whose claim lapsed (their daemon died), which end with
// ReasonOrphaned unless they can be queued again. When it has not
// renewed them for longer than the lease (the store is out of reach),
// it ends the runs it carries out, failed: another daemon may have taken
// them over.
func (s *Service) renew(ctx context.Context) {
	now := s.now().UTC()
	if _, err := s.store.RenewRunLeases(ctx, s.cfg.Owner, now.Add(s.cfg.Lease)); err != nil {
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("renew the claims of this daemon's runs", "err", err)
		if since := now.Sub(s.renewed); since > s.cfg.Lease {
			s.dropClaims(since)
		}
	} else {
		s.renewed = now
	}
	s.takeOverLapsed(ctx, now)
}

// takeOverLapsed claims the runs whose claim lapsed before now (their
// daemon died) and takes them over as orphans.
func (s *Service) takeOverLapsed(ctx context.Context, now time.Time) {
	recs, err := s.store.ClaimRuns(ctx, store.RunClaim{Owner: s.cfg.Owner, Until: now.Add(s.cfg.Lease), Now: now})
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("claim the runs of stopped daemons", "err", err)
		}
		return
	}
	if len(recs) > 0 {
		s.log.Info("runs whose daemon stopped taken over", "runs", len(recs))
	}
	s.takeOver(ctx, recs, ReasonOrphaned, true)
}

// dropClaims ends the runs this daemon carries out, whose claims it has
// not renewed for since.
func (s *Service) dropClaims(since time.Duration) {
	s.mu.Lock()
	jobs := slices.Collect(maps.Values(s.jobs))
	s.mu.Unlock()
	for _, j := range jobs {
		if j.cancel(endCause(errUnclaimed, "this daemon could not renew its claim on the run for %s (the store was out of reach): "+
			"another daemon may have taken it over", since.Round(time.Second))) {
			s.log.Warn("run ended: its claim lapsed", logRun, j.id)
		}
	}
}

// takeOver carries on with recs, runs this daemon has just claimed that
// it is not carrying out. A queued run, which never started, is queued
// again, with its submission's parallelism and inputs (its batchRecord,
// in this daemon's directory); with orphans (runs of a daemon that died,
// whose records are in its directory), one whose task reads no inputs
// is queued again without its record (adoptBatch). A running run whose
// daemon left its resume state here (a restart, in its agent or check
// phase) is carried on, first among its submission's runs when they are
// queued again, holding a place of its parallelism. Any other run ends
// failed with reason, after its artifacts are collected where its
// sandbox still runs, and its sandbox is deleted.
func (s *Service) takeOver(ctx context.Context, recs []*store.Run, reason string, orphans bool) {
	var again []*batch
	byID := map[string]*batch{}
	batchOf := func(r *store.Run, adopt bool) (*batch, error) {
		if b := byID[r.BatchID]; b != nil {
			return b, nil
		}
		b, err := s.readBatch(r.BatchID)
		if errors.Is(err, fs.ErrNotExist) && adopt {
			b, err = s.adoptBatch(r), nil
		}
		if err != nil {
			return nil, err
		}
		byID[b.id] = b
		again = append(again, b)
		return b, nil
	}
	for _, r := range recs {
		s.mu.Lock()
		_, ours := s.jobs[r.ID]
		s.mu.Unlock()
		if ours || ctx.Err() != nil {
			continue
		}
		if r.Status == string(api.RunQueued) {
			b, err := batchOf(r, orphans)
			if err == nil {
				err = s.requeue(r, b)
			}
			if err == nil {
				continue
			}
			s.log.Warn("recover run: cannot queue it again", logRun, r.ID, "err", err)
		} else if st := s.readResume(r); st != nil {
			j, err := s.carryOn(r, st)
			if err == nil {
				if b, err := batchOf(r, false); err == nil {
					b.jobs = append([]*job{j}, b.jobs...)
				} else {
					s.mu.Lock()
					s.resumed = append(s.resumed, j)
					s.mu.Unlock()
				}
				continue
			}
			s.log.Warn("recover run: cannot carry it on", logRun, r.ID, "err", err)
		}
		s.recoverRun(ctx, r, reason)
	}
	for _, b := range again {
		if len(b.jobs) == 0 {
			s.removeBatch(b.id)
			continue
		}
		s.mu.Lock()
		s.queue = append(s.queue, b)
		s.mu.Unlock()
		s.log.Info("runs taken up again after a restart", "batch", b.id, "runs", len(b.jobs))
	}
}

// carryOn returns the job that carries on running run r, whose previous
// daemon left st (resume.go), known to the service from now on.
func (s *Service) carryOn(r *store.Run, st *resumeState) (*job, error) {
	t, err := runTask(r)
	if err != nil {
		return nil, err
	}
	j := &job{id: r.ID, batch: r.BatchID, task: t, repeat: r.Repeat, resume: st}
	s.mu.Lock()
	s.jobs[j.id] = j
	s.bySandbox[st.SandboxID] = j.id
	s.mu.Unlock()
	s.log.Info("run carried on after a restart", logRun, r.ID, "phase", st.Phase)
	return j, nil
}

// adoptBatch returns the batch to queue queued run r again in, on a
// daemon other than the one it was submitted to, which had its
// submission's record: one of no inputs (requeue refuses the runs whose
// task reads some: they were in that daemon's directory), whose runs go
// as many at once as the daemon runs (its submission's parallelism is
// not known here).
func (s *Service) adoptBatch(r *store.Run) *batch {
	s.keepBatch(r.BatchID)
	return &batch{id: r.BatchID}
}

// requeue makes queued run r a job of b again, unless its task reads
// inputs and b has none.
func (s *Service) requeue(r *store.Run, b *batch) error {
	t, err := runTask(r)
	if err != nil {
		return err
	}
	if len(t.Inputs) > 0 && b.inputs == "" {
		return fmt.Errorf("its inputs were in the directory of the daemon it was submitted to")
	}
	j := &job{id: r.ID, batch: b.id, task: t, dir: b.inputs, repeat: r.Repeat}
	s.mu.Lock()
	s.jobs[j.id] = j
	s.mu.Unlock()
	b.jobs = append(b.jobs, j)
	return nil
}

// runTask is run r's task, as its record keeps it (checked when it was
// submitted).
func runTask(r *store.Run) (*task.Task, error) {
	t := &task.Task{Name: r.Task, Agent: r.Agent}
	if err := json.Unmarshal(r.Spec, t); err != nil {
		return nil, fmt.Errorf("read its task: %w", err)
	}
	return t, nil
}

// recoverRun ends run r, which no daemon carries out any more, failed
// with reason.
func (s *Service) recoverRun(ctx context.Context, r *store.Run, reason string) {
	t, err := runTask(r)
	if err != nil {
		s.log.Warn("recover run", logRun, r.ID, "err", err)
		t = &task.Task{Name: r.Task, Agent: r.Agent}
	}
	l, err := s.openLog(r.ID)
	if err != nil {
		s.log.Warn("recover run", logRun, r.ID, "err", err)
		l = nil
	}
	e := &execution{s: s, j: &job{id: r.ID, batch: r.BatchID, task: t}, log: l, sandboxID: r.SandboxID, exitCode: r.ExitCode}
	var prev result
	if len(r.Result) > 0 {
		_ = json.Unmarshal(r.Result, &prev)
	}
	e.timings, e.tail, e.llm = prev.Timings, prev.OutputTail, prev.LLM
	if e.timings == nil {
		e.timings = map[string]float64{}
	}
	if r.SandboxID != "" {
		if l != nil {
			e.phase(ctx, api.PhaseArtifacts)
			start := time.Now()
			e.collect(ctx)
			e.timings[api.PhaseArtifacts] = ms(time.Since(start))
		}
		if err := s.sbx.Delete(ctx, r.SandboxID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			s.log.Warn("recover run: delete its sandbox", logRun, r.ID, logSandbox, r.SandboxID, "err", err)
		}
	}
	if l == nil {
		// Without a log the run still ends; finish only writes to it.
		e.log = &eventLog{ended: true, changed: make(chan struct{})}
	}
	s.finish(ctx, e, api.RunFailed, reason)
}
