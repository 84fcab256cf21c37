package manager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/quantity"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/store"
)

// stopTimeout is how long a stopping sandbox gets to end gracefully.
const stopTimeout = 10 * time.Second

// notNow is the error for a control operation the sandbox's status forbids.
func notNow(op string, sb *store.Sandbox) error {
	return errdefs.WithCode(errdefs.Precondition("cannot %s sandbox %s: it is %s", op, sb.ID, sb.Status), api.CodeConflict)
}

// Stop ends every process of a running (or paused) sandbox and keeps its
// files; the sandbox is then succeeded ("stopped by request") until
// started again.
func (m *Manager) Stop(ctx context.Context, id string) (*store.Sandbox, error) {
	unlock := m.lock(id)
	defer unlock()
	ctx = context.WithoutCancel(ctx)
	sb, err := m.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if !alive(sb) {
		return nil, notNow("stop", sb)
	}
	return m.stopAs(ctx, sb, api.StatusSucceeded, "stopped by request", func() error {
		if err := m.rt.Stop(ctx, id, stopTimeout); err != nil {
			return fmt.Errorf("stop sandbox %s: %w", id, err)
		}
		return nil
	})
}

// stopAs ends running or paused sandbox sb with stop (the runtime's Stop,
// or a checkpoint that stops it) and records it as status with reason,
// keeping its files. The record is written first: a write that fails (the
// store's disk is full) leaves the sandbox as it was, rather than a
// stopped sandbox under a running record, which the sweep would take for
// one that died and delete. Should stop fail while the sandbox still
// runs, its record is set back as it was; one that stopped all the same
// stays stopped. stop's error is returned as it is. The caller holds the
// sandbox's lock and read sb under it.
func (m *Manager) stopAs(ctx context.Context, sb *store.Sandbox, status api.SandboxStatus, reason string, stop func() error) (*store.Sandbox, error) {
	stopped, err := m.setStatus(ctx, sb.ID, status, reason)
	if err != nil {
		return nil, err
	}
	if err := stop(); err != nil {
		if st, serr := m.rt.Status(ctx, sb.ID); serr == nil && (st.State == sandbox.StateRunning || st.State == sandbox.StatePaused) {
			if _, rerr := m.setStatus(ctx, sb.ID, api.SandboxStatus(sb.Status), sb.Reason); rerr != nil {
				err = errors.Join(err, rerr)
			}
		}
		return nil, err
	}
	return stopped, nil
}

// Start starts a stopped sandbox again with the files it had, running its
// template's startup plan anew; or a dead one whose files were kept for
// its owner (Config.KeepDeadFiles). It returns the sandbox pending; the
// start goes on in the background.
func (m *Manager) Start(ctx context.Context, id string) (sb *store.Sandbox, err error) {
	// Its making is claimed before the record is pending, and before
	// its lock, as a create claims it (reclaim).
	made, err := m.claimMaking(ctx, id)
	if err != nil {
		return nil, err
	}
	started := false
	defer func() {
		if !started {
			made()
		}
	}()
	unlock := m.lock(id)
	defer unlock()
	ctx = context.WithoutCancel(ctx)
	if sb, err = m.Get(ctx, id); err != nil {
		return nil, err
	}
	if sb.Status != string(api.StatusSucceeded) && (sb.Status != string(api.StatusFailed) || !m.keepsFiles(sb)) {
		return nil, notNow("start", sb)
	}
	var plan *startup
	if len(sb.Spec) > 0 {
		plan = new(startup)
		if err := json.Unmarshal(sb.Spec, plan); err != nil {
			return nil, fmt.Errorf("read startup plan of sandbox %s: %w", id, err)
		}
	}
	if !m.rt.Capabilities().KeepsFiles(plan != nil && plan.Persistent) {
		return nil, errdefs.WithCode(errdefs.Precondition("cannot start sandbox %s: runtime %s does not keep files across a stop (unless its template sets persistence); create a new one", id, m.rt.Name()), api.CodeConflict)
	}
	if _, err := m.rt.Status(ctx, id); errors.Is(err, errdefs.ErrNotFound) {
		return nil, errdefs.WithCode(errdefs.Precondition("cannot start sandbox %s: its files are gone; create a new one", id), api.CodeConflict)
	}
	if sb, err = m.admitStart(ctx, sb); err != nil {
		return nil, err
	}
	started = true
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		ctx, cancel := context.WithTimeout(m.bgCtx, m.cfg.StartTimeout)
		defer cancel()
		m.restart(ctx, id, plan, made)
	}()
	return sb, nil
}

