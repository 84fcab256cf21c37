package service

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/utf8cut"
)

// execRequest checks req's timeout and turns it into the manager's
// request, which checks the rest when it runs. The timeout is checked in
// seconds, because converting a larger value to a time.Duration overflows,
// possibly into the allowed range.
func execRequest(req api.ExecRequest) (manager.ExecRequest, error) {
	if req.Timeout < 0 {
		return manager.ExecRequest{}, errdefs.Invalid("timeout %d is negative", req.Timeout)
	}
	if maxSecs := int(manager.MaxExecTimeout / time.Second); req.Timeout > maxSecs {
		return manager.ExecRequest{}, errdefs.Invalid("timeout %d is above the maximum of %d seconds", req.Timeout, maxSecs)
	}
	if err := api.CheckOutputEncoding(req.OutputEncoding); err != nil {
		return manager.ExecRequest{}, errdefs.Invalid("%v", err)
	}
	out := manager.ExecRequest{
		Command: req.Command, Timeout: time.Duration(req.Timeout) * time.Second, Env: req.Env, Cwd: req.Cwd,
	}
	if req.Stdin != "" {
		out.Stdin = strings.NewReader(req.Stdin)
	}
	return out, nil
}

// MaxExecTimeout is the longest a command may run.
const MaxExecTimeout = manager.MaxExecTimeout

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Exec runs a command in sandbox id and returns its output, each stream
// cut at the manager's limit or the daemon's output budget (Truncated says
// so), as it came: the response is text (Encoding empty) whatever
// encoding the request asks for, and a surface encodes it as it writes
// it, for a base64 copy would be 4/3 of the output outside the budget.
// The output counts against that budget until release is called: call it
// once the result is written. A command that runs and fails is a result
// with its exit code, not an error.
func (s *Sandboxes) Exec(ctx context.Context, id string, req api.ExecRequest) (*api.ExecResponse, func(), error) {
	mreq, err := execRequest(req)
	if err != nil {
		return nil, nil, err
	}
	res, err := s.m.Exec(ctx, id, mreq)
	if err != nil {
		return nil, nil, err
	}
	return &api.ExecResponse{
		ExitCode: res.ExitCode, Stdout: res.Stdout, Stderr: res.Stderr,
		TimedOut: res.TimedOut, Truncated: res.Truncated, DurationMS: ms(res.Duration),
		OOMKilled: res.OOMKilled, Reason: res.Reason,
	}, res.Release, nil
}

// ExecStream runs a command in sandbox id, streaming it: start is called
// once the sandbox has accepted the command, then emit with each chunk of
// its output, as a "stdout" or "stderr" event in the encoding the request
// asks for, as it is produced; the final "exit" event is returned. An
// error before start was called is the request's refusal (bad input, a
// sandbox not running, a working directory the command cannot use):
// nothing ran, and a surface answers it as any failed request, having
// committed to no stream. After it, an error means
// that the command could not run to its end (its output so far was
// emitted). start and emit are called from one goroutine at a time; an
// error from emit ends the command. The command's stdin is read as it
// runs.
func (s *Sandboxes) ExecStream(ctx context.Context, id string, req api.ExecRequest, start func(), emit func(api.ExecEvent) error) (api.ExecEvent, error) {
	mreq, err := execRequest(req)
	if err != nil {
		return api.ExecEvent{}, err
	}
	mreq.Accepted = start
	stdout, stderr := outputWriter(emit, "stdout", req.OutputEncoding), outputWriter(emit, "stderr", req.OutputEncoding)
	res, err := s.m.ExecStream(ctx, id, mreq, stdout, stderr)
	if err == nil {
		// What a stream held back of a character its end cut goes as
		// it is.
		err = errors.Join(stdout.Flush(), stderr.Flush())
	}
	if err != nil {
		return api.ExecEvent{}, err
	}
	return api.ExecEvent{Type: "exit", ExitCode: res.ExitCode, TimedOut: res.TimedOut, Duration: ms(res.Duration),
		OOMKilled: res.OOMKilled, Reason: res.Reason, Signal: res.Signal}, nil
}

// outputWriter returns a writer whose writes become output events of the
// given type, their data in encoding enc. In text, an event never ends in
// a character the agent's read cut, which its text would hold as U+FFFD:
// the rest of it goes with the next write, or at Flush. In base64 the
// bytes go as they come. The agent delivers each chunk from one goroutine
// per stream, and the two streams' writes are serialized by the agent
// client.
func outputWriter(emit func(api.ExecEvent) error, event, enc string) *utf8cut.Writer {
	return &utf8cut.Writer{Emit: func(p []byte) error {
		data, encoding := api.EncodeOutput(string(p), enc)
		return emit(api.ExecEvent{Type: event, Data: data, Encoding: encoding})
	}, Bytes: enc == api.OutputBase64}
}
