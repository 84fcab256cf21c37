package session

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/contexts"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/outbuf"
	"github.com/agent2env/agent2env/internal/store"
)

// Sink receives a command's output as it is produced (the stdout and
// stderr of contexts.Sink).
type Sink interface {
	Stdout(text string) error
	Stderr(text string) error
}

// ExecuteCode runs code in the session's kernel of its language, making
// the session (req.SessionID, or a new id) and the kernel when they do not
// exist. Output goes to sink as it comes when sink is not nil. The
// response's output counts against the daemon's output budget until
// release is called: call it once the response is written.
func (s *Service) ExecuteCode(ctx context.Context, req api.SessionExecuteRequest, sink contexts.Sink) (resp *api.SessionExecuteResponse, release func(), err error) {
	if err := CheckExecute(req); err != nil {
		return nil, nil, err
	}
	lang, _ := contexts.Language(req.Language)
	ereq := api.ExecuteRequest{Code: req.Code, Timeout: req.Timeout, Env: req.Env}
	l, err := s.open(ctx, openRequest{id: req.SessionID, flavor: req.Flavor, language: lang})
	if err != nil {
		return nil, nil, err
	}
	ok := false
	defer func() { l.release(ctx, ok, activity{}) }() // the contexts service reports the execution
	id, err := s.kernel(ctx, l, lang)
	if err != nil {
		return nil, nil, err
	}
	exe, err := s.ctxs.ExecuteTo(ctx, id, ereq, sink)
	if err != nil {
		return nil, nil, err
	}
	ok = true
	s.log.Debug("session execution", "session", l.sess.ID, "language", lang, "success", exe.Success, "created", l.created)
	return &api.SessionExecuteResponse{SessionInfo: l.info(), Language: lang, ExecuteResponse: *exe.ExecuteResponse}, exe.Release, nil
}

// CheckExecute validates a code request as ExecuteCode does before it
// makes anything (the flavor is checked against the daemon's then).
func CheckExecute(req api.SessionExecuteRequest) error {
	if _, err := contexts.Language(req.Language); err != nil {
		return err
	}
	if req.SessionID != "" {
		if err := CheckID(req.SessionID); err != nil {
			return err
		}
	}
	return contexts.CheckExecute(api.ExecuteRequest{Code: req.Code, Timeout: req.Timeout, Env: req.Env})
}

// kernel returns the context of lang in the lease's session, starting one
// when there is none.
func (s *Service) kernel(ctx context.Context, l *lease, lang string) (string, error) {
	unlock, err := s.kernels.LockContext(ctx, l.sess.Key+"\x00"+lang)
	if err != nil {
		return "", fmt.Errorf("wait for the %s kernel of session %s: %w", lang, l.sess.ID, err)
	}
	defer unlock()
	cs, _, err := s.store.ListContextPage(ctx, store.ContextFilter{SessionKey: l.sess.Key, Language: lang}, store.Page{Limit: 1})
	if err != nil {
		return "", err
	}
	if len(cs) > 0 {
		return cs[0].ID, nil
	}
	c, err := s.ctxs.CreateInSession(ctx, api.CreateContextRequest{Language: lang, SessionName: l.sess.ID,
		Name: "session " + l.sess.ID + " " + lang}, l.attachment())
	if err != nil {
		return "", err
	}
	return c.ContextID, nil
}

// MaxOutputBytes bounds the stdout and stderr a command's response keeps
// (within the daemon's output budget) and the output passed on to a sink.
const MaxOutputBytes = 10 << 20

// ExecuteCommand runs a command in the session's sandbox, making the
// session when it does not exist. Output goes to sink as it comes, as
// text, when sink is not nil; the response has it as it came, each
// stream cut at MaxOutputBytes or by the daemon's output budget (Truncated
// says so), as text whatever encoding the request asks for: a surface
// encodes it as it writes it (as service.Sandboxes.Exec's). The output
// counts against that budget until release is called: call it once the
// response is written.
func (s *Service) ExecuteCommand(ctx context.Context, req api.SessionCommandRequest, sink Sink) (resp *api.SessionCommandResponse, release func(), err error) {
	mreq, err := s.commandRequest(req)
	if err != nil {
		return nil, nil, err
	}
	l, err := s.open(ctx, openRequest{id: req.SessionID, flavor: req.Flavor})
	if err != nil {
		return nil, nil, err
	}
	ok := false
	var act activity
	defer func() { l.release(ctx, ok, act) }()
	budget := s.sbx.OutputBudget()
	stdout := &output{buf: budget.NewBuffer(l.sandbox.ID, MaxOutputBytes), sink: sink}
	stderr := &output{buf: budget.NewBuffer(l.sandbox.ID, MaxOutputBytes), sink: sink, stderr: true}
	// free, not release: a failing return sets the result release to
	// nil before the deferred call runs.
	free := func() {
		stdout.buf.Release()
		stderr.buf.Release()
	}
	defer func() {
		if err != nil {
			free()
		}
	}()
	start := time.Now()
	res, err := s.sbx.ExecStream(ctx, l.sandbox.ID, mreq, stdout, stderr)
	elapsed := time.Since(start)
	failed := err != nil || res.ExitCode != 0 || res.TimedOut
	s.execs.observe(elapsed, failed)
	act = activity{executions: 1, elapsed: elapsed}
	if failed {
		act.errors = 1
	}
	if err != nil {
		return nil, nil, err
	}
	if err = stdout.flush(); err != nil {
		return nil, nil, err
	}
	if err = stderr.flush(); err != nil {
		return nil, nil, err
	}
	ok = true
	s.log.Info("session command", "session", l.sess.ID, "duration", elapsed, "exit_code", res.ExitCode, "timed_out", res.TimedOut,
		"created", l.created)
	return &api.SessionCommandResponse{SessionInfo: l.info(), ExecResponse: api.ExecResponse{
		ExitCode: res.ExitCode, Stdout: stdout.buf.String(), Stderr: stderr.buf.String(), TimedOut: res.TimedOut,
		OOMKilled: res.OOMKilled, Reason: res.Reason,
		Truncated:  stdout.buf.Dropped()+stderr.buf.Dropped() > 0,
		DurationMS: float64(res.Duration.Microseconds()) / 1000,
	}}, free, nil
}

