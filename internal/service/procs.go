package service

import (
	"context"
	"io"
	"time"

	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/manager"
)

// ProcRequest is a background command to start in a sandbox: an argv
// (Command) or a string run by /bin/sh -c (Shell), one of them.
type ProcRequest struct {
	Command []string
	Shell   string
	Env     map[string]string
	// Cwd is the working directory; the sandbox's default when empty.
	Cwd string
	// Timeout ends the command when it elapses (it stays known, with
	// TimedOut set); zero means none, at most MaxExecTimeout.
	Timeout time.Duration
}

// Proc is a background command of a sandbox.
type Proc struct {
	ID string
	// Command is the argv that was run.
	Command []string
	Running bool
	// Started and, once it has ended, Ended.
	Started, Ended time.Time
	// ExitCode is how it ended (128+n when signal n killed it, named by
	// Signal); TimedOut says its timeout ended it, OOMKilled the
	// out-of-memory killer.
	ExitCode  int
	Signal    string
	TimedOut  bool
	OOMKilled bool
	// Output is the offset after the newest byte it has written to its
	// stdout and stderr together.
	Output int64
}

// ProcOutputOptions says where a read of a command's output starts and
// whether it follows the command to its end.
type ProcOutputOptions struct {
	// Since is the offset in the command's output (stdout and stderr
	// together) to read from: 0 for all that is kept, a previous read's
	// Next to go on from it.
	Since int64
	// Follow reads until the command has ended and all its output is
	// read; otherwise the read ends with what there is now.
	Follow bool
}

// ProcOutputResult is where a read of a command's output ended.
type ProcOutputResult struct {
	// Next is the offset after the last byte delivered.
	Next int64
	// Missed counts the bytes asked for that were no longer kept.
	Missed int64
	// Proc is the command as the read ended.
	Proc Proc
}

// StartProc starts a background command in running sandbox id (an
// ErrFailedPrecondition, 409, otherwise). It runs until it ends, its
// timeout elapses or KillProc; it is known, ended or not, until KillProc.
func (s *Sandboxes) StartProc(ctx context.Context, id string, req ProcRequest) (Proc, error) {
	info, err := s.m.StartProc(ctx, id, manager.ProcRequest{Command: req.Command, Shell: req.Shell, Env: req.Env, Cwd: req.Cwd, Timeout: req.Timeout})
	if err != nil {
		return Proc{}, err
	}
	return procOf(info), nil
}

// Proc returns background command pid of sandbox id (ErrNotFound when
// it has none of that id).
func (s *Sandboxes) Proc(ctx context.Context, id, pid string) (Proc, error) {
	info, err := s.m.Proc(ctx, id, pid)
	if err != nil {
		return Proc{}, err
	}
	return procOf(info), nil
}

// ProcOutput copies the output of background command pid of sandbox id,
// from opts.Since on, to stdout and stderr (either nil to discard) as it
// comes.
func (s *Sandboxes) ProcOutput(ctx context.Context, id, pid string, opts ProcOutputOptions, stdout, stderr io.Writer) (ProcOutputResult, error) {
	if opts.Since < 0 {
		return ProcOutputResult{}, errdefs.Invalid("offset %d is negative", opts.Since)
	}
	res, err := s.m.ProcOutput(ctx, id, pid, agent.ProcOutputOptions{Since: opts.Since, Follow: opts.Follow}, stdout, stderr)
	if err != nil {
		return ProcOutputResult{}, err
	}
	return ProcOutputResult{Next: res.Next, Missed: res.Missed, Proc: procOf(res.Proc)}, nil
}

// SignalProc sends sig (a name such as "INT" or "SIGINT", or a number) to
// background command pid of sandbox id; it stays known when the signal
// ends it.
func (s *Sandboxes) SignalProc(ctx context.Context, id, pid, sig string) error {
	return s.m.SignalProc(ctx, id, pid, sig)
}

// KillProc ends background command pid of sandbox id, with all it
// started, forgets it and returns how it ended.
func (s *Sandboxes) KillProc(ctx context.Context, id, pid string) (Proc, error) {
	info, err := s.m.KillProc(ctx, id, pid)
	if err != nil {
		return Proc{}, err
	}
	return procOf(info), nil
}

func procOf(info agent.ProcInfo) Proc {
	return Proc{
		ID: info.ID, Command: info.Command, Running: info.Running, Started: info.Started, Ended: info.Ended,
		ExitCode: info.ExitCode, Signal: info.Signal, TimedOut: info.TimedOut, OOMKilled: info.Reason == agent.ReasonOutOfMemory,
		Output: info.Output,
	}
}
