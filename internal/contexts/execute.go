package contexts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/metrics"
	"github.com/agent2env/agent2env/internal/outbuf"
	"github.com/agent2env/agent2env/internal/store"
)

// Execution limits.
const (
	DefaultTimeout = 30 * time.Second
	MaxTimeout     = 24 * time.Hour
	// MaxCodeBytes bounds the code of one execution.
	MaxCodeBytes = 8 << 20
)

// Sink receives an execution's output as it is produced. The buffered
// form collects it; the streaming form sends each call as an event.
type Sink interface {
	Stdout(text string) error
	Stderr(text string) error
	Result(r api.ExecutionResult) error
}

// Execution is the answer of a buffered execution. Its output counts
// against the daemon's output budget until Release.
type Execution struct {
	*api.ExecuteResponse
	out [2]*outbuf.Buffer
}

// Release gives the memory of the execution's output back to the output
// budget. Call it once the output is written out (it stays valid,
// uncounted). Release may be called more than once.
func (e *Execution) Release() {
	for _, b := range e.out {
		b.Release()
	}
}

// Execute runs code in a context, collecting its output within the output
// budget. The caller must Release the answer. A context whose sandbox is
// paused or stopped is ErrFailedPrecondition (SANDBOX_NOT_READY, 409; its
// details name the sandbox and its status) and nothing runs; a sandbox
// that goes while the code runs (deleted, stopped, its agent no longer
// answering) is an answer whose error is api.ErrorNameSandboxGone.
func (s *Service) Execute(ctx context.Context, id string, req api.ExecuteRequest) (*Execution, error) {
	return s.ExecuteTo(ctx, id, req, nil)
}

// ExecuteTo is Execute that also passes the output on to sink (nil: none)
// as it comes, for callers that stream an execution and answer with its
// whole output too (sessions, MCP). The sink gets all the output, the
// answer what the budget kept.
func (s *Service) ExecuteTo(ctx context.Context, id string, req api.ExecuteRequest, sink Sink) (*Execution, error) {
	c, err := s.get(ctx, id)
	if err != nil {
		return nil, contextErr(err)
	}
	return s.executeBuffered(ctx, c, req, sink, s.sbx.Agent)
}

// ExecuteIn runs code in a context of the given sandbox, as Execute.
func (s *Service) ExecuteIn(ctx context.Context, sandboxID, id string, req api.ExecuteRequest) (*Execution, error) {
	c, err := s.inSandbox(ctx, sandboxID, id)
	if err != nil {
		return nil, err
	}
	return s.executeBuffered(ctx, c, req, nil, s.sbx.Agent)
}

// reachFunc returns a client of the agent of sandbox id.
type reachFunc func(ctx context.Context, id string) (*agent.Client, error)

func (s *Service) executeBuffered(ctx context.Context, c *store.Context, req api.ExecuteRequest, sink Sink, reach reachFunc) (*Execution, error) {
	// Each stream may take the whole limit the agent enforces on both,
	// and its marker.
	limit := s.cfg.OutputLimit + outbuf.NoteRoom
	col := &collector{sink: sink, out: [2]*outbuf.Buffer{s.cfg.Outputs.NewBuffer(c.SandboxID, limit), s.cfg.Outputs.NewBuffer(c.SandboxID, limit)}}
	exe := &Execution{out: col.out}
	resp, err := s.execute(ctx, c, req, col, reach)
	if err != nil {
		exe.Release()
		return nil, err
	}
	exe.ExecuteResponse = resp
	return exe, nil
}

