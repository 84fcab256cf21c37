package manager

import (
	"context"
	"maps"
	"math"
	"strings"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

// Bounds of a sandbox's metadata: what a client labels it with is kept in
// its record and read with every list.
const (
	MaxMetadataKeys  = 64
	MaxMetadataKey   = 253
	MaxMetadataValue = 1024
)

// checkMetadata checks md against the bounds.
func checkMetadata(md map[string]string) error {
	if len(md) > MaxMetadataKeys {
		return errdefs.Invalid("metadata: %d keys, at most %d", len(md), MaxMetadataKeys)
	}
	for k, v := range md {
		if k == "" || len(k) > MaxMetadataKey {
			return errdefs.Invalid("metadata key %q: want 1 to %d bytes", k, MaxMetadataKey)
		}
		if len(v) > MaxMetadataValue {
			return errdefs.Invalid("metadata %q: the value is over %d bytes", k, MaxMetadataValue)
		}
		// Refused by every store alike: PostgreSQL's text holds no NUL.
		if strings.ContainsRune(k, 0) || strings.ContainsRune(v, 0) {
			return errdefs.Invalid("metadata %q: keys and values must not contain NUL", k)
		}
	}
	return nil
}

// PatchMetadata applies a merge patch to sandbox id's metadata at once: a
// value sets its key, nil deletes it, a key the patch leaves out is kept.
// The result must stay within the bounds (ErrInvalidArgument). A sandbox
// being deleted is ErrFailedPrecondition.
func (m *Manager) PatchMetadata(ctx context.Context, id string, patch map[string]*string) (*store.Sandbox, error) {
	unlock := m.lock(id)
	defer unlock()
	sb, err := m.store.UpdateSandbox(ctx, id, func(sb *store.Sandbox) error {
		if err := notPooled(sb); err != nil {
			return err
		}
		if sb.Status == string(api.StatusTerminating) {
			return errdefs.Precondition("sandbox %s is being deleted", id)
		}
		md := maps.Clone(sb.Metadata)
		if md == nil {
			md = map[string]string{}
		}
		for k, v := range patch {
			if v == nil {
				delete(md, k)
			} else {
				md[k] = *v
			}
		}
		if err := checkMetadata(md); err != nil {
			return err
		}
		sb.Metadata = md
		return nil
	})
	return sb, sandboxErr(err)
}

// SetExpiry makes sandbox id expire at at, later or sooner than it would
// have (its TTL becomes the whole seconds from its creation to at). at
// must be in the future (ErrInvalidArgument); a sandbox being deleted, or
// one whose expiry has passed (which the sweep is to remove), is
// ErrFailedPrecondition.
func (m *Manager) SetExpiry(ctx context.Context, id string, at time.Time) (*store.Sandbox, error) {
	now := m.now().UTC()
	if !at.After(now) {
		return nil, errdefs.Invalid("expiry %s is not in the future", at.UTC().Format(time.RFC3339))
	}
	unlock := m.lock(id)
	defer unlock()
	sb, err := m.store.UpdateSandbox(ctx, id, func(sb *store.Sandbox) error {
		if err := notPooled(sb); err != nil {
			return err
		}
		if sb.Status == string(api.StatusTerminating) {
			return errdefs.Precondition("sandbox %s is being deleted", id)
		}
		if sb.ExpiresAt != nil && now.After(*sb.ExpiresAt) {
			// The sweep's to remove, as it would have been had it run: an
			// expiry set now would bring it back.
			return errdefs.WithCode(errdefs.Precondition("sandbox %s expired at %s", id, sb.ExpiresAt.UTC().Format(time.RFC3339)), api.CodeConflict)
		}
		exp := at.UTC()
		ttl := math.Ceil(exp.Sub(sb.CreatedAt).Seconds())
		if ttl > math.MaxInt32 {
			return errdefs.Invalid("expiry %s is too far away", exp.Format(time.RFC3339))
		}
		sb.ExpiresAt, sb.TTL, sb.UpdatedAt = &exp, max(int(ttl), 1), now
		return nil
	})
	if err != nil {
		return nil, sandboxErr(err)
	}
	m.event(ctx, id, sb.Status, "expiry set to "+at.UTC().Format(time.RFC3339))
	return sb, nil
}
