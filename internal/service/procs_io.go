package service

// Interactive background processes (a tag, a terminal or a stdin pipe),
// for the surfaces whose clients drive them (E2B's envd protocol).

import (
	"context"
	"errors"
	"io"

	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/manager"
)

// ProcIO says how a background process takes input and gives output: Tag
// names it beside its id (letters, digits, '.', '_', '-'); TTY runs it on
// a pseudo-terminal of Rows x Cols (24 x 80 when zero), whose output is
// one stream and which always takes input; Stdin gives one without TTY a
// pipe as its input (otherwise it reads /dev/null). FlowControl makes
// its output wait for the client attached as its writer (AttachProc)
// rather than overwrite what that client has not read, from the start:
// the caller must attach next, or kill the process. OutputLimit is how
// many bytes of its latest output the sandbox keeps for readers (1 MiB
// when zero, at most 64 MiB): what a client that comes back finds.
type ProcIO struct {
	Tag         string
	TTY         bool
	Rows, Cols  uint16
	Stdin       bool
	FlowControl bool
	OutputLimit int
}

// ProcDetail is a background command with what interactive clients show
// of it: its process id in the sandbox, its tag and whether it has a
// terminal.
type ProcDetail struct {
	Proc
	Pid int
	Tag string
	TTY bool
}

func procDetailOf(info agent.ProcInfo) ProcDetail {
	return ProcDetail{Proc: procOf(info), Pid: info.Pid, Tag: info.Tag, TTY: info.TTY}
}

// StartFollowProc starts a background command as StartProc does, with the
// input and output pio describes, and follows it as FollowProc does, as its writer from its first byte, in
// one exchange with the sandbox: what a client that starts a command and
// streams it to its end (E2B's process Start) needs, at the cost of one
// round trip where the two calls take two. started is called with the
// command, once it runs, before any of its output goes to out; an error
// from it, or the end of ctx, ends the read, not the command.
func (s *Sandboxes) StartFollowProc(ctx context.Context, id string, req ProcRequest, pio ProcIO, started func(ProcDetail) error, out TerminalOutput) (ProcOutputResult, error) {
	res, err := s.m.StartFollowProc(ctx, id,
		manager.ProcRequest{Command: req.Command, Shell: req.Shell, Env: req.Env, Cwd: req.Cwd, Timeout: req.Timeout},
		manager.ProcIO{Tag: pio.Tag, TTY: pio.TTY, Rows: pio.Rows, Cols: pio.Cols, Stdin: pio.Stdin, FlowControl: pio.FlowControl, OutputLimit: pio.OutputLimit},
		func(info agent.ProcInfo) error { return started(procDetailOf(info)) }, agentOutput(out))
	if err != nil {
		if ctx.Err() != nil {
			return ProcOutputResult{}, context.Cause(ctx)
		}
		return ProcOutputResult{}, err
	}
	return ProcOutputResult{Next: res.Next, Missed: res.Missed, Proc: procOf(res.Proc)}, nil
}

// FollowProc sends the output of background command pid of sandbox id,
// from offset since to its end, to out and returns where it ended, as
// ProcOutput with Follow does; but it attaches to the command as its
// writer when no other client is (else as a reader), so that the output
// of a command started with FlowControl waits while out blocks rather
// than overwrite what out has not taken. The end of ctx ends the read,
// not the command.
func (s *Sandboxes) FollowProc(ctx context.Context, id, pid string, since int64, out TerminalOutput) (ProcOutputResult, error) {
	if since < 0 {
		return ProcOutputResult{}, errdefs.Invalid("offset %d is negative", since)
	}
	opts := agent.AttachOptions{Since: since, Output: agentOutput(out)}
	a, err := s.m.AttachProc(ctx, id, pid, opts)
	if errors.Is(err, errdefs.ErrFailedPrecondition) {
		opts.ReadOnly = true // another client is its writer
		a, err = s.m.AttachProc(ctx, id, pid, opts)
	}
	if err != nil {
		return ProcOutputResult{}, err
	}
	defer a.Close()
	defer context.AfterFunc(ctx, func() { a.Close() })()
	res, err := a.Wait()
	if err != nil {
		if ctx.Err() != nil {
			return ProcOutputResult{}, context.Cause(ctx)
		}
		return ProcOutputResult{}, err
	}
	return ProcOutputResult{Next: res.Next, Missed: res.Missed, Proc: procOf(res.Proc)}, nil
}

// Procs returns the background commands of sandbox id, running and
// recently ended, in the order they started.
func (s *Sandboxes) Procs(ctx context.Context, id string) ([]ProcDetail, error) {
	infos, err := s.m.Procs(ctx, id)
	if err != nil {
		return nil, err
	}
	out := make([]ProcDetail, len(infos))
	for i, info := range infos {
		out[i] = procDetailOf(info)
	}
	return out, nil
}

// ProcInput writes r to the input of background command pid of sandbox
// id (an ErrFailedPrecondition when it takes none or has ended).
func (s *Sandboxes) ProcInput(ctx context.Context, id, pid string, r io.Reader) error {
	return s.m.ProcStdin(ctx, id, pid, r, false)
}

// CloseProcInput ends the input of background command pid of sandbox id:
// its stdin pipe is closed; a terminal is sent its end-of-file character.
func (s *Sandboxes) CloseProcInput(ctx context.Context, id, pid string) error {
	return s.m.ProcStdin(ctx, id, pid, nil, true)
}

// ResizeProc sets the terminal size of background command pid of sandbox
// id (an ErrInvalidArgument when it has no terminal); a zero rows or cols
// is its default, 24 or 80, as at start.
func (s *Sandboxes) ResizeProc(ctx context.Context, id, pid string, rows, cols uint16) error {
	if rows == 0 {
		rows = agent.DefaultRows
	}
	if cols == 0 {
		cols = agent.DefaultCols
	}
	return s.m.ResizeProc(ctx, id, pid, rows, cols)
}