// Stream checks that context id exists (in sandboxID, when set), that its
// sandbox runs (or that its session resumes it when the code runs), and
// that the request is valid, and returns the function that runs it,
// delivering output to sink as it comes (the response's Output stays
// empty). The split lets a caller answer bad requests, and a paused or
// stopped sandbox as Execute does, before it commits to a streaming
// response.
func (s *Service) Stream(ctx context.Context, sandboxID, id string, req api.ExecuteRequest) (func(ctx context.Context, sink Sink) (*api.ExecuteResponse, error), error) {
	var c *store.Context
	var err error
	if sandboxID != "" {
		c, err = s.inSandbox(ctx, sandboxID, id)
	} else if c, err = s.get(ctx, id); err != nil {
		err = contextErr(err)
	}
	if err != nil {
		return nil, err
	}
	if _, err := execRequest(req, 0); err != nil {
		return nil, err
	}
	// The agent is reached here, so that a sandbox that does not run is
	// refused before the stream starts, and the run does not read the
	// sandbox again; one its session's execution resumes (see
	// Sessions.Use) is reached by the run, after the resume.
	reach := reachFunc(s.sbx.Agent)
	ac, err := s.sbx.Agent(ctx, c.SandboxID)
	switch {
	case err == nil:
		reach = func(context.Context, string) (*agent.Client, error) { return ac, nil }
	case errors.Is(err, errdefs.ErrFailedPrecondition) && (c.SessionKey == "" || s.sessions == nil):
		return nil, err
	}
	return s.stream(c, req, reach), nil
}

// StreamChecked is Stream in sandbox sandboxID for a caller that has just
// read that sandbox and found it running (an access check, as the E2B
// surface makes for every request): neither it nor its run reads the
// sandbox again, where Stream reads it twice (that it exists, then that it
// runs, before reaching its agent). Context id must be in the sandbox. A
// sandbox deleted or paused since the caller's read is found as Execute
// finds one gone while it runs: the execution's error is
// api.ErrorNameSandboxGone.
func (s *Service) StreamChecked(ctx context.Context, sandboxID, id string, req api.ExecuteRequest) (func(ctx context.Context, sink Sink) (*api.ExecuteResponse, error), error) {
	c, err := s.get(ctx, id)
	if err != nil {
		return nil, contextErr(err)
	}
	if c.SandboxID != sandboxID {
		return nil, errdefs.WithCode(errdefs.NotFound("context %s is not in sandbox %s", id, sandboxID), api.CodeContextNotFound)
	}
	if _, err := execRequest(req, 0); err != nil {
		return nil, err
	}
	return s.stream(c, req, s.sbx.RunningAgent), nil
}

// stream returns the function that runs req in c, reaching its agent
// with reach.
func (s *Service) stream(c *store.Context, req api.ExecuteRequest, reach reachFunc) func(ctx context.Context, sink Sink) (*api.ExecuteResponse, error) {
	return func(ctx context.Context, sink Sink) (*api.ExecuteResponse, error) {
		return s.execute(ctx, c, req, &collector{sink: sink}, reach)
	}
}

// CheckExecute validates an execution request as Execute does, without
// running anything.
func CheckExecute(req api.ExecuteRequest) error {
	_, err := execRequest(req, 0)
	return err
}

// execRequest validates req and turns it into the agent's request.
func execRequest(req api.ExecuteRequest, limit int64) (agent.KernelExecRequest, error) {
	if req.Code == "" {
		return agent.KernelExecRequest{}, errdefs.Invalid("code is required")
	}
	if len(req.Code) > MaxCodeBytes {
		return agent.KernelExecRequest{}, errdefs.Invalid("code is %d bytes, above the %d-byte limit", len(req.Code), MaxCodeBytes)
	}
	if strings.ContainsRune(req.Code, 0) {
		return agent.KernelExecRequest{}, errdefs.Invalid("code must not contain NUL")
	}
	if math.IsNaN(req.Timeout) || req.Timeout < 0 || req.Timeout > MaxTimeout.Seconds() {
		return agent.KernelExecRequest{}, errdefs.Invalid("timeout must be between 0 and %v seconds", MaxTimeout.Seconds())
	}
	if err := validExecEnv(req.Env); err != nil {
		return agent.KernelExecRequest{}, err
	}
	timeout := DefaultTimeout
	if req.Timeout > 0 {
		timeout = time.Duration(req.Timeout * float64(time.Second))
	}
	return agent.KernelExecRequest{Code: req.Code, Timeout: timeout, OutputLimit: limit, Env: req.Env}, nil
}

// validExecEnv checks an execution's variables: names a shell can export
// (bash kernels export them), values without NUL.
func validExecEnv(env map[string]string) error {
	for name, value := range env {
		if !shellName(name) || strings.ContainsRune(value, 0) {
			return errdefs.Invalid("env %q: an execution's variable names are letters, digits and '_', not starting with a digit; values have no NUL", name)
		}
	}
	return nil
}

