package run

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/agents"
	"github.com/agent2env/agent2env/internal/agents/all"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/llm/caller"
	"github.com/agent2env/agent2env/internal/service"
	"github.com/agent2env/agent2env/internal/store"
	"github.com/agent2env/agent2env/internal/task"
)

// execution is one run being carried out.
type execution struct {
	s       *Service
	j       *job
	log     *eventLog
	adapter agents.Adapter
	// resumed is the state a previous daemon left of the run, until the
	// phase it names has taken it up.
	resumed *resumeState

	sandboxID string
	timings   map[string]float64
	exitCode  *int
	// truncated says artifacts were left out at the limit; artifactsErr
	// why some could not be collected.
	truncated    bool
	artifactsErr string

	mu   sync.Mutex // guards what the output writers update, and the phase's time
	tail []string
	// inPhase is the phase timed now, since phaseStart.
	inPhase    string
	phaseStart time.Time
	llm        api.RunLLMUsage // as the agent reports it, call by call
	// total is the usage the agent's result reports, for CLIs that give
	// no usage per call (gemini-cli).
	total *agents.Usage
}

// execute carries out run j and records how it ended, unless ctx ended
// first (the daemon stops): then the record stays active for recovery.
func (s *Service) execute(ctx context.Context, j *job) {
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	j.mu.Lock()
	j.stop = stop
	if j.early != nil {
		stop(j.early)
	}
	j.mu.Unlock()
	j.touch()
	s.mu.Lock()
	s.jobs[j.id] = j
	s.mu.Unlock()
	defer func() {
		j.mu.Lock()
		j.ended = true
		j.mu.Unlock()
		s.mu.Lock()
		delete(s.jobs, j.id)
		s.mu.Unlock()
	}()
	if j.resume == nil && !s.begin(ctx, j) {
		return
	}
	l, err := s.openLog(j.id)
	if err != nil {
		s.log.Error("start run", logRun, j.id, "err", err)
		s.finish(context.WithoutCancel(ctx), &execution{s: s, j: j}, api.RunFailed, err.Error())
		return
	}
	e := &execution{s: s, j: j, log: l, timings: map[string]float64{}}
	status, reason := e.runSafe(runCtx)
	if ctx.Err() != nil && !isOurs(context.Cause(runCtx)) {
		// The daemon is stopping: the next one recovers the run.
		s.log.Info("run left to recovery", logRun, j.id)
		s.mu.Lock()
		delete(s.logs, j.id)
		s.mu.Unlock()
		return
	}
	// However the run ended, its artifacts come back and its sandbox goes:
	// after the run's end is recorded (the result does not wait for the
	// cleanup), before its slot is given to the next run.
	bg := context.WithoutCancel(ctx)
	if e.sandboxID != "" {
		e.phase(bg, api.PhaseArtifacts)
		start := time.Now()
		e.collect(bg)
		e.timings[api.PhaseArtifacts] = ms(time.Since(start))
	}
	s.finish(bg, e, status, reason)
	if e.sandboxID != "" {
		e.deleteSandbox(bg) // what its agent made through the daemon's services goes with it (manager: owned sandboxes)
	}
}

// begin records that queued run j starts, unless it has not been queued
// here since (cancelled, or claimed by another daemon).
func (s *Service) begin(ctx context.Context, j *job) bool {
	now := s.now().UTC()
	_, err := s.store.UpdateRun(ctx, j.id, func(r *store.Run) error {
		if r.Status != string(api.RunQueued) {
			return errNoChange // cancelled while queued
		}
		if r.ClaimedBy != s.cfg.Owner {
			return errClaimed // this daemon's claim lapsed and another took the run
		}
		r.Status, r.Phase, r.StartedAt, r.UpdatedAt = string(api.RunRunning), api.PhaseCreate, &now, now
		return nil
	})
	switch {
	case errors.Is(err, errClaimed):
		s.log.Warn("run not started: another daemon claimed it", logRun, j.id)
	case err != nil && !errors.Is(err, errNoChange):
		s.log.Error("start run", logRun, j.id, "err", err)
	}
	return err == nil
}

