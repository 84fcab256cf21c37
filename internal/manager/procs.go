package manager

import (
	"context"
	"errors"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/errdefs"
)

// ProcRequest is a background process to start in a sandbox: an argv or
// a shell string.
type ProcRequest struct {
	Command []string
	Shell   string
	Env     map[string]string
	Cwd     string
	// Timeout ends the process, keeping it listed; zero means none.
	Timeout time.Duration
}

// procRequest checks req with the rules of exec and turns it into the
// agent's request.
func procRequest(req ProcRequest) (agent.ProcRequest, error) {
	if req.Timeout > MaxExecTimeout {
		return agent.ProcRequest{}, errdefs.Invalid("timeout %s is over the maximum %s", req.Timeout, MaxExecTimeout)
	}
	base := agent.ProcRequest{Command: req.Command, Shell: req.Shell, Timeout: req.Timeout}
	return agentProc("process", base, append([]string{req.Shell}, req.Command...), req.Env, req.Cwd)
}

// agentProc completes base, the agent's request for a process started
// with args (its argv or shell string), with env and cwd, each checked by
// the rules of exec; what names the process in an error.
func agentProc(what string, base agent.ProcRequest, args []string, env map[string]string, cwd string) (agent.ProcRequest, error) {
	for _, a := range args {
		if strings.ContainsRune(a, 0) {
			return agent.ProcRequest{}, errdefs.Invalid("command arguments must not contain NUL")
		}
	}
	if err := ValidEnv(env); err != nil {
		return agent.ProcRequest{}, err
	}
	if cwd != "" {
		p, err := CleanPath(cwd)
		if err != nil {
			return agent.ProcRequest{}, err
		}
		base.Cwd = p
	}
	for k, v := range env {
		base.Env = append(base.Env, k+"="+v)
	}
	sort.Strings(base.Env)
	if err := base.Validate(); err != nil {
		return agent.ProcRequest{}, errdefs.Invalid("%s: %v", what, err)
	}
	return base, nil
}

// StartProc starts req in running sandbox id as a detached process of its
// agent, its stdin /dev/null, and returns it. It runs until it ends, its
// timeout elapses or KillProc.
func (m *Manager) StartProc(ctx context.Context, id string, req ProcRequest) (agent.ProcInfo, error) {
	return m.StartProcIO(ctx, id, req, ProcIO{})
}

// Proc returns process pid of sandbox id.
func (m *Manager) Proc(ctx context.Context, id, pid string) (agent.ProcInfo, error) {
	c, err := m.Agent(ctx, id)
	if err != nil {
		return agent.ProcInfo{}, err
	}
	info, err := c.Proc(ctx, pid)
	return info, procErr(err, id, pid)
}

// ProcOutput copies the output of process pid of sandbox id, from
// opts.Since on, to stdout and stderr (either nil to discard).
func (m *Manager) ProcOutput(ctx context.Context, id, pid string, opts agent.ProcOutputOptions, stdout, stderr io.Writer) (agent.ProcOutputResult, error) {
	c, err := m.Agent(ctx, id)
	if err != nil {
		return agent.ProcOutputResult{}, err
	}
	res, err := c.ProcOutput(ctx, pid, opts, stdout, stderr)
	return res, procErr(err, id, pid)
}

// SignalProc sends sig (a name such as "INT" or a number) to process pid
// of sandbox id.
func (m *Manager) SignalProc(ctx context.Context, id, pid, sig string) error {
	c, err := m.Agent(ctx, id)
	if err != nil {
		return err
	}
	return procErr(c.ProcSignal(ctx, pid, sig), id, pid)
}

// KillProc ends process pid of sandbox id, with all it started, and
// forgets it; it returns how it ended.
func (m *Manager) KillProc(ctx context.Context, id, pid string) (agent.ProcInfo, error) {
	c, err := m.Agent(ctx, id)
	if err != nil {
		return agent.ProcInfo{}, err
	}
	info, err := c.KillProc(ctx, pid)
	return info, procErr(err, id, pid)
}

// procErr names the process and its sandbox in the agent's not-found
// error, which otherwise reads as if the sandbox were missing.
func procErr(err error, id, pid string) error {
	if errors.Is(err, errdefs.ErrNotFound) {
		return errdefs.NotFound("sandbox %s has no process '%s'", id, pid)
	}
	return err
}