// admitStart marks a stopped sandbox pending, so that its limits count
// again, once admit finds room for them.
func (m *Manager) admitStart(ctx context.Context, sb *store.Sandbox) (*store.Sandbox, error) {
	cpu, _ := quantity.ParseCPU(sb.CPU) // records were parsed when made
	mem, _ := quantity.ParseBytes(sb.Memory)
	arrived := m.usageReads.Load()
	m.admitMu.Lock()
	defer m.admitMu.Unlock()
	if err := m.admit(ctx, arrived, cpu, mem, false); err != nil {
		return nil, fmt.Errorf("start sandbox %s: %w", sb.ID, err)
	}
	return m.setStatus(ctx, sb.ID, api.StatusPending, reasonStartRequested)
}

// reasonStartRequested is the reason of a stopped sandbox pending to be
// started again, which Recover tells from a sandbox being created.
const reasonStartRequested = "start requested"

// restart starts the runtime side of a pending, stopped sandbox again,
// and releases its making (made) under the sandbox's lock as it records
// how that went: whoever sees the sandbox running or stopped again may
// start it again at once. (Released after the record, a Start right after
// it found the making claimed still, "being made or started by another
// request".)
func (m *Manager) restart(ctx context.Context, id string, plan *startup, made func()) {
	made = sync.OnceFunc(made)
	defer made()
	unlock := m.lock(id)
	err := m.rt.Start(ctx, id)
	unlock()
	if err != nil {
		m.failRestart(ctx, id, fmt.Errorf("start sandbox: %w", err), made)
		return
	}
	if !plan.empty() {
		sctx, cancel := context.WithCancel(ctx)
		m.starting.Store(id, cancel)
		err = m.runStartup(sctx, id, plan)
		m.starting.Delete(id)
		cancel()
		if err != nil {
			m.failRestart(ctx, id, err, made)
			return
		}
	}
	_, _ = m.markRunning(ctx, id, "started again", made)
}

// failRestart stops a sandbox whose start again failed with cause and
// records it stopped (succeeded) with the cause, unless it was deleted
// meanwhile. Its files are kept, to be started again or deleted: a start
// that fails never takes what the sandbox had (failStartup, for a sandbox
// being created, releases everything). It releases the sandbox's making
// (made) once it holds its lock.
func (m *Manager) failRestart(ctx context.Context, id string, cause error, made func()) {
	unlock := m.lock(id)
	defer unlock()
	made()
	ctx = context.WithoutCancel(ctx)
	if sb, err := m.store.GetSandbox(ctx, id); err != nil || sb.Status != string(api.StatusPending) {
		return
	}
	if logs, err := m.consoleTail(ctx, id); err == nil && logs != "" {
		m.event(ctx, id, string(api.StatusPending), "console: "+logs)
	}
	if err := m.rt.Stop(ctx, id, stopTimeout); err != nil {
		m.log.Warn("stop sandbox after failed start", "sandbox", id, "err", err)
	}
	// Should this write fail, the sweep settles the pending record once
	// its making is released (reclaim).
	if _, err := m.setStatus(ctx, id, api.StatusSucceeded, "start failed: "+cause.Error()); err != nil {
		m.log.Warn("record failed start", "sandbox", id, "err", err)
	}
}

// Restart stops a running sandbox (if it runs) and starts it again.
func (m *Manager) Restart(ctx context.Context, id string) (*store.Sandbox, error) {
	sb, err := m.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	switch sb.Status {
	case string(api.StatusRunning), string(api.StatusPaused):
		if _, err := m.Stop(ctx, id); err != nil {
			return nil, err
		}
	case string(api.StatusSucceeded):
	default:
		return nil, notNow("restart", sb)
	}
	return m.Start(ctx, id)
}