// isOurs reports whether cause is one the runner ends runs with.
func isOurs(cause error) bool {
	for _, c := range []error{errCancelled, errTimeout, errHung, errLost, errUnclaimed} {
		if errors.Is(cause, c) {
			return true
		}
	}
	return false
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// phase records that the run entered phase p.
func (e *execution) phase(ctx context.Context, p string) {
	e.log.add(api.RunEvent{Type: api.RunEventPhase, Phase: p})
	if _, err := e.s.store.UpdateRun(ctx, e.j.id, func(r *store.Run) error {
		r.Phase, r.UpdatedAt = p, e.s.now().UTC()
		return nil
	}); err != nil {
		e.s.log.Warn("record run phase", logRun, e.j.id, "phase", p, "err", err)
	}
}

// timed runs step as phase p and records its time.
func (e *execution) timed(ctx context.Context, p string, step func() error) error {
	e.phase(ctx, p)
	start := time.Now()
	e.mu.Lock()
	e.inPhase, e.phaseStart = p, start
	e.mu.Unlock()
	err := step()
	e.mu.Lock()
	e.timings[p] += ms(time.Since(start))
	e.inPhase = ""
	e.mu.Unlock()
	return err
}

// ended returns how the run ends when its context has ended (ok false
// while it goes on).
func ended(ctx context.Context, t *task.Task) (api.RunStatus, string, bool) {
	if ctx.Err() == nil {
		return "", "", false
	}
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, errCancelled):
		return api.RunCancelled, reasonCancelled, true
	case errors.Is(cause, errTimeout):
		return api.RunTimeout, fmt.Sprintf("the run did not end within its timeout of %s", t.End.Timeout), true
	case errors.Is(cause, errHung):
		return api.RunHung, cause.Error(), true
	case errors.Is(cause, errLost):
		return api.RunSandboxLost, cause.Error(), true
	}
	return api.RunFailed, cause.Error(), true
}

// runSafe is run, with a panic (a parser meeting output it did not
// expect) ending the run failed instead of the daemon.
func (e *execution) runSafe(ctx context.Context) (status api.RunStatus, reason string) {
	defer func() {
		if v := recover(); v != nil {
			e.s.log.Error("run panicked", logRun, e.j.id, "panic", v, "stack", string(debug.Stack()))
			status, reason = api.RunFailed, fmt.Sprintf("internal error: %v", v)
		}
	}()
	return e.run(ctx)
}

// run carries the run out up to its end conditions and says how it
// ended.
func (e *execution) run(ctx context.Context) (api.RunStatus, string) {
	t := e.j.task
	adapter, ok := all.Get(t.Agent)
	if !ok {
		return api.RunFailed, fmt.Sprintf("unknown agent %q", t.Agent)
	}
	e.adapter = adapter
	if st := e.j.resume; st != nil {
		return e.resume(ctx, st)
	}
	if err := e.timed(ctx, api.PhaseCreate, func() error { return e.create(ctx) }); err != nil {
		if st, reason, ok := ended(ctx, t); ok {
			return st, reason
		}
		return api.RunFailed, "create the sandbox: " + err.Error()
	}
	// The timeout counts from a running sandbox: an image being built or
	// pulled for the first time is not the task's time.
	tctx, cancel := context.WithTimeoutCause(ctx, time.Duration(t.End.Timeout), errTimeout)
	defer cancel()
	return e.steps(ctx, tctx, api.PhaseInputs)
}

// step is one phase of a run in its sandbox.
type step struct {
	phase string
	fn    func(context.Context) (api.RunStatus, string)
}

// steps carries the run out in its sandbox from phase from on, watching
// its liveness, until tctx (ctx within the run's timeout) ends, a step
// ends the run, or the end conditions hold.
func (e *execution) steps(ctx, tctx context.Context, from string) (api.RunStatus, string) {
	t := e.j.task
	stopWatch := e.watch(tctx)
	defer stopWatch()
	steps := []step{
		{api.PhaseInputs, e.inputs},
		{api.PhaseSetup, e.setup},
		{api.PhaseAgent, e.agent},
		{api.PhaseCheck, e.check},
	}
	i := slices.IndexFunc(steps, func(s step) bool { return s.phase == from })
	for _, st := range steps[i:] {
		var status api.RunStatus
		var reason string
		_ = e.timed(ctx, st.phase, func() error {
			status, reason = st.fn(tctx)
			return nil
		})
		if s, r, ok := ended(tctx, t); ok {
			return s, r
		}
		if status != "" {
			return status, reason
		}
	}
	return api.RunSucceeded, succeededReason(t)
}

