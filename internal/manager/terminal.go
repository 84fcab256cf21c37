package manager

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/errdefs"
)

// TerminalRequest is an interactive process to start in a sandbox.
type TerminalRequest struct {
	// Command is the argv; empty runs the login shell, which needs TTY.
	Command []string
	// TTY runs it on a pseudo-terminal of Rows x Cols (the agent's
	// default size when zero).
	TTY        bool
	Rows, Cols uint16
	Env        map[string]string
	Cwd        string
}

// Terminal is a process started for one client and attached to it: its
// output goes to the OutputFunc it was started with, Write is its input.
// Close ends the process.
type Terminal struct {
	*agent.ProcAttachment
	c  *agent.Client
	id string
}

// terminalKillTimeout bounds the kill of a terminal's process at Close.
const terminalKillTimeout = 10 * time.Second

// Close ends the attachment and the process with all it started.
func (t *Terminal) Close() error {
	err := t.ProcAttachment.Close()
	ctx, cancel := context.WithTimeout(context.Background(), terminalKillTimeout)
	defer cancel()
	if _, kerr := t.c.KillProc(ctx, t.id); kerr != nil && !errors.Is(kerr, errdefs.ErrNotFound) {
		return fmt.Errorf("end terminal process %s: %w", t.id, kerr)
	}
	return err
}

// terminalProcRequest checks req with the rules of exec and turns it into the
// agent's request.
func terminalProcRequest(req TerminalRequest) (agent.ProcRequest, error) {
	// The output waits for the client typing into the terminal: one that
	// reads slowly holds the process back and misses nothing.
	base := agent.ProcRequest{Command: req.Command, TTY: req.TTY, Rows: req.Rows, Cols: req.Cols, Stdin: !req.TTY, FlowControl: true}
	return agentProc("terminal", base, req.Command, req.Env, req.Cwd)
}

// ValidateTerminal checks req as StartTerminal does, without starting
// anything.
func (m *Manager) ValidateTerminal(req TerminalRequest) error {
	_, err := terminalProcRequest(req)
	return err
}

// StartTerminal starts req's process in running sandbox id as a detached
// process of its agent and attaches to it as its one writer; its output
// goes to out. The caller must Close the terminal, which ends the
// process.
func (m *Manager) StartTerminal(ctx context.Context, id string, req TerminalRequest, out agent.OutputFunc) (*Terminal, error) {
	preq, err := terminalProcRequest(req)
	if err != nil {
		return nil, err
	}
	preq.AwaitWriter = true // it attaches next: nothing before is lost
	// Its end goes with the attachment's, in the agent too: should Close
	// not reach the agent (paused, or the daemon gone), it ends all the
	// same.
	preq.EndWithWriter = true
	c, err := m.Agent(ctx, id)
	if err != nil {
		return nil, err
	}
	info, err := c.StartProc(ctx, preq)
	if err != nil {
		return nil, fmt.Errorf("start terminal in sandbox %s: %w", id, err)
	}
	a, err := c.AttachProc(ctx, info.ID, agent.AttachOptions{Output: out})
	if err != nil {
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), terminalKillTimeout)
		defer cancel()
		c.KillProc(kctx, info.ID)
		return nil, fmt.Errorf("attach terminal in sandbox %s: %w", id, err)
	}
	return &Terminal{ProcAttachment: a, c: c, id: info.ID}, nil
}
