package manager

import (
	"context"

	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/metrics"
	"github.com/agent2env/agent2env/internal/store"
)

// WithMetrics records create and exec durations in mt and keeps its
// sandboxes-by-status gauges current: every write of a sandbox record
// moves the sandbox between them, and Recover sets them from the records.
// A nil mt records nothing.
func WithMetrics(mt *metrics.Metrics) Option {
	return func(m *Manager) {
		if mt == nil {
			return
		}
		m.metrics = mt
		m.store = countingStore{Store: m.store, metrics: mt}
	}
}

// countingStore moves a sandbox between the gauges on each write of its
// record, from the state the write found to the one it left. A delete
// reads the record first; the caller's per-id lock keeps the two together.
type countingStore struct {
	store.Store
	metrics *metrics.Metrics
}

func stateOf(sb *store.Sandbox) metrics.SandboxState {
	return metrics.SandboxState{Status: sb.Status, Pooled: sb.Pool != ""}
}

func (s countingStore) CreateSandboxLimited(ctx context.Context, sb *store.Sandbox, limit int) error {
	if err := s.Store.CreateSandboxLimited(ctx, sb, limit); err != nil {
		return err
	}
	s.metrics.MoveSandbox(metrics.SandboxState{}, stateOf(sb))
	return nil
}

func (s countingStore) UpdateSandbox(ctx context.Context, id string, fn func(*store.Sandbox) error) (*store.Sandbox, error) {
	var before metrics.SandboxState
	sb, err := s.Store.UpdateSandbox(ctx, id, func(sb *store.Sandbox) error {
		before = stateOf(sb) // fn may change sb
		return fn(sb)
	})
	if err != nil {
		return nil, err
	}
	s.metrics.MoveSandbox(before, stateOf(sb))
	return sb, nil
}

func (s countingStore) DeleteSandbox(ctx context.Context, id string) error {
	sb, err := s.Store.GetSandbox(ctx, id)
	if err != nil {
		return err
	}
	if err := s.Store.DeleteSandbox(ctx, id); err != nil {
		return err
	}
	s.metrics.MoveSandbox(stateOf(sb), metrics.SandboxState{})
	return nil
}

// countSandboxes sets the gauges from every record, as Recover found them.
func (m *Manager) countSandboxes(records []*store.Sandbox) {
	counts := map[metrics.SandboxState]int{}
	for _, sb := range records {
		counts[stateOf(sb)]++
	}
	m.metrics.SetSandboxes(counts)
}

// createLabel is a create's outcome label: the status of the sandbox it
// returned, or error.
func createLabel(sb *store.Sandbox, err error) string {
	if err != nil || sb == nil {
		return metrics.OutcomeError
	}
	return sb.Status
}

// execLabel is an exec's outcome label.
func execLabel(res agent.ExecResult, err error) string {
	switch {
	case err != nil || res.Error != "":
		return metrics.OutcomeError
	case res.TimedOut:
		return metrics.OutcomeTimeout
	}
	return metrics.OutcomeOK
}