func succeededReason(t *task.Task) string {
	var held []string
	held = append(held, fmt.Sprintf("the agent exited %d", t.End.ExitCode))
	if t.End.SuccessFile != "" {
		held = append(held, t.End.SuccessFile+" exists")
	}
	if t.End.Check != "" {
		held = append(held, "the check passed")
	}
	return strings.Join(held, ", ")
}

// create makes the run's sandbox and waits for it to run.
func (e *execution) create(ctx context.Context) error {
	wctx, cancel := context.WithTimeout(ctx, e.s.cfg.ReadyTimeout)
	defer cancel()
	sb, err := e.createWhenRoom(wctx, sandboxRequest(e.j.task))
	if err != nil {
		return err
	}
	e.sandboxID = sb.ID
	e.s.mu.Lock()
	e.s.bySandbox[sb.ID] = e.j.id
	e.s.mu.Unlock()
	if _, err := e.s.store.UpdateRun(ctx, e.j.id, func(r *store.Run) error {
		r.SandboxID = sb.ID
		return nil
	}); err != nil {
		return fmt.Errorf("record the sandbox: %w", err)
	}
	_, err = e.s.sbx.WaitRunning(wctx, sb.ID)
	return err
}

// sandboxRequest is the sandbox a run of t is carried out in. It has no
// TTL and no env of its own (the task's env goes to each command): a
// sandbox a warm pool holds fits. One a crash leaves is deleted by the
// next daemon's recovery, or reaped once no active run refers to it.
func sandboxRequest(t *task.Task) service.ManagedRequest {
	req := service.ManagedRequest{CreateSandboxRequest: api.CreateSandboxRequest{Image: t.Image, Template: t.Template}, ManagedBy: ManagedBy}
	if r := t.Resources; r != nil {
		req.CPU, req.Memory, req.Disk = string(r.CPU), string(r.Memory), string(r.Disk)
	}
	if req.Template != "" {
		req.Image = ""
	}
	return req
}

// createWhenRoom creates the sandbox, waiting while the daemon has its
// maximum of sandboxes (or the host no room for it), until ctx ends: runs
// queue for capacity rather than fail, unless the sandbox could never be
// admitted (the host's capacity may have shrunk since the submission).
func (e *execution) createWhenRoom(ctx context.Context, req service.ManagedRequest) (*api.Sandbox, error) {
	waiting := false
	for delay := 50 * time.Millisecond; ; delay = min(2*delay, 2*time.Second) {
		sb, err := e.s.sbx.CreateManaged(ctx, req)
		if !errors.Is(err, errdefs.ErrResourceExhausted) {
			return sb, err
		}
		if !waiting {
			if err := e.s.sbx.CheckManaged(ctx, req); err != nil {
				return nil, err
			}
			waiting = true
			e.log.add(api.RunEvent{Type: api.RunEventLiveness, Text: "waiting for room for a sandbox: " + err.Error()})
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (no room for a sandbox: %v)", ctx.Err(), err)
		case <-time.After(delay):
		}
	}
}

// deleteSandbox deletes the run's sandbox; the session reaper deletes it
// later if this fails (the run no longer refers to it).
func (e *execution) deleteSandbox(ctx context.Context) {
	e.s.mu.Lock()
	delete(e.s.bySandbox, e.sandboxID)
	e.s.mu.Unlock()
	if err := e.s.sbx.Delete(ctx, e.sandboxID); err != nil {
		e.s.log.Warn("delete the sandbox of a run", logRun, e.j.id, logSandbox, e.sandboxID, "err", err)
	}
}

