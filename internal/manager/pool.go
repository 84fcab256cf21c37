package manager

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

// WarmPool hands out sandboxes made ahead of time. TakeSandbox returns one
// that req would make, claimed (see Claim) for req.ManagedBy with req's TTL
// and metadata, or false.
type WarmPool interface {
	TakeSandbox(ctx context.Context, req CreateRequest) (*store.Sandbox, bool)
}

// WarmPoolFunc is a func that is a WarmPool. Warm pools create through
// the manager, so they are built after it: a func that finds them when
// called lets the manager take them at New.
type WarmPoolFunc func(ctx context.Context, req CreateRequest) (*store.Sandbox, bool)

// TakeSandbox calls f.
func (f WarmPoolFunc) TakeSandbox(ctx context.Context, req CreateRequest) (*store.Sandbox, bool) {
	return f(ctx, req)
}

// WithWarmPool makes Create take sandboxes from p when one fits.
func WithWarmPool(p WarmPool) Option { return func(m *Manager) { m.pool = p } }

// CreatePooled makes a sandbox for warm pool pool: hidden from List and
// without an expiry until Claim hands it out. It returns once the sandbox
// runs, or with an error after deleting what it made.
func (m *Manager) CreatePooled(ctx context.Context, req CreateRequest, pool string) (*store.Sandbox, error) {
	if pool == "" {
		return nil, errdefs.Invalid("pool name is required")
	}
	req.pool = pool
	sb, err := m.create(ctx, req)
	if err != nil {
		return nil, err
	}
	running, err := m.WaitRunning(ctx, sb)
	if err != nil {
		_ = m.DeletePooled(context.WithoutCancel(ctx), sb.ID)
		return nil, fmt.Errorf("warm sandbox: %w", err)
	}
	return running, nil
}

// WaitRunning waits until sb, as Create returned it, leaves pending: it
// returns the sandbox running, or ErrFailedPrecondition (SANDBOX_NOT_READY)
// if it failed or ended instead.
func (m *Manager) WaitRunning(ctx context.Context, sb *store.Sandbox) (*store.Sandbox, error) {
	sb, err := m.Settle(ctx, sb)
	if err != nil {
		return nil, err
	}
	if sb.Status == string(api.StatusPending) {
		return nil, fmt.Errorf("wait for sandbox %s: %w", sb.ID, ctx.Err())
	}
	if sb.Status != string(api.StatusRunning) {
		return nil, errdefs.WithCode(errdefs.Precondition("sandbox %s is %s: %s", sb.ID, sb.Status, sb.Reason), api.CodeSandboxNotReady)
	}
	return sb, nil
}

// Settle waits until sb, as Create returned it, leaves pending, or ctx
// ends, and returns it as it then is.
func (m *Manager) Settle(ctx context.Context, sb *store.Sandbox) (*store.Sandbox, error) {
	for delay := 5 * time.Millisecond; sb.Status == string(api.StatusPending); delay = min(2*delay, 250*time.Millisecond) {
		select {
		case <-ctx.Done():
			return sb, nil
		case <-time.After(delay):
		}
		next, err := m.get(ctx, sb.ID) // a pooled one too (CreatePooled)
		switch {
		case err != nil && ctx.Err() != nil:
			return sb, nil
		case err != nil:
			return nil, err
		}
		sb = next
	}
	return sb, nil
}

// A Claim says who takes a pooled sandbox and what the taker asks of it
// beyond what the pool made.
type Claim struct {
	// Owner is the service whose records will refer to the sandbox
	// (store.Sandbox.ManagedBy); empty for a client's request.
	Owner string
	// TTL, when set, replaces the pool's TTL (seconds; 0: no expiry).
	TTL *int
	// Metadata is added to the sandbox's own.
	Metadata map[string]string
}

// Claim hands pooled sandbox id out as c says, in one store write: it
// leaves its pool, and its life (and TTL) starts now.
// ErrFailedPrecondition if it is no longer running; ErrInvalidArgument,
// changing nothing, if c's TTL or metadata (with the sandbox's own) is
// not valid.
func (m *Manager) Claim(ctx context.Context, id string, c Claim) (*store.Sandbox, error) {
	if c.TTL != nil {
		if err := checkTTL(*c.TTL); err != nil {
			return nil, err
		}
	}
	unlock := m.lock(id)
	defer unlock()
	sb, err := m.store.UpdateSandbox(ctx, id, func(sb *store.Sandbox) error {
		if sb.Pool == "" || sb.Status != string(api.StatusRunning) {
			return errdefs.Precondition("sandbox %s is not a running pooled sandbox", id)
		}
		if len(c.Metadata) > 0 {
			md := maps.Clone(sb.Metadata)
			if md == nil {
				md = make(map[string]string, len(c.Metadata))
			}
			maps.Copy(md, c.Metadata)
			if err := checkMetadata(md); err != nil {
				return err
			}
			sb.Metadata = md
		}
		now := m.now().UTC()
		sb.Pool, sb.ManagedBy, sb.CreatedAt, sb.UpdatedAt = "", c.Owner, now, now
		if c.TTL != nil {
			sb.TTL = *c.TTL
		}
		sb.ExpiresAt = nil
		if sb.TTL > 0 {
			exp := now.Add(time.Duration(sb.TTL) * time.Second)
			sb.ExpiresAt = &exp
		}
		return nil
	})
	if err != nil {
		return nil, sandboxErr(err)
	}
	m.event(ctx, id, sb.Status, "taken from the warm pool")
	return sb, nil
}
