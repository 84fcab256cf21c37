package service

import (
	"context"
	"errors"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/manager"
)

// TerminalOutput receives a terminal's output as it comes: p, of stream
// api.TerminalStreamStdout or api.TerminalStreamStderr (a tty's is all
// stdout), starts at offset at of the process's output. It is called
// from one goroutine, in order, and must not keep p; while it blocks, the
// output waits (and the agent, past its ring, skips what it overwrote:
// the next call's at says where the output resumes). An error ends the
// terminal's stream.
type TerminalOutput func(stream byte, at int64, p []byte) error

// Terminal is a connection to an interactive process: a one-shot
// session (Sandboxes.Terminal), whose process ends with it, or an
// attachment to a persistent terminal (Sandboxes.AttachTerminal), which
// outlives it. Its output goes to the TerminalOutput it was made with;
// Write is its input. Write, CloseWrite and Resize may be called from
// different goroutines.
type Terminal struct {
	a *agent.ProcAttachment
	// end is Close's: the process's end, or the attachment's.
	end func() error
}

// Terminal starts req in running sandbox id (an ErrFailedPrecondition,
// 409, otherwise) and attaches to it; out receives its output. The
// process ends when the terminal is closed: call Close.
func (s *Sandboxes) Terminal(ctx context.Context, id string, req api.TerminalRequest, out TerminalOutput) (*Terminal, error) {
	t, err := s.m.StartTerminal(ctx, id, terminalRequest(req), agentOutput(out))
	if err != nil {
		return nil, err
	}
	return &Terminal{a: t.ProcAttachment, end: t.Close}, nil
}

// ValidateTerminal checks req as Terminal does, so that a caller can
// refuse a bad request before it commits to a response (an upgrade).
func (s *Sandboxes) ValidateTerminal(req api.TerminalRequest) error {
	return s.m.ValidateTerminal(terminalRequest(req))
}

func terminalRequest(req api.TerminalRequest) manager.TerminalRequest {
	return manager.TerminalRequest{Command: req.Command, TTY: req.TTY, Rows: req.Rows, Cols: req.Cols, Env: req.Env, Cwd: req.Cwd}
}

// agentOutput is out as the agent's client calls it.
func agentOutput(out TerminalOutput) agent.OutputFunc {
	return func(stream byte, at int64, p []byte) error {
		s := api.TerminalStreamStdout
		if stream == agent.StreamStderr {
			s = api.TerminalStreamStderr
		}
		return out(s, at, p)
	}
}

// Write sends p to the process's input.
func (t *Terminal) Write(p []byte) (int, error) { return t.a.Write(p) }

// CloseWrite ends the process's input (a tty gets its end-of-file
// character).
func (t *Terminal) CloseWrite() error { return t.a.CloseWrite() }

// Resize sets the size of the process's tty.
func (t *Terminal) Resize(rows, cols uint16) error { return t.a.Resize(rows, cols) }

// Wait waits until the output has gone to the TerminalOutput to its end
// and returns how the process ended. An attachment whose place as writer
// another took over ends with an error of code api.CodeTerminalTakenOver.
func (t *Terminal) Wait() (api.TerminalExit, error) {
	res, err := t.a.Wait()
	if errors.Is(err, agent.ErrTakenOver) {
		return api.TerminalExit{}, errdefs.WithCode(errdefs.Precondition("another client took over this terminal"), api.CodeTerminalTakenOver)
	}
	if err != nil {
		return api.TerminalExit{}, err
	}
	return api.TerminalExit{ExitCode: res.Proc.ExitCode, Signal: res.Proc.Signal, Reason: res.Proc.Reason}, nil
}

// Close ends the connection: a one-shot session's process with all it
// started; a persistent terminal goes on.
func (t *Terminal) Close() error { return t.end() }

// AttachTerminalOptions choose how AttachTerminal attaches.
type AttachTerminalOptions struct {
	// Since is the offset in the terminal's output to replay from: 0 for
	// all that is kept, the offset after the last byte a client received
	// to go on where it left.
	Since int64
	// ReadOnly attaches as a viewer: output only. Otherwise the
	// attachment is the terminal's one writer, which is an
	// ErrFailedPrecondition (409) while another is attached, unless
	// Takeover, which ends the other's attachment.
	ReadOnly, Takeover bool
}

// CreateTerminal starts a persistent terminal in running sandbox id: a
// tty process its agent holds, attached or not, until it exits,
// DeleteTerminal or the sandbox's end. A running terminal of the same
// name is an ErrAlreadyExists; an ended one is replaced.
func (s *Sandboxes) CreateTerminal(ctx context.Context, id string, req api.CreateTerminalRequest) (api.TerminalInfo, error) {
	info, err := s.m.CreateTerminal(ctx, id, manager.PersistentTerminalRequest{
		Name: req.Name, Command: req.Command, Rows: req.Rows, Cols: req.Cols, Env: req.Env, Cwd: req.Cwd,
	})
	if err != nil {
		return api.TerminalInfo{}, err
	}
	return terminalInfo(info), nil
}