// inputs copies the task's inputs into the sandbox and makes the workdir.
func (e *execution) inputs(ctx context.Context) (api.RunStatus, string) {
	t := e.j.task
	if err := e.s.sbx.Mkdir(ctx, e.sandboxID, t.Workdir); err != nil {
		return e.stepFailed(ctx, "make the workdir "+t.Workdir, err)
	}
	if len(t.Inputs) == 0 {
		return "", ""
	}
	if e.j.dir == "" {
		return api.RunFailed, "inputs[0]: the submission carried no input files"
	}
	// Checked at submission, the sources are opened through an os.Root
	// again: a link made since cannot lead out of the directory either.
	root, err := os.OpenRoot(e.j.dir)
	if err != nil {
		return api.RunFailed, "inputs: open the task's directory: " + err.Error()
	}
	defer root.Close()
	for i, in := range t.Inputs {
		err := walkInput(root, in.Source, func(rel string, mode fs.FileMode, r io.Reader) error {
			_, err := e.s.sbx.Upload(ctx, e.sandboxID, path.Join(in.Destination, rel), mode, r)
			return err
		})
		if err != nil {
			return e.stepFailed(ctx, fmt.Sprintf("inputs[%d]: copy %s to %s", i, in.Source, in.Destination), err)
		}
	}
	return "", ""
}

// walkInput calls put with each regular file of the input source (a file,
// or a directory's tree), its path relative to source ("." for a file),
// its permissions and its content. The source is found in root, whatever
// links it passes through, and never outside it; in a directory's tree
// symbolic links are left out.
func walkInput(root *os.Root, source string, put func(rel string, mode fs.FileMode, r io.Reader) error) error {
	source = filepath.FromSlash(source)
	fi, err := root.Stat(source)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return putFile(root, source, ".", put)
	}
	sub, err := root.OpenRoot(source)
	if err != nil {
		return err
	}
	defer sub.Close()
	return fs.WalkDir(sub.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		return putFile(sub, filepath.FromSlash(p), p, put)
	})
}

// putFile calls put with the regular file name of root.
func putFile(root *os.Root, name, rel string, put func(string, fs.FileMode, io.Reader) error) error {
	f, err := root.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", name)
	}
	return put(rel, fi.Mode().Perm(), io.LimitReader(f, fi.Size()))
}

// stepFailed says how a run ends whose step failed with err: as its
// context says when that ended, sandbox_lost when the sandbox does not
// answer, else failed with what was being done.
func (e *execution) stepFailed(ctx context.Context, doing string, err error) (api.RunStatus, string) {
	if st, reason, ok := ended(ctx, e.j.task); ok {
		return st, reason
	}
	if !e.alive(ctx) {
		return api.RunSandboxLost, fmt.Sprintf("the sandbox stopped answering (%s: %v)", doing, err)
	}
	return api.RunFailed, doing + ": " + err.Error()
}

// alive reports whether the sandbox's agent answers.
func (e *execution) alive(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if sb, err := e.s.sbx.Get(ctx, e.sandboxID); err != nil || sb.Status != api.StatusRunning {
		return false
	}
	return e.s.sbx.Ping(ctx, e.sandboxID) == nil
}