// shellName reports whether name is a shell variable's name.
func shellName(name string) bool {
	for i, r := range name {
		if r != '_' && (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (i == 0 || r < '0' || r > '9') {
			return false
		}
	}
	return name != ""
}

// execute runs req in c, delivering its output to col, reaching c's
// sandbox's agent with reach.
func (s *Service) execute(ctx context.Context, c *store.Context, req api.ExecuteRequest, col *collector, reach reachFunc) (*api.ExecuteResponse, error) {
	kreq, err := execRequest(req, s.cfg.OutputLimit)
	if err != nil {
		return nil, err
	}
	sink := col.sink
	resp := &api.ExecuteResponse{ContextID: c.ID, Results: []api.ExecutionResult{}}
	done := s.use(ctx, c.SessionKey)
	leave := s.enter(c.ID)
	defer leave()
	start := time.Now()
	res, err := s.run(ctx, c, kreq, col, reach)
	elapsed := time.Since(start)
	label := executionLabel(res, err)
	s.metrics.ObserveExecution(c.Language, label, elapsed)
	done(elapsed, label != metrics.OutcomeOK)
	s.log.Info("execution", "context", c.ID, "session", c.SessionName, "language", c.Language, "duration", elapsed, "outcome", label)
	switch {
	case errors.Is(err, errSandboxGone):
		resp.Error = &api.ExecutionError{Name: api.ErrorNameSandboxGone, Kind: api.ErrorKindSystem, Value: err.Error()}
		res.Duration = time.Since(start)
	case err != nil:
		return nil, err
	}
	col.flush()
	resp.Truncated = res.Dropped > 0 || col.truncate(s.cfg.Outputs)
	if col.out[0] != nil {
		resp.Output = api.ExecutionOutput{Stdout: col.out[0].String(), Stderr: col.out[1].String()}
	}
	resp.Results = append(resp.Results, col.results...)
	resp.ExecutionTime = res.Duration.Seconds()
	resp.StateLost = res.StateLost
	if res.Error != nil {
		resp.Error = &api.ExecutionError{Name: res.Error.Name, Value: res.Error.Value, Traceback: res.Error.Traceback, Kind: res.Error.Kind}
	}
	if res.Result != nil {
		main := toResult(res.Result)
		main.IsMainResult = true
		resp.Result = main.Text
		resp.Results = append(resp.Results, main)
		if sink != nil {
			if err := sink.Result(main); err != nil {
				return nil, err
			}
		}
	}
	resp.Success = resp.Error == nil
	if col.err != nil {
		return nil, col.err
	}
	if errors.Is(err, errSandboxGone) { // nothing ran
		return resp, nil
	}
	count, err := s.store.CountContextExecution(context.WithoutCancel(ctx), c.ID, s.now().UTC())
	if err == nil {
		resp.ExecutionCount = count
	} else if !errors.Is(err, errdefs.ErrNotFound) { // deleted meanwhile
		s.log.Warn("record execution", "context", c.ID, "err", err)
	}
	return resp, nil
}

// use marks session key busy (see Sessions.Use); without sessions it
// records nothing.
func (s *Service) use(ctx context.Context, key string) func(time.Duration, bool) {
	if s.sessions == nil {
		return func(time.Duration, bool) {}
	}
	return s.sessions.Use(ctx, key)
}

// executionLabel is an execution's outcome label.
func executionLabel(res agent.KernelResult, err error) string {
	switch {
	case err != nil:
		return metrics.OutcomeError
	case res.TimedOut:
		return metrics.OutcomeTimeout
	case res.Error != nil:
		return metrics.OutcomeCodeError
	}
	return metrics.OutcomeOK
}

// errSandboxGone marks executions whose sandbox went before or while
// they ran (deleted, or its agent no longer answering).
var errSandboxGone = errors.New("sandbox gone")

// run executes in the context's kernel, reaching its agent with reach; a
// kernel the agent no longer has (the sandbox was restarted) is started
// again, with its state lost. A sandbox that is paused or stopped is the
// manager's ErrFailedPrecondition, as its other requests get: the request
// is refused, where a sandbox deleted meanwhile is gone.
func (s *Service) run(ctx context.Context, c *store.Context, req agent.KernelExecRequest, col *collector, reach reachFunc) (agent.KernelResult, error) {
	ac, err := reach(ctx, c.SandboxID)
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			return agent.KernelResult{}, fmt.Errorf("%w: %v", errSandboxGone, err)
		}
		return agent.KernelResult{}, err
	}
	out := agent.KernelOutput{Stdout: col.stdoutBytes, Stderr: col.stderrBytes, Display: col.display}
	res, err := ac.Execute(ctx, c.ID, req, out)
	if !errors.Is(err, errdefs.ErrNotFound) {
		if errors.Is(err, errdefs.ErrUnavailable) {
			return res, fmt.Errorf("%w: the agent of sandbox %s stopped answering: %v", errSandboxGone, c.SandboxID, err)
		}
		return res, err
	}
	if _, err := ac.CreateKernel(ctx, kernelSpec(c)); err != nil && !errors.Is(err, errdefs.ErrAlreadyExists) {
		return res, kernelErr(err, c)
	}
	res, err = ac.Execute(ctx, c.ID, req, out)
	res.StateLost = true
	return res, err
}