// commandRequest checks a command request and turns it into the
// manager's.
func (s *Service) commandRequest(req api.SessionCommandRequest) (manager.ExecRequest, error) {
	mreq, err := execRequest(req)
	if err == nil {
		err = s.sbx.ValidateExec(mreq)
	}
	return mreq, err
}

// CheckCommand validates a command request's own fields as ExecuteCommand
// does before it makes anything (the manager checks env and cwd then).
func CheckCommand(req api.SessionCommandRequest) error {
	_, err := execRequest(req)
	return err
}

// execRequest turns a command request into the manager's: a shell string
// runs with bash -c.
func execRequest(req api.SessionCommandRequest) (manager.ExecRequest, error) {
	argv := req.Command.Argv
	if req.Command.Shell != "" {
		argv = []string{"bash", "-c", req.Command.Shell}
	}
	if len(argv) == 0 || argv[0] == "" {
		return manager.ExecRequest{}, errdefs.Invalid("command is required: a string for bash -c, or an argv array")
	}
	if math.IsNaN(req.Timeout) || req.Timeout < 0 || req.Timeout > manager.MaxExecTimeout.Seconds() {
		return manager.ExecRequest{}, errdefs.Invalid("timeout must be between 0 and %v seconds", manager.MaxExecTimeout.Seconds())
	}
	if err := api.CheckOutputEncoding(req.OutputEncoding); err != nil {
		return manager.ExecRequest{}, errdefs.Invalid("%v", err)
	}
	if req.SessionID != "" {
		if err := CheckID(req.SessionID); err != nil {
			return manager.ExecRequest{}, err
		}
	}
	return manager.ExecRequest{Command: argv, Timeout: time.Duration(req.Timeout * float64(time.Second)), Env: req.Env, Cwd: req.Cwd}, nil
}

// output keeps what a command writes to one stream in a buffer of the
// output budget, and passes its first MaxOutputBytes on to a sink as whole
// characters, with invalid UTF-8 replaced: what the sink gets does not
// depend on what the budget grants.
type output struct {
	buf     *outbuf.Buffer
	sink    Sink
	stderr  bool
	sent    int    // bytes passed to the sink or held back
	partial []byte // the start of a character cut in two, held back
	err     error  // the sink's first error: the client is gone
}

func (o *output) Write(p []byte) (int, error) {
	_, _ = o.buf.Write(p)
	if o.sink == nil || o.err != nil || o.sent >= MaxOutputBytes {
		return len(p), nil
	}
	chunk := p[:min(len(p), MaxOutputBytes-o.sent)]
	o.sent += len(chunk)
	if len(o.partial) > 0 {
		chunk = append(o.partial, chunk...)
	}
	end := len(chunk)
	for i := end - 1; i >= 0 && i > end-utf8.UTFMax; i-- {
		if utf8.RuneStart(chunk[i]) {
			if !utf8.FullRune(chunk[i:end]) {
				end = i
			}
			break
		}
	}
	o.partial = append(o.partial[:0:0], chunk[end:]...)
	o.send(chunk[:end])
	return len(p), nil
}

// send passes text on to the sink.
func (o *output) send(text []byte) {
	if o.sink == nil || o.err != nil || len(text) == 0 {
		return
	}
	chunk := strings.ToValidUTF8(string(text), "\uFFFD")
	if o.stderr {
		o.err = o.sink.Stderr(chunk)
	} else {
		o.err = o.sink.Stdout(chunk)
	}
}

// flush passes on what is held back, and returns the sink's error.
func (o *output) flush() error {
	o.send(o.partial)
	o.partial = nil
	return o.err
}
