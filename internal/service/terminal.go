package service

import (
	"context"
	"io"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/manager"
)

// Terminal is an interactive process started for one client (a one-shot
// session): Read is its output, Write its input. Read, Write, CloseWrite
// and Resize may be called from different goroutines. Output not read
// holds the process back once the agent's ring is full: nothing is
// buffered without bound between them.
type Terminal struct {
	t *manager.Terminal
}

// Terminal starts req in running sandbox id (an ErrFailedPrecondition,
// 409, otherwise) and attaches to it. stderr, when not nil, receives the
// stderr of a process without tty; otherwise Read returns it with stdout.
// The process ends when the terminal is closed: call Close.
func (s *Sandboxes) Terminal(ctx context.Context, id string, req api.TerminalRequest, stderr io.Writer) (*Terminal, error) {
	t, err := s.m.StartTerminal(ctx, id, terminalRequest(req), stderr)
	if err != nil {
		return nil, err
	}
	return &Terminal{t: t}, nil
}

// ValidateTerminal checks req as Terminal does, so that a caller can
// refuse a bad request before it commits to a response (an upgrade).
func (s *Sandboxes) ValidateTerminal(req api.TerminalRequest) error {
	return s.m.ValidateTerminal(terminalRequest(req))
}

func terminalRequest(req api.TerminalRequest) manager.TerminalRequest {
	return manager.TerminalRequest{Command: req.Command, TTY: req.TTY, Rows: req.Rows, Cols: req.Cols, Env: req.Env, Cwd: req.Cwd}
}

// Read reads the process's output; io.EOF once it has ended and all its
// output is read.
func (t *Terminal) Read(p []byte) (int, error) { return t.t.Read(p) }

// Write sends p to the process's input.
func (t *Terminal) Write(p []byte) (int, error) { return t.t.Write(p) }

// CloseWrite ends the process's input (a tty gets its end-of-file
// character).
func (t *Terminal) CloseWrite() error { return t.t.CloseWrite() }

// Resize sets the size of the process's tty.
func (t *Terminal) Resize(rows, cols uint16) error { return t.t.Resize(rows, cols) }

// Wait waits until the output is read to its end and returns how the
// process ended.
func (t *Terminal) Wait() (api.TerminalExit, error) {
	res, err := t.t.Wait()
	if err != nil {
		return api.TerminalExit{}, err
	}
	return api.TerminalExit{ExitCode: res.Proc.ExitCode, Signal: res.Proc.Signal, Reason: res.Proc.Reason}, nil
}

// Close ends the attachment and the process, with all it started.
func (t *Terminal) Close() error { return t.t.Close() }
