package manager

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/errdefs"
)

// A persistent terminal is a tty process of the sandbox's agent tagged
// terminalTagPrefix+name: the agent holds it, with the ring of its latest
// output, whoever is attached, so it outlives its connections and the
// daemon; it ends with the sandbox.
const terminalTagPrefix = "terminal."

// terminalName is what a persistent terminal's name may be: the agent's
// tag rule less the prefix.
var terminalName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,54}$`)

// PersistentTerminalRequest is a persistent terminal to start.
type PersistentTerminalRequest struct {
	// Name names it in its sandbox; empty: one is made up.
	Name string
	// Command is the argv; empty runs the login shell.
	Command    []string
	Rows, Cols uint16
	Env        map[string]string
	Cwd        string
}

// TerminalName returns name, checked, or a new name when it is empty.
func TerminalName(name string) (string, error) {
	if name == "" {
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", fmt.Errorf("name a terminal: %w", err)
		}
		return "t-" + hex.EncodeToString(b[:]), nil
	}
	if !terminalName.MatchString(name) {
		return "", errdefs.Invalid("terminal name %q is not 1-55 letters, digits, '.', '_' or '-', first a letter or digit", name)
	}
	return name, nil
}

// CreateTerminal starts a persistent terminal in running sandbox id. A
// terminal of that name that runs is an ErrAlreadyExists; one that has
// ended is replaced.
func (m *Manager) CreateTerminal(ctx context.Context, id string, req PersistentTerminalRequest) (agent.ProcInfo, error) {
	name, err := TerminalName(req.Name)
	if err != nil {
		return agent.ProcInfo{}, err
	}
	preq, err := terminalProcRequest(TerminalRequest{Command: req.Command, TTY: true, Rows: req.Rows, Cols: req.Cols, Env: req.Env, Cwd: req.Cwd})
	if err != nil {
		return agent.ProcInfo{}, err
	}
	preq.Tag = terminalTagPrefix + name
	c, err := m.Agent(ctx, id)
	if err != nil {
		return agent.ProcInfo{}, err
	}
	info, err := c.StartProc(ctx, preq)
	if errors.Is(err, errdefs.ErrAlreadyExists) {
		return agent.ProcInfo{}, errdefs.Conflict("sandbox %s has a running terminal '%s'", id, name)
	}
	if err != nil {
		return agent.ProcInfo{}, fmt.Errorf("start terminal in sandbox %s: %w", id, err)
	}
	return info, nil
}

// TerminalOf returns the name of the persistent terminal info is, or
// false when it is another process.
func TerminalOf(info agent.ProcInfo) (string, bool) {
	name, ok := strings.CutPrefix(info.Tag, terminalTagPrefix)
	return name, ok && info.TTY
}

// Terminals lists the persistent terminals of running sandbox id, running
// and ended, in the order they started.
func (m *Manager) Terminals(ctx context.Context, id string) ([]agent.ProcInfo, error) {
	c, err := m.Agent(ctx, id)
	if err != nil {
		return nil, err
	}
	all, err := c.Procs(ctx)
	if err != nil {
		return nil, fmt.Errorf("list terminals of sandbox %s: %w", id, err)
	}
	var out []agent.ProcInfo
	for _, p := range all {
		if _, ok := TerminalOf(p); ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// Terminal returns persistent terminal name of sandbox id.
func (m *Manager) Terminal(ctx context.Context, id, name string) (agent.ProcInfo, error) {
	c, tag, err := m.terminalAgent(ctx, id, name)
	if err != nil {
		return agent.ProcInfo{}, err
	}
	info, err := c.Proc(ctx, tag)
	return info, terminalErr(err, id, name)
}

// AttachTerminal attaches to persistent terminal name of sandbox id, its
// output from opts.Since on.
func (m *Manager) AttachTerminal(ctx context.Context, id, name string, opts agent.AttachOptions) (*agent.ProcAttachment, error) {
	c, tag, err := m.terminalAgent(ctx, id, name)
	if err != nil {
		return nil, err
	}
	a, err := c.AttachProc(ctx, tag, opts)
	if errors.Is(err, errdefs.ErrFailedPrecondition) {
		return nil, errdefs.Precondition("terminal '%s' of sandbox %s has a writer attached: attach read-only, or take over", name, id)
	}
	return a, terminalErr(err, id, name)
}

// DeleteTerminal ends persistent terminal name of sandbox id, with all it
// started (SIGHUP, then SIGKILL after a grace), forgets it and returns
// how it ended.
func (m *Manager) DeleteTerminal(ctx context.Context, id, name string) (agent.ProcInfo, error) {
	c, tag, err := m.terminalAgent(ctx, id, name)
	if err != nil {
		return agent.ProcInfo{}, err
	}
	info, err := c.KillProc(ctx, tag)
	return info, terminalErr(err, id, name)
}

// terminalAgent checks name and returns sandbox id's agent and the tag
// of the terminal.
func (m *Manager) terminalAgent(ctx context.Context, id, name string) (*agent.Client, string, error) {
	if name == "" || !terminalName.MatchString(name) {
		return nil, "", errdefs.NotFound("sandbox %s has no terminal '%s'", id, name)
	}
	c, err := m.Agent(ctx, id)
	if err != nil {
		return nil, "", err
	}
	return c, terminalTagPrefix + name, nil
}

// terminalErr names the terminal and its sandbox in the agent's
// not-found error.
func terminalErr(err error, id, name string) error {
	if errors.Is(err, errdefs.ErrNotFound) {
		return errdefs.NotFound("sandbox %s has no terminal '%s'", id, name)
	}
	return err
}
