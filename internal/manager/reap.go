package manager

import (
	"context"
	"errors"
	"fmt"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// ReapLeftovers deletes runtime state that no record refers to, as Recover
// does at start, while the daemon runs: it returns how many it deleted.
// The runtime is listed before the records, and a record is always written
// before its runtime state and deleted after it, so a sandbox being made or
// deleted meanwhile is never taken for a leftover.
func (m *Manager) ReapLeftovers(ctx context.Context) (int, error) {
	live, err := m.rt.List(ctx)
	if err != nil {
		return 0, fmt.Errorf("list runtime sandboxes: %w", err)
	}
	records, err := m.store.ListSandboxes(ctx)
	if err != nil {
		return 0, fmt.Errorf("list sandboxes: %w", err)
	}
	known := make(map[string]bool, len(records))
	for _, sb := range records {
		known[sb.ID] = true
	}
	n := 0
	var errs []error
	for _, st := range live {
		if known[st.ID] {
			continue
		}
		if err := m.reapLeftover(ctx, st.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// reapLeftover deletes the runtime state of id under its lock, unless a
// record of it appeared meanwhile.
func (m *Manager) reapLeftover(ctx context.Context, id string) error {
	unlock := m.lock(id)
	defer unlock()
	if _, err := m.store.GetSandbox(ctx, id); !errors.Is(err, errdefs.ErrNotFound) {
		return err // a record exists (or the store failed): not a leftover
	}
	if err := m.rt.Delete(ctx, id); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return fmt.Errorf("delete leftover sandbox %s: %w", id, err)
	}
	m.log.Info("deleted runtime leftover", "sandbox", id)
	return nil
}
