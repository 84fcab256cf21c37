package manager

import (
	"context"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/outbuf"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// Exec limits.
const (
	DefaultExecTimeout = 30 * time.Second
	MaxExecTimeout     = 24 * time.Hour
)

// ExecRequest is a command to run in a sandbox.
type ExecRequest struct {
	Command []string
	Timeout time.Duration // 0: DefaultExecTimeout
	Env     map[string]string
	Cwd     string
	Stdin   io.Reader // nil: no input
	// Accepted, when set, is called once the sandbox has accepted the
	// command (its working directory checked), before any of its output:
	// an error before that is the request's refusal, and nothing ran.
	Accepted func()
}

// ExecResult is a finished command with its captured output.
type ExecResult struct {
	agent.ExecResult
	Stdout, Stderr string
	// Truncated is set when output was dropped: past the configured limit
	// per stream, or because the output budget was in use.
	Truncated bool

	bufs [2]*outbuf.Buffer
}

// Release gives the memory of the result's output back to the manager's
// output budget. Call it once Stdout and Stderr are written out (they stay
// valid, uncounted); until then they count against every other buffered
// execution. Release may be called more than once.
func (r *ExecResult) Release() {
	for _, b := range r.bufs {
		if b != nil {
			b.Release()
		}
	}
}

func (m *Manager) agentRequest(req ExecRequest) (agent.ExecRequest, error) {
	if len(req.Command) == 0 || req.Command[0] == "" {
		return agent.ExecRequest{}, errdefs.Invalid("command must be a non-empty argv array")
	}
	for _, a := range req.Command {
		if strings.ContainsRune(a, 0) {
			return agent.ExecRequest{}, errdefs.Invalid("command arguments must not contain NUL")
		}
	}
	if req.Timeout < 0 || req.Timeout > MaxExecTimeout {
		return agent.ExecRequest{}, errdefs.Invalid("timeout must be between 0 and %v", MaxExecTimeout)
	}
	if req.Timeout == 0 {
		req.Timeout = DefaultExecTimeout
	}
	if err := ValidEnv(req.Env); err != nil {
		return agent.ExecRequest{}, err
	}
	cwd := ""
	if req.Cwd != "" {
		p, err := CleanPath(req.Cwd)
		if err != nil {
			return agent.ExecRequest{}, err
		}
		cwd = p
	}
	env := make([]string, 0, len(req.Env))
	for k, v := range req.Env {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return agent.ExecRequest{Command: req.Command, Env: env, Cwd: cwd, Stdin: req.Stdin != nil, Timeout: req.Timeout}, nil
}

// ValidateExec checks req as ExecStream does, without running anything, so
// that a caller can refuse bad input before it commits to a response.
func (m *Manager) ValidateExec(req ExecRequest) error {
	_, err := m.agentRequest(req)
	return err
}

// ExecStream runs a command, writing its output to stdout and stderr as it
// is produced.
func (m *Manager) ExecStream(ctx context.Context, id string, req ExecRequest, stdout, stderr io.Writer) (res agent.ExecResult, err error) {
	areq, err := m.agentRequest(req)
	if err != nil {
		return agent.ExecResult{}, err
	}
	defer func(start time.Time) { m.metrics.ObserveExec(execLabel(res, err), time.Since(start)) }(time.Now())
	c, err := m.Agent(ctx, id)
	if err != nil {
		return agent.ExecResult{}, err
	}
	res, err = c.ExecAccepted(ctx, areq, req.Accepted, req.Stdin, stdout, stderr)
	if err != nil {
		return agent.ExecResult{}, fmt.Errorf("exec in sandbox %s: %w", id, err)
	}
	return res, nil
}

// Exec runs a command and returns its output, keeping at most the
// configured limit of each stream, within the output budget shared by all
// buffered executions (as sandbox id's share of it, see package outbuf).
// The caller must Release the result.
func (m *Manager) Exec(ctx context.Context, id string, req ExecRequest) (*ExecResult, error) {
	stdout := m.outputs.NewBuffer(id, int64(m.cfg.ExecOutputLimit))
	stderr := m.outputs.NewBuffer(id, int64(m.cfg.ExecOutputLimit))
	res, err := m.ExecStream(ctx, id, req, stdout, stderr)
	if err != nil {
		stdout.Release()
		stderr.Release()
		return nil, err
	}
	return &ExecResult{ExecResult: res, Stdout: stdout.String(), Stderr: stderr.String(),
		Truncated: stdout.Dropped() > 0 || stderr.Dropped() > 0, bufs: [2]*outbuf.Buffer{stdout, stderr}}, nil
}

// capped keeps the first limit bytes written to it and counts the rest:
// the small tails of startup output that errors quote.
type capped struct {
	strings.Builder
	limit   int
	dropped int64
}

func (c *capped) Write(p []byte) (int, error) {
	room := c.limit - c.Len()
	if room < len(p) {
		c.dropped += int64(len(p) - max(room, 0))
		if room > 0 {
			c.Builder.Write(p[:room])
		}
		return len(p), nil
	}
	return c.Builder.Write(p)
}

// OutputBudget returns the budget of the output that buffered executions
// hold, for other services of the daemon to share.
func (m *Manager) OutputBudget() *outbuf.Budget { return m.outputs }

// maxPath is the longest path a sandbox's file system takes (Linux's
// PATH_MAX, its NUL left out).
const maxPath = 4095

// CleanPath checks a path given by a client for a file in a sandbox:
// relative paths are taken from the working directory, and no path may
// step out of where it points with "..", nor be longer than maxPath.
func CleanPath(p string) (string, error) {
	if p == "" {
		return "", errdefs.Invalid("path is required")
	}
	if len(p) > maxPath {
		return "", errdefs.Invalid("path is %d bytes long; at most %d", len(p), maxPath)
	}
	if strings.ContainsRune(p, 0) {
		return "", errdefs.Invalid("path contains NUL")
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "", errdefs.Invalid("path %q must not contain '..'", p)
		}
	}
	if !path.IsAbs(p) {
		p = path.Join(sandbox.WorkDir, p)
	}
	return path.Clean(p), nil
}
