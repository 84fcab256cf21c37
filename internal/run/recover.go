package run

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
	"github.com/agent2env/agent2env/internal/task"
)

// recover ends the runs a previous daemon left queued or running: each
// is failed with ReasonRestarted, after its artifacts are collected where
// its sandbox still runs, and its sandbox is deleted. (An agent's command
// ends with the daemon's connection to it, so there is nothing to
// re-adopt.)
func (s *Service) recover(ctx context.Context) {
	recs, _, err := s.store.ListRunPage(ctx, store.RunFilter{Active: true}, store.Page{})
	if err != nil {
		s.log.Error("recover runs", "err", err)
		return
	}
	for _, r := range recs {
		s.mu.Lock()
		_, ours := s.jobs[r.ID]
		s.mu.Unlock()
		if ours || ctx.Err() != nil {
			continue
		}
		s.recoverRun(ctx, r)
	}
	// The inputs of the submissions a previous daemon left: those of this
	// one's are in its jobs.
	s.mu.Lock()
	ours := map[string]bool{}
	for _, j := range s.jobs {
		ours[j.batch] = true
	}
	s.mu.Unlock()
	ents, _ := os.ReadDir(s.batchesDir())
	for _, e := range ents {
		if !ours[e.Name()] {
			s.removeBatch(e.Name())
		}
	}
}

func (s *Service) recoverRun(ctx context.Context, r *store.Run) {
	t := &task.Task{Name: r.Task, Agent: r.Agent}
	if err := json.Unmarshal(r.Spec, t); err != nil {
		s.log.Warn("recover run: its task does not decode", logRun, r.ID, "err", err)
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
	s.finish(ctx, e, api.RunFailed, ReasonRestarted)
	if s.ended != nil {
		s.ended(ctx, r.ID)
	}
}
