package manager

import (
	"context"
	"errors"
	"fmt"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/quantity"
	"github.com/agent2env/agent2env/internal/store"
)

// Sandboxes made by sandboxes. Code in a sandbox reaches the daemon's own
// services (its MCP server makes sessions and contexts), and what it makes
// there would otherwise be bounded only by the host: a 1-CPU sandbox could
// commit the whole machine in sessions. So every sandbox made on behalf of
// another (auth.OwnerOf the request) is owned by it: counted against the
// owner's OwnedLimits at admission, never taken from a warm pool (a claim
// is not admitted), and deleted with the owner (remove), or by the sweep
// when its owner is gone.

// OwnedLimits bound the sandboxes one sandbox owns at once.
type OwnedLimits struct {
	// MaxSandboxes bounds how many (default 4; negative: none at all).
	MaxSandboxes int
	// CPU and Memory bound the sum of their limits (Kubernetes
	// quantities); empty: the owner's own limits, but never less than
	// one CPU and 1Gi, what one small session needs.
	CPU, Memory string
}

// minOwnedMilliCPU and minOwnedBytes are the least budget of an owner:
// a small session (package session's smallest flavor).
const (
	minOwnedMilliCPU = 1000
	minOwnedBytes    = 1 << 30
)

func (l *OwnedLimits) setDefaults() {
	if l.MaxSandboxes == 0 {
		l.MaxSandboxes = 4
	}
}

// ownedLimitError is admitOwned's refusal: the error it wraps says it all.
type ownedLimitError struct{ error }

func (e ownedLimitError) Unwrap() error { return e.error }

// IsOwnedLimit reports whether err is the refusal of a sandbox past its
// owner's limits, whose usage and suggestion speak of that owner.
func IsOwnedLimit(err error) bool {
	var o ownedLimitError
	return errors.As(err, &o)
}

// suggestOwned is what to do about a refusal past an owner's limits.
const suggestOwned = "stop sessions and contexts this sandbox no longer needs (stop_session, stop_context), or use flavor small; " +
	"the operator may raise --owned-sandboxes, --owned-cpu and --owned-memory"

// owner returns the record of the sandbox ctx's request is made for, nil
// for an API client's request. An owner that is gone, or going, makes
// nothing more.
func (m *Manager) owner(ctx context.Context) (*store.Sandbox, error) {
	id := auth.OwnerOf(ctx)
	if id == "" {
		return nil, nil
	}
	sb, err := m.store.GetSandbox(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("the sandbox that asks: %w", sandboxErr(err))
	}
	if sb.Status == string(api.StatusTerminating) {
		return nil, errdefs.WithCode(errdefs.Precondition("sandbox %s, which asks, is being deleted", id), api.CodeSandboxNotReady)
	}
	return sb, nil
}

// admitOwned refuses a sandbox of milliCPU and memBytes that would take
// owner past its limits: 429 RESOURCE_LIMIT with the owner's usage
// (Sandboxes and MaxSandboxes its count and limit, the capacities its
// budget). The caller holds admitMu.
func (m *Manager) admitOwned(ctx context.Context, owner *store.Sandbox, milliCPU, memBytes int64) error {
	owned, _, err := m.store.ListSandboxPage(ctx, store.SandboxFilter{Owner: owner.ID}, store.Page{})
	if err != nil {
		return fmt.Errorf("count the sandboxes %s owns: %w", owner.ID, err)
	}
	u := api.Usage{MaxSandboxes: max(m.cfg.Owned.MaxSandboxes, 0)}
	u.MilliCPUCapacity, u.MemoryBytesCapacity = m.ownedBudget(owner)
	for _, sb := range owned {
		if sb.Status != string(api.StatusFailed) { // a failed one holds nothing, and the reaper takes it
			u.Sandboxes++
		}
		if committing(sb.Status) {
			cpu, _ := quantity.ParseCPU(sb.CPU) // records were parsed when made
			mem, _ := quantity.ParseBytes(sb.Memory)
			u.MilliCPU += cpu
			u.MemoryBytes += mem
		}
	}
	var why string
	switch {
	case u.Sandboxes >= u.MaxSandboxes:
		why = fmt.Sprintf("it owns %d sandboxes, its limit", u.Sandboxes)
	case u.MilliCPU+milliCPU > u.MilliCPUCapacity || u.MemoryBytes+memBytes > u.MemoryBytesCapacity:
		why = fmt.Sprintf("this one needs %s cpu and %s of memory, and its sandboxes have %s of %s cpu and %s of %s of memory",
			cpus(milliCPU), quantity.Mebibytes(memBytes), cpus(u.MilliCPU), cpus(u.MilliCPUCapacity),
			quantity.Mebibytes(u.MemoryBytes), quantity.Mebibytes(u.MemoryBytesCapacity))
	default:
		return nil
	}
	err = fmt.Errorf("sandbox %s may make no more sandboxes (sessions, contexts): %s: %w", owner.ID, why, errdefs.ErrResourceExhausted)
	return ownedLimitError{ResourceError(errdefs.WithCode(err, api.CodeLimitExceeded), u, suggestOwned)}
}

// ownedBudget is the cpu and memory owner's sandboxes may have in all.
func (m *Manager) ownedBudget(owner *store.Sandbox) (milliCPU, memBytes int64) {
	cpu, mem := m.cfg.Owned.CPU, m.cfg.Owned.Memory
	if cpu == "" {
		cpu = owner.CPU
	}
	if mem == "" {
		mem = owner.Memory
	}
	milliCPU, _ = quantity.ParseCPU(cpu) // the daemon's checked setting, or a record's
	memBytes, _ = quantity.ParseBytes(mem)
	if m.cfg.Owned.CPU == "" {
		milliCPU = max(milliCPU, minOwnedMilliCPU)
	}
	if m.cfg.Owned.Memory == "" {
		memBytes = max(memBytes, minOwnedBytes)
	}
	return milliCPU, memBytes
}

// removeOwned deletes the sandboxes owner owned, once its record is gone:
// under admitMu, so that every create admitted for it has its record, and
// none admitted later finds the owner.
func (m *Manager) removeOwned(ctx context.Context, owner string) {
	m.admitMu.Lock()
	owned, _, err := m.store.ListSandboxPage(ctx, store.SandboxFilter{Owner: owner}, store.Page{})
	m.admitMu.Unlock()
	if err != nil {
		m.log.Warn("list the sandboxes a sandbox owned", "sandbox", owner, "err", err)
		return // the sweep finds them
	}
	for _, sb := range owned {
		if err := m.Delete(ctx, sb.ID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			m.log.Warn("delete a sandbox its owner's deletion left", "sandbox", sb.ID, "owner", owner, "err", err)
		}
	}
}