// toResult maps a MIME bundle to the wire's result.
func toResult(bundle map[string]any) api.ExecutionResult {
	str := func(k string) string {
		v, _ := bundle[k].(string)
		return v
	}
	return api.ExecutionResult{
		Text: str("text/plain"), HTML: str("text/html"), Markdown: str("text/markdown"),
		SVG: str("image/svg+xml"), PNG: str("image/png"), JPEG: str("image/jpeg"),
		LaTeX: str("text/latex"), JavaScript: str("application/javascript"), JSON: bundle["application/json"],
	}
}

// collector passes an execution's output on to a sink, keeps it in
// buffers, or both, as whole UTF-8 characters (a chunk may end inside one).
type collector struct {
	sink    Sink              // nil: none
	out     [2]*outbuf.Buffer // stdout, stderr; nil: none
	partial [2][]byte
	results []api.ExecutionResult
	err     error // the sink's first error: the client is gone
}

func (c *collector) stdoutBytes(p []byte) error { return c.text(0, p) }
func (c *collector) stderrBytes(p []byte) error { return c.text(1, p) }

func (c *collector) text(stream int, p []byte) error {
	buf := p
	if len(c.partial[stream]) > 0 {
		buf = append(c.partial[stream], p...)
	}
	cut := len(buf)
	// Hold back an incomplete character at the end (at most 3 bytes).
	for i := len(buf) - 1; i >= 0 && i >= len(buf)-3; i-- {
		if utf8.RuneStart(buf[i]) {
			if !utf8.FullRune(buf[i:]) {
				cut = i
			}
			break
		}
	}
	c.partial[stream] = append(c.partial[stream][:0:0], buf[cut:]...)
	c.emit(stream, buf[:cut])
	return nil
}

var replacement = []byte("\uFFFD")

func (c *collector) emit(stream int, b []byte) {
	if len(b) == 0 {
		return
	}
	if !utf8.Valid(b) {
		b = bytes.ToValidUTF8(b, replacement)
	}
	if c.out[stream] != nil {
		_, _ = c.out[stream].Write(b)
	}
	switch {
	case c.sink == nil, c.err != nil:
	case stream == 0:
		c.err = c.sink.Stdout(string(b))
	default:
		c.err = c.sink.Stderr(string(b))
	}
}

// flush passes on what is left of an incomplete character.
func (c *collector) flush() {
	for i, p := range c.partial {
		c.partial[i] = nil
		c.emit(i, p)
	}
}

// truncate ends each buffer the output budget cut short with a marker, and
// reports whether there was one.
func (c *collector) truncate(budget *outbuf.Budget) bool {
	cut := false
	for _, b := range c.out {
		if b != nil && b.Starved() {
			b.Note(agent.TruncationMarker(b.Dropped(), budget.Describe()))
			cut = true
		}
	}
	return cut
}

func (c *collector) display(bundle map[string]any) error {
	r := toResult(bundle)
	c.results = append(c.results, r)
	if c.sink != nil && c.err == nil {
		c.err = c.sink.Result(r)
	}
	return nil
}
