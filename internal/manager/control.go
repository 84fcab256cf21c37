package manager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/quantity"
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
	if err := m.rt.Stop(ctx, id, stopTimeout); err != nil {
		return nil, fmt.Errorf("stop sandbox %s: %w", id, err)
	}
	return m.setStatus(ctx, id, api.StatusSucceeded, "stopped by request")
}

// Start starts a stopped sandbox again with the files it had, running its
// template's startup plan anew; or a dead one whose files were kept for
// its owner (Config.KeepDeadFiles). It returns the sandbox pending; the
// start goes on in the background.
func (m *Manager) Start(ctx context.Context, id string) (*store.Sandbox, error) {
	unlock := m.lock(id)
	defer unlock()
	ctx = context.WithoutCancel(ctx)
	sb, err := m.Get(ctx, id)
	if err != nil {
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
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		ctx, cancel := context.WithTimeout(m.bgCtx, m.cfg.StartTimeout)
		defer cancel()
		m.restart(ctx, id, plan)
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
	return m.setStatus(ctx, sb.ID, api.StatusPending, "start requested")
}

// restart starts the runtime side of a pending, stopped sandbox again.
func (m *Manager) restart(ctx context.Context, id string, plan *startup) {
	unlock := m.lock(id)
	err := m.rt.Start(ctx, id)
	unlock()
	if err != nil {
		_, _ = m.failStartup(ctx, id, fmt.Errorf("start sandbox: %w", err))
		return
	}
	if !plan.empty() {
		sctx, cancel := context.WithCancel(ctx)
		m.starting.Store(id, cancel)
		err = m.runStartup(sctx, id, plan)
		m.starting.Delete(id)
		cancel()
		if err != nil {
			_, _ = m.failStartup(ctx, id, err)
			return
		}
	}
	_, _ = m.markRunning(ctx, id, "started again")
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
