package run

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/agent2env/agent2env/api"
)

// cpuBusy is the share of one CPU over a tick above which the sandbox's
// processes count as working: the agent answering the watcher's own
// heartbeats stays far below it.
const cpuBusy = 0.02

// watch watches the run's liveness until ctx ends or the returned func
// is called, and ends the run (its job's context) as hung or as
// sandbox_lost. Progress is any of: a line of output, a call of Progress
// (the LLM proxy), CPU time of the sandbox's processes, and — checked
// only once the others have been quiet for the idle window, since looking
// costs a command in the sandbox — a file changed in the workdir.
func (e *execution) watch(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.watchLoop(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

func (e *execution) watchLoop(ctx context.Context) {
	t := e.j.task
	idle, heartbeat := time.Duration(t.Liveness.Idle), time.Duration(t.Liveness.Heartbeat)
	tick := e.s.cfg.Tick
	if tick <= 0 {
		tick = min(max(idle/20, 100*time.Millisecond), 2*time.Second)
	}
	beatEvery := min(max(heartbeat/3, tick), 5*time.Second)
	ticker := time.NewTicker(tick)
	defer ticker.Stop()

	prevCPU, haveCPU := e.cpu(ctx)
	lastCPUAt := time.Now()
	lastAnswer, nextBeat := time.Now(), time.Now().Add(beatEvery)
	missed := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		now := time.Now()
		if cpu, ok := e.cpu(ctx); ok {
			if haveCPU && float64(cpu-prevCPU) >= cpuBusy*float64(now.Sub(lastCPUAt)) {
				e.j.touch()
			}
			prevCPU, haveCPU, lastCPUAt = cpu, true, now
		}
		if !now.Before(nextBeat) {
			nextBeat = now.Add(beatEvery)
			if e.ping(ctx, min(heartbeat, 5*time.Second)) {
				if missed {
					e.log.add(api.RunEvent{Type: api.RunEventLiveness, Text: "the sandbox answers again"})
				}
				lastAnswer, missed = now, false
			} else if ctx.Err() == nil {
				if !missed {
					e.log.add(api.RunEvent{Type: api.RunEventLiveness, Text: "the sandbox missed a heartbeat"})
				}
				missed = true
				if now.Sub(lastAnswer) >= heartbeat {
					e.end(endCause(errLost, "the sandbox did not answer for %s", heartbeat))
					return
				}
			}
		}
		last := time.Unix(0, e.j.last.Load())
		if now.Sub(last) < idle {
			continue
		}
		if e.filesChanged(ctx, last) {
			e.log.add(api.RunEvent{Type: api.RunEventLiveness, Text: "files changed in " + t.Workdir})
			e.j.touch()
			// The look itself used CPU in the sandbox: start counting anew.
			prevCPU, haveCPU = e.cpu(ctx)
			lastCPUAt = time.Now()
			continue
		}
		if ctx.Err() != nil {
			return
		}
		e.end(endCause(errHung, "no progress for %s (no agent output, LLM call, CPU time or file change in %s)", idle, t.Workdir))
		return
	}
}

// end ends the run with cause, noting it in the event log.
func (e *execution) end(cause error) {
	e.log.add(api.RunEvent{Type: api.RunEventLiveness, Text: cause.Error()})
	e.j.cancel(cause)
}

// cpu reads the CPU time the sandbox's processes used, when the runtime
// measures it.
func (e *execution) cpu(ctx context.Context) (uint64, bool) {
	d, ok := e.s.sbx.CPUTime(ctx, e.sandboxID)
	return uint64(d), ok
}

// ping reports whether the sandbox's agent answers within timeout.
func (e *execution) ping(ctx context.Context, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return e.s.sbx.Ping(ctx, e.sandboxID) == nil
}

// filesChanged reports whether a file under the workdir changed after
// since (GNU find; a sandbox without it shows no change).
func (e *execution) filesChanged(ctx context.Context, since time.Time) bool {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	stamp := "@" + strconv.FormatFloat(float64(since.UnixNano())/1e9, 'f', 3, 64)
	var out strings.Builder
	w := newLineWriter(func(l []byte) { out.Write(l) })
	res, err := e.exec(ctx, api.ExecRequest{
		Command: []string{"find", ".", "-xdev", "-newermt", stamp, "-print", "-quit"}, Cwd: e.j.task.Workdir, Timeout: 30,
	}, w, nil)
	w.Close()
	return err == nil && res.ExitCode == 0 && out.Len() > 0
}