// shell runs a shell command in the workdir with the task's environment,
// its output going to the logs; it returns the exit code and the last
// lines of output.
func (e *execution) shell(ctx context.Context, command string, env map[string]string) (int, []string, error) {
	var mu sync.Mutex
	var last []string
	keep := func(stream string, line []byte) {
		e.log.output(stream, line)
		e.log.add(api.RunEvent{Type: api.RunEventOutput, Stream: stream, Text: string(line)})
		e.j.touch()
		mu.Lock()
		last = appendTail(last, string(line))
		mu.Unlock()
	}
	stdout, stderr := newLineWriter(func(l []byte) { keep("stdout", l) }), newLineWriter(func(l []byte) { keep("stderr", l) })
	res, err := e.exec(ctx, api.ExecRequest{
		Command: []string{"/bin/sh", "-c", command}, Env: e.env(env), Cwd: e.j.task.Workdir, Timeout: remaining(ctx),
	}, stdout, stderr)
	stdout.Close()
	stderr.Close()
	if err != nil {
		return 0, nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	return res.ExitCode, last, nil
}

// env is env with the run's id in caller.EnvRun: every command of the
// run (setup, agent, check) knows its run. (The daemon knows a run's
// sandbox without it, from RunOfSandbox: the sandbox itself gets no env
// of its own, so that a warm pool's fits.)
func (e *execution) env(env map[string]string) map[string]string {
	out := maps.Clone(env)
	if out == nil {
		out = map[string]string{}
	}
	out[caller.EnvRun] = e.j.id
	return out
}

// exec runs req in the run's sandbox, passing its output to stdout and
// stderr (nil: dropped) as it comes, and returns its exit.
func (e *execution) exec(ctx context.Context, req api.ExecRequest, stdout, stderr io.Writer) (api.ExecEvent, error) {
	return e.s.sbx.ExecStream(ctx, e.sandboxID, req, nil, func(ev api.ExecEvent) error {
		w := stdout
		if ev.Type == "stderr" {
			w = stderr
		}
		if w == nil {
			return nil
		}
		_, err := io.WriteString(w, ev.Data)
		return err
	})
}

// remaining is the time left before ctx's deadline, as an exec timeout in
// seconds (rounded up).
func remaining(ctx context.Context) int {
	d := service.MaxExecTimeout
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl)+time.Second)
	}
	return int((max(d, time.Second) + time.Second - 1) / time.Second)
}

// appendTail appends line to tail, keeping the last tailLines.
func appendTail(tail []string, line string) []string {
	if len(line) > 1000 {
		line = line[:1000] + "…"
	}
	tail = append(tail, line)
	if len(tail) > tailLines {
		tail = append(tail[:0], tail[len(tail)-tailLines:]...)
	}
	return tail
}

// setup runs the task's setup commands, then, for an agent CLI, its
// entrypoint (a start script).
func (e *execution) setup(ctx context.Context) (api.RunStatus, string) {
	t := e.j.task
	cmds := append([]string(nil), t.Setup...)
	names := make([]string, len(cmds))
	for i := range cmds {
		names[i] = fmt.Sprintf("setup[%d]", i)
	}
	if t.Agent != task.AgentCustom && t.Entrypoint != "" {
		cmds, names = append(cmds, t.Entrypoint), append(names, "entrypoint")
	}
	for i, cmd := range cmds {
		code, last, err := e.shell(ctx, cmd, t.Env)
		if err != nil {
			return e.stepFailed(ctx, names[i], err)
		}
		if code != 0 {
			return api.RunFailed, fmt.Sprintf("%s exited %d: %s", names[i], code, strings.Join(last, "\n"))
		}
	}
	return "", ""
}

// agent runs the agent as its adapter plans it, reading its output into
// events: as a detached process of the sandbox, which a daemon that
// stops leaves running and the next one follows again (resume.go).
func (e *execution) agent(ctx context.Context) (api.RunStatus, string) {
	adapter := e.adapter
	deadline, _ := ctx.Deadline()
	if st := e.resumed; st != nil && st.Phase == api.PhaseAgent {
		e.resumed = nil
		r := e.newAgentReader(adapter, deadline)
		r.next, r.started = st.Next, true
		r.again = e.s.loggedAfter(e.j.id, st.Logged)
		_, _ = r.stdout.Write(st.Stdout)
		_, _ = r.stderr.Write(st.Stderr)
		res, err := e.s.sbx.FollowProc(ctx, e.sandboxID, agentTag, st.Next, r.output)
		if !errors.Is(err, errdefs.ErrNotFound) || st.Started {
			return e.agentEnded(ctx, r, res, err)
		}
		r.stop(false) // the last daemon stopped before it started it: it starts now
	}
	t := e.j.task
	in := agents.Input{
		Goal: t.Goal, Model: t.Model, LLMURL: e.s.cfg.LLMURL, APIKey: "sk-agent2env-" + e.j.id,
		Workdir: t.Workdir, Home: service.HomeDir, Entrypoint: t.Entrypoint, Env: t.Env,
	}
	for _, m := range t.MCP {
		srv := agents.MCPServer{Name: m.Name, URL: m.URL, Headers: m.Headers, Command: m.Command, Env: m.Env}
		if m.Own() {
			srv.URL = e.s.cfg.MCPURL
		}
		in.MCP = append(in.MCP, srv)
	}
	plan, err := adapter.Plan(in)
	if err != nil {
		return api.RunFailed, "plan the agent: " + err.Error()
	}
	for _, f := range plan.Files {
		if _, err := e.s.sbx.Upload(ctx, e.sandboxID, f.Path, fs.FileMode(f.Mode), bytes.NewReader(f.Content)); err != nil {
			return e.stepFailed(ctx, "write "+f.Path, err)
		}
	}
	r := e.newAgentReader(adapter, deadline)
	// Saved before the start: a daemon that dies as the agent starts
	// leaves it to the next one, which finds it by its tag.
	r.save()
	res, err := e.s.sbx.StartFollowProc(ctx, e.sandboxID,
		service.ProcRequest{Command: plan.Command, Env: e.env(plan.Env), Cwd: plan.Dir, Timeout: time.Duration(remaining(ctx)) * time.Second},
		service.ProcIO{Tag: agentTag, FlowControl: true, OutputLimit: agentOutputKept},
		r.startedNow, r.output)
	return e.agentEnded(ctx, r, res, err)
}

