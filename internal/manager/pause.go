package manager

import (
	"context"
	"errors"
	"fmt"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/store"
)

// Pause freezes every process of running sandbox id where it is, in
// memory (the runtime's sandbox.Pauser): the sandbox uses no CPU until
// Resume, and keeps its memory, files and processes. A paused sandbox
// still counts against the capacity and its TTL runs on; its agent is out
// of reach (exec, files, contexts and ports are refused with 409
// SANDBOX_NOT_READY) until it is resumed, and it can be stopped or
// deleted as it is. A runtime that cannot pause is 501 NOT_IMPLEMENTED.
func (m *Manager) Pause(ctx context.Context, id string) (*store.Sandbox, error) {
	return m.freeze(ctx, id, pauseOp)
}

// Resume lets the processes of paused sandbox id run again, where they
// were.
func (m *Manager) Resume(ctx context.Context, id string) (*store.Sandbox, error) {
	return m.freeze(ctx, id, resumeOp)
}

// freezeOp is a pause or a resume: the status it goes from and to, and
// the runtime's call and the call that undoes it.
type freezeOp struct {
	name       string
	from, to   api.SandboxStatus
	reason     string
	call, undo func(p sandbox.Pauser, ctx context.Context, id string) error
}

var (
	pauseOp  = freezeOp{"pause", api.StatusRunning, api.StatusPaused, "paused by request", sandbox.Pauser.Pause, sandbox.Pauser.Resume}
	resumeOp = freezeOp{"resume", api.StatusPaused, api.StatusRunning, "resumed by request", sandbox.Pauser.Resume, sandbox.Pauser.Pause}
)

// freeze does op on sandbox id: the runtime first, then the record, so
// that a crash between them leaves a record that Recover settles. A record
// that cannot be written (the store's disk is full) has the runtime's
// call undone: a failed request leaves the sandbox as it was.
func (m *Manager) freeze(ctx context.Context, id string, op freezeOp) (*store.Sandbox, error) {
	unlock := m.lock(id)
	defer unlock()
	ctx = context.WithoutCancel(ctx)
	sb, err := m.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	p, err := m.pauser(sb)
	if err != nil {
		return nil, err
	}
	if sb.Status != string(op.from) {
		return nil, notNow(op.name, sb)
	}
	if err := op.call(p, ctx, id); err != nil {
		return nil, fmt.Errorf("%s sandbox %s: %w", op.name, id, err)
	}
	sb, err = m.setStatus(ctx, id, op.to, op.reason)
	if err != nil {
		if uerr := op.undo(p, ctx, id); uerr != nil {
			err = errors.Join(err, fmt.Errorf("undo %s of sandbox %s: %w", op.name, id, uerr))
		}
		return nil, err
	}
	return sb, nil
}

// pauser returns the runtime as a sandbox.Pauser, or a 501 naming why it
// cannot pause sandbox sb.
func (m *Manager) pauser(sb *store.Sandbox) (sandbox.Pauser, error) {
	caps := m.rt.Capabilities()
	if p, ok := m.rt.(sandbox.Pauser); ok && caps.Pause {
		return p, nil
	}
	why := "this host mounts no cgroup freezer"
	if !caps.LocalFiles {
		// A Pod's cgroup is on its node, which the API does not freeze.
		why = "its sandboxes run on other machines (a cluster's nodes), whose cgroup freezers the daemon does not reach"
	}
	err := fmt.Errorf("cannot pause or resume sandbox %s: runtime %s cannot pause sandboxes: %s: %w", sb.ID, m.rt.Name(), why, errdefs.ErrNotImplemented)
	return nil, errdefs.WithCode(err, api.CodeNotImplemented)
}
