package manager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"strings"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/netguard"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/store"
)

// TemplateResolver finds the spec of a template version (0: the latest)
// and reports which version it is.
type TemplateResolver interface {
	Resolve(ctx context.Context, name string, version int) (api.TemplateSpec, int, error)
}

// Option configures a Manager.
type Option func(*Manager)

// WithTemplates lets sandboxes be created from templates.
func WithTemplates(t TemplateResolver) Option { return func(m *Manager) { m.templates = t } }

// sourceSubject is what refusals of template file sources say they are
// refused to: "... which template file sources may not reach".
const sourceSubject = "template file sources"

// WithFetcher sets what downloads template files' sources. The default
// refuses every internal address (netguard) with no allow-list.
func WithFetcher(f *netguard.Fetcher) Option { return func(m *Manager) { m.fetcher = f } }

// startup is what happens in a sandbox after its agent is up and before it
// counts as running, in this order: files put in place, the startup
// script run, the main process started, the readiness probe passed. All of
// it together is bounded by timeout.
// It is kept (as JSON) in the sandbox's record, so that a stopped sandbox
// starts again the same way.
type startup struct {
	Files   []api.FileSpec `json:"files,omitempty"`
	Script  string         `json:"script,omitempty"`
	Main    []string       `json:"main,omitempty"` // command and args; empty: no main process
	Probe   *api.ProbeSpec `json:"probe,omitempty"`
	Timeout time.Duration  `json:"timeout,omitempty"`
	// Persistent: the sandbox was made with a persistence volume, whose
	// files a stop keeps on runtimes with Capabilities.Persistence.
	Persistent bool `json:"persistent,omitempty"`
	// Network is the egress the sandbox was made with (its template's or
	// its request's), for Network; the runtime enforces it.
	Network *api.NetworkSpec `json:"network,omitempty"`
}

func (s *startup) hasNetwork() bool { return s != nil && s.Network != nil }

// Network returns the egress sandbox sb was made with: what it may reach
// beyond its loopback through the egress proxy; nil when nothing.
// (Sandboxes made before it was recorded report nil.)
func Network(sb *store.Sandbox) *api.NetworkSpec {
	if len(sb.Spec) == 0 {
		return nil
	}
	var plan startup
	if err := json.Unmarshal(sb.Spec, &plan); err != nil {
		return nil
	}
	return plan.Network
}

func (s *startup) empty() bool {
	return s == nil || (len(s.Files) == 0 && s.Script == "" && len(s.Main) == 0 && s.Probe == nil)
}

// fromTemplate completes req from the template it names: the template
// gives image, resources, ttl, env and the startup plan; the request's
// overrides replace cpu, memory, disk and ttl and are merged over env,
// and what is the request's own (its owner, mounts) stays.
func (m *Manager) fromTemplate(ctx context.Context, req CreateRequest) (CreateRequest, error) {
	if m.templates == nil {
		return req, errdefs.WithCode(errdefs.NotFound("template %q not found: this daemon serves no templates", req.Template), api.CodeTemplateNotFound)
	}
	if req.TemplateVersion < 0 {
		return req, errdefs.Invalid("templateVersion %d is negative", req.TemplateVersion)
	}
	spec, version, err := m.templates.Resolve(ctx, req.Template, req.TemplateVersion)
	if err != nil {
		return req, err
	}
	out := CreateRequest{
		Image: spec.Image, CPU: spec.Resources.CPU, Memory: spec.Resources.Memory, TTL: &spec.TTL,
		Disk: req.Disk, Template: req.Template, TemplateVersion: version,
		ManagedBy: req.ManagedBy, Mounts: req.Mounts, pool: req.pool, Metadata: req.Metadata,
		SpareKernel: req.SpareKernel,
	}
	if req.CPU != "" {
		out.CPU = req.CPU
	}
	if req.Memory != "" {
		out.Memory = req.Memory
	}
	if req.TTL != nil {
		out.TTL = req.TTL
	}
	if len(spec.Env)+len(req.Env) > 0 {
		out.Env = maps.Clone(spec.Env)
		if out.Env == nil {
			out.Env = map[string]string{}
		}
		maps.Copy(out.Env, req.Env)
	}
	timeout := time.Duration(spec.StartupTimeout) * time.Second
	if timeout <= 0 {
		timeout = 300 * time.Second
	}
	out.network, out.persistence, out.runtimeClass = spec.Network, spec.Persistence, spec.RuntimeClassName
	out.startup = &startup{
		Files: spec.Files, Script: spec.StartupScript, Probe: spec.ReadinessProbe, Timeout: timeout,
		Main: append(append([]string(nil), spec.Command...), spec.Args...),
	}
	return out, nil
}