// agentEnded is how the agent phase ends once the read of the agent's
// output r made has: with the agent's exit, when it has exited; left to
// the next daemon when this one stops (the agent goes on); otherwise with
// the agent ended first.
func (e *execution) agentEnded(ctx context.Context, r *agentReader, res service.ProcOutputResult, err error) (api.RunStatus, string) {
	if ctx.Err() != nil && !isOurs(context.Cause(ctx)) {
		r.stop(true) // the daemon stops: the next one reads on from here
		return "", ""
	}
	r.stop(false)
	if err != nil {
		e.killAgent(ctx)
	}
	r.close()
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) && ctx.Err() == nil && e.alive(ctx) {
			return api.RunFailed, ReasonRestarted + ": the agent's process was no longer in its sandbox"
		}
		return e.stepFailed(ctx, "run the agent", err)
	}
	p := res.Proc
	code := p.ExitCode
	e.exitCode = &code
	if _, rerr := e.s.store.UpdateRun(ctx, e.j.id, func(r *store.Run) error { r.ExitCode = &code; return nil }); rerr != nil {
		e.s.log.Warn("record the agent's exit code", logRun, e.j.id, "err", rerr)
	}
	t := e.j.task
	status, reason := api.RunStatus(""), ""
	switch {
	case p.TimedOut:
		status, reason = api.RunTimeout, fmt.Sprintf("the run did not end within its timeout of %s", t.End.Timeout)
	case p.OOMKilled:
		status, reason = api.RunFailed, "the agent was killed: out of memory"
	case code != t.End.ExitCode:
		status, reason = api.RunFailed, fmt.Sprintf("the agent exited %d, not %d", code, t.End.ExitCode)
	default:
		// Before the agent is forgotten: the next daemon would not find it.
		e.save(resumeState{Phase: api.PhaseCheck, Deadline: r.deadline})
	}
	e.killAgent(ctx) // it has ended: forget it, and its output
	return status, reason
}

// events records what the agent's parser read: what it counts, the
// run's tail and, unless the daemon before this one logged them (logged),
// its events.
func (e *execution) events(evs []agents.Event, logged bool) {
	for _, ev := range evs {
		switch ev.Kind {
		case agents.KindOutput:
			if !logged {
				e.log.add(api.RunEvent{Type: api.RunEventOutput, Stream: "stdout", Text: ev.Text})
			}
			e.keepTail(ev.Text)
			continue
		case agents.KindLLMCall:
			e.mu.Lock()
			e.llm.Requests++
			if u := ev.Usage; u != nil {
				e.llm.InputTokens += u.InputTokens
				e.llm.OutputTokens += u.OutputTokens
				e.llm.CachedTokens += u.CachedTokens
			}
			e.mu.Unlock()
		case agents.KindResult, agents.KindMessage, agents.KindError:
			if ev.Kind == agents.KindResult && ev.Usage != nil {
				e.mu.Lock()
				e.total = ev.Usage
				e.mu.Unlock()
			}
			for _, l := range strings.Split(strings.TrimSpace(ev.Text), "\n") {
				e.keepTail(l)
			}
		}
		if logged {
			continue
		}
		out := api.RunEvent{Type: api.RunEventAgent, Kind: string(ev.Kind), Text: ev.Text, Tool: ev.Tool,
			ToolID: ev.ToolID, IsError: ev.IsError}
		if len(ev.Input) > 0 {
			out.Input = json.RawMessage(ev.Input)
		}
		if u := ev.Usage; u != nil {
			out.Usage = &api.RunLLMUsage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CachedTokens: u.CachedTokens}
		}
		e.log.add(out)
	}
}