// Terminals lists the persistent terminals of running sandbox id,
// running and ended, oldest first.
func (s *Sandboxes) Terminals(ctx context.Context, id string) (api.TerminalList, error) {
	all, err := s.m.Terminals(ctx, id)
	if err != nil {
		return api.TerminalList{}, err
	}
	out := api.TerminalList{Items: make([]api.TerminalInfo, 0, len(all))}
	for _, info := range all {
		out.Items = append(out.Items, terminalInfo(info))
	}
	return out, nil
}

// TerminalInfo returns persistent terminal name of sandbox id
// (ErrNotFound when it has none of that name).
func (s *Sandboxes) TerminalInfo(ctx context.Context, id, name string) (api.TerminalInfo, error) {
	info, err := s.m.Terminal(ctx, id, name)
	if err != nil {
		return api.TerminalInfo{}, err
	}
	return terminalInfo(info), nil
}

// DeleteTerminal ends persistent terminal name of sandbox id with all it
// started, forgets it and returns how it ended.
func (s *Sandboxes) DeleteTerminal(ctx context.Context, id, name string) (api.TerminalInfo, error) {
	info, err := s.m.DeleteTerminal(ctx, id, name)
	if err != nil {
		return api.TerminalInfo{}, err
	}
	return terminalInfo(info), nil
}

// CheckTerminalAttach checks the options of an attachment as
// AttachTerminal does, so that a caller can refuse them before it commits
// to a response.
func CheckTerminalAttach(opts AttachTerminalOptions) error {
	if opts.Since < 0 {
		return errdefs.Invalid("since %d is negative", opts.Since)
	}
	if opts.ReadOnly && opts.Takeover {
		return errdefs.Invalid("a read-only attachment takes nothing over")
	}
	return nil
}

// AttachTerminal attaches to persistent terminal name of sandbox id: out
// receives its output from opts.Since on (what is no longer kept is
// skipped: out's at says so), then Wait says how it ended, if it has. The
// terminal goes on when the attachment is closed.
func (s *Sandboxes) AttachTerminal(ctx context.Context, id, name string, opts AttachTerminalOptions, out TerminalOutput) (*Terminal, error) {
	if err := CheckTerminalAttach(opts); err != nil {
		return nil, err
	}
	a, err := s.m.AttachTerminal(ctx, id, name, agent.AttachOptions{
		Since: opts.Since, ReadOnly: opts.ReadOnly, Takeover: opts.Takeover, Output: agentOutput(out),
	})
	if err != nil {
		return nil, err
	}
	return &Terminal{a: a, end: a.Close}, nil
}

// terminalsTimeout bounds the listing of a sandbox's terminals in its
// info, so that an agent slow to answer does not hold the info back.
const terminalsTimeout = 2 * time.Second

// Describe returns sandbox id as Get does, with its persistent terminals
// when it runs: the REST API's view of one sandbox.
func (s *Sandboxes) Describe(ctx context.Context, id string) (*api.Sandbox, error) {
	sb, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.withTerminals(ctx, sb), nil
}

// withTerminals adds the persistent terminals of running sandbox sb to
// its view; an agent that does not answer in time leaves them out.
func (s *Sandboxes) withTerminals(ctx context.Context, sb *api.Sandbox) *api.Sandbox {
	if sb.Status != api.StatusRunning {
		return sb
	}
	ctx, cancel := context.WithTimeout(ctx, terminalsTimeout)
	defer cancel()
	all, err := s.m.Terminals(ctx, sb.ID)
	if err != nil {
		return sb
	}
	for _, info := range all {
		sb.Terminals = append(sb.Terminals, terminalInfo(info))
	}
	return sb
}

func terminalInfo(info agent.ProcInfo) api.TerminalInfo {
	name, _ := manager.TerminalOf(info)
	out := api.TerminalInfo{
		Name: name, Command: info.Command, Rows: info.Rows, Cols: info.Cols, Running: info.Running,
		StartedAt: info.Started.UTC(), OutputStart: info.OutputStart, Output: info.Output, Writer: info.Writer,
	}
	if !info.Running {
		ended := info.Ended.UTC()
		out.EndedAt = &ended
		out.Exit = &api.TerminalExit{ExitCode: info.ExitCode, Signal: info.Signal, Reason: info.Reason}
	}
	return out
}