// runStartup carries out a sandbox's startup plan. It runs without the
// sandbox's lock, so that a Delete can cancel it through ctx.
func (m *Manager) runStartup(ctx context.Context, id string, s *startup) error {
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	c, err := m.rt.Agent(ctx, id)
	if err != nil {
		return fmt.Errorf("reach agent: %w", err)
	}
	for _, f := range s.Files {
		if err := m.putFile(ctx, c, f); err != nil {
			return timeoutErr(ctx, s.Timeout, err)
		}
	}
	if s.Script != "" {
		m.event(ctx, id, string(api.StatusPending), "running startup script")
		out := &capped{limit: 4 << 10}
		res, err := c.Exec(ctx, agent.ExecRequest{Shell: s.Script}, nil, out, out)
		if err != nil {
			return timeoutErr(ctx, s.Timeout, fmt.Errorf("startup script: %w", err))
		}
		if res.ExitCode != 0 {
			return fmt.Errorf("startup script exited with code %d: %s", res.ExitCode, tail(out.String()))
		}
	}
	if len(s.Main) > 0 {
		res, err := c.Exec(ctx, agent.ExecRequest{Command: s.Main, Main: true}, nil, nil, nil)
		if err != nil {
			return fmt.Errorf("start main process: %w", err)
		}
		if res.Error != "" {
			return fmt.Errorf("start main process %q: %s", s.Main[0], res.Error)
		}
	}
	if s.Probe != nil {
		return timeoutErr(ctx, s.Timeout, m.probe(ctx, id, c, s.Probe))
	}
	return nil
}

// timeoutErr says that the startup timeout ended err, when it did.
func timeoutErr(ctx context.Context, timeout time.Duration, err error) error {
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("startup did not finish within startupTimeout %v: %w", timeout, err)
	}
	return err
}

// probe runs the readiness probe until it passes, or fails failureThreshold
// times in a row.
func (m *Manager) probe(ctx context.Context, id string, c *agent.Client, p *api.ProbeSpec) error {
	period := time.Duration(p.PeriodSeconds) * time.Second
	if period <= 0 {
		period = 10 * time.Second
	}
	threshold := p.FailureThreshold
	if threshold <= 0 {
		threshold = 3
	}
	if err := sleep(ctx, time.Duration(p.InitialDelaySeconds)*time.Second); err != nil {
		return fmt.Errorf("readiness probe: %w", err)
	}
	for failures := 0; ; {
		out := &capped{limit: 1 << 10}
		res, err := c.Exec(ctx, agent.ExecRequest{Command: p.Exec.Command, Timeout: period}, nil, out, out)
		if err != nil {
			return fmt.Errorf("readiness probe: %w", err)
		}
		if res.ExitCode == 0 {
			return nil
		}
		failures++
		m.event(ctx, id, string(api.StatusPending), fmt.Sprintf("readiness probe failed (%d/%d): exit code %d", failures, threshold, res.ExitCode))
		if failures >= threshold {
			return fmt.Errorf("readiness probe failed %d times, last with exit code %d: %s", failures, res.ExitCode, tail(out.String()))
		}
		if err := sleep(ctx, period); err != nil {
			return fmt.Errorf("readiness probe: %w", err)
		}
	}
}

// putFile writes one template file into the sandbox: inline content, or
// the body of an http(s) source URL.
func (m *Manager) putFile(ctx context.Context, c *agent.Client, f api.FileSpec) error {
	dest, err := CleanPath(f.Destination)
	if err != nil {
		return fmt.Errorf("file %s: %w", f.Destination, err)
	}
	var body io.Reader = strings.NewReader(f.Content)
	if f.Source != "" {
		// The source may lead anywhere the daemon can connect, its own
		// API and a cloud metadata service included: the fetcher refuses
		// internal addresses, after DNS and on every redirect.
		rc, err := m.fetcher.Open(ctx, f.Source)
		if err != nil {
			return fmt.Errorf("file %s: fetch %s: %w", dest, f.Source, err)
		}
		defer rc.Close()
		body = rc
	}
	if _, err := c.Upload(ctx, dest, os.FileMode(0o644), body); err != nil {
		return fmt.Errorf("file %s: %w", dest, err)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// tail returns the last line-ish part of command output for a reason.
func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 512 {
		s = "…" + s[len(s)-512:]
	}
	return s
}

// checkMain ends a running template sandbox whose main process has exited:
// succeeded on exit code 0, failed otherwise.
func (m *Manager) checkMain(ctx context.Context, id string) {
	c, err := m.rt.Agent(ctx, id)
	if err != nil {
		return
	}
	info, err := c.Info(ctx)
	if err != nil || info.Main == nil || !info.Main.Exited {
		return
	}
	status, reason := api.StatusSucceeded, "main process exited with code 0"
	if info.Main.ExitCode != 0 {
		status, reason = api.StatusFailed, fmt.Sprintf("main process exited with code %d", info.Main.ExitCode)
		if info.Main.Signal != "" {
			reason += " (" + info.Main.Signal + ")"
		}
	}
	unlock := m.lock(id)
	defer unlock()
	sb, err := m.store.GetSandbox(ctx, id)
	if err != nil || sb.Status != string(api.StatusRunning) {
		return
	}
	if logs, err := m.consoleTail(ctx, id); err == nil && logs != "" {
		m.event(ctx, id, string(status), "console: "+logs)
	}
	// Stopped, not deleted: its files stay, and it can be started again.
	_, err = m.stopAs(ctx, sb, status, reason, func() error { return m.rt.Stop(ctx, id, stopTimeout) })
	if err != nil {
		m.log.Warn("stop finished sandbox", "sandbox", id, "err", err) // the next sweep tries again
	}
}

// consoleTail returns the end of a sandbox's console output, kept in its
// history before the runtime state that holds it goes.
func (m *Manager) consoleTail(ctx context.Context, id string) (string, error) {
	lr, ok := m.rt.(sandbox.LogReader)
	if !ok {
		return "", nil
	}
	b, err := lr.Logs(ctx, id, 2<<10)
	return strings.TrimSpace(string(b)), err
}