func (e *execution) keepTail(line string) {
	e.mu.Lock()
	e.tail = appendTail(e.tail, line)
	e.mu.Unlock()
}

// check checks the end conditions: the success file, then the check
// command.
func (e *execution) check(ctx context.Context) (api.RunStatus, string) {
	t := e.j.task
	if t.End.SuccessFile != "" {
		_, err := e.s.sbx.Stat(ctx, e.sandboxID, t.End.SuccessFile)
		if errors.Is(err, errdefs.ErrNotFound) {
			return api.RunFailed, fmt.Sprintf("the success file %s does not exist", t.End.SuccessFile)
		}
		if err != nil {
			return e.stepFailed(ctx, "look for "+t.End.SuccessFile, err)
		}
	}
	if t.End.Check != "" {
		code, last, err := e.shell(ctx, t.End.Check, t.Env)
		if err != nil {
			return e.stepFailed(ctx, "run the check", err)
		}
		if code != 0 {
			return api.RunFailed, fmt.Sprintf("the check exited %d: %s", code, strings.Join(last, "\n"))
		}
	}
	return "", ""
}

// finish records how the run ended: status, reason, timings, tokens, the
// output's last lines and artifacts, in the store and in result.json.
func (s *Service) finish(ctx context.Context, e *execution, status api.RunStatus, reason string) {
	now := s.now().UTC()
	res := result{Timings: e.timings}
	e.mu.Lock()
	res.OutputTail, res.LLM = e.tail, e.llm
	if u := e.total; u != nil && res.LLM.InputTokens == 0 && res.LLM.OutputTokens == 0 {
		res.LLM.InputTokens, res.LLM.OutputTokens, res.LLM.CachedTokens = u.InputTokens, u.OutputTokens, u.CachedTokens
	}
	e.mu.Unlock()
	if res.LLM.Requests > 0 || res.LLM.InputTokens > 0 {
		res.LLM.Source = "agent"
	}
	if s.llm != nil {
		if u, convs, ok := s.llm.RunUsage(ctx, e.j.id, e.sandboxID); ok {
			u.Source = "proxy"
			res.LLM, res.ConversationIDs = u, convs
			if len(convs) > 0 {
				res.ConversationID = convs[0]
			}
		}
	}
	res.Artifacts, res.ArtifactsTruncated = e.artifacts()
	res.ArtifactsError = e.artifactsErr
	b, err := json.Marshal(res)
	if err != nil {
		s.log.Error("encode run result", logRun, e.j.id, "err", err)
	}
	rec, err := s.store.UpdateRun(ctx, e.j.id, func(r *store.Run) error {
		r.Status, r.Phase, r.Reason, r.UpdatedAt, r.EndedAt, r.Result = string(status), api.PhaseDone, reason, now, &now, b
		if e.exitCode != nil {
			r.ExitCode = e.exitCode
		}
		return nil
	})
	if err != nil {
		s.log.Error("record the end of a run", logRun, e.j.id, "err", err)
	} else if js, err := json.MarshalIndent(view(rec), "", "  "); err == nil {
		_ = os.WriteFile(filepath.Join(s.runDir(e.j.id), resultFile), append(js, '\n'), 0o600)
	}
	s.removeResume(e.j.id)
	s.endLog(e.j.id, status, reason)
	s.log.Info("run ended", logRun, e.j.id, "task", e.j.task.Name, "agent", e.j.task.Agent, "status", status, "reason", reason)
}
