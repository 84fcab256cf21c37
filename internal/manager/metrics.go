package manager

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agent2env/agent2env/api"

	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/metrics"
	"github.com/agent2env/agent2env/internal/store"
)

// WithMetrics records create and exec durations in mt. A nil mt records
// nothing. The sandboxes-by-status gauges come from the Manager itself as
// a collector (Register it).
func WithMetrics(mt *metrics.Metrics) Option { return func(m *Manager) { m.metrics = mt } }

var (
	sandboxesDesc = prometheus.NewDesc("agent2env_sandboxes", "Sandboxes by status (not counting warm pools).", []string{"status"}, nil)
	pooledDesc    = prometheus.NewDesc("agent2env_sandboxes_pooled", "Sandboxes waiting in warm pools.", nil, nil)
	// gaugeStatuses are reported even when no sandbox has them, so that
	// a gauge that drops to zero reads 0 rather than vanishing.
	gaugeStatuses = []api.SandboxStatus{api.StatusPending, api.StatusRunning, api.StatusPaused, api.StatusSucceeded, api.StatusFailed, api.StatusTerminating}
)

// collectTimeout bounds the store count behind a scrape.
const collectTimeout = 10 * time.Second

var _ prometheus.Collector = (*Manager)(nil)

// Describe sends the descriptors of the sandbox gauges
// (prometheus.Collector).
func (m *Manager) Describe(ch chan<- *prometheus.Desc) {
	ch <- sandboxesDesc
	ch <- pooledDesc
}

// Collect sends the number of sandboxes by status and in warm pools, as
// the store counts them when called: one grouped count, no records read
// (prometheus.Collector).
func (m *Manager) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
	defer cancel()
	c, err := m.store.CountSandboxesByStatus(ctx)
	if err != nil {
		err = fmt.Errorf("count sandboxes: %w", err)
		ch <- prometheus.NewInvalidMetric(sandboxesDesc, err)
		ch <- prometheus.NewInvalidMetric(pooledDesc, err)
		return
	}
	byStatus := maps.Clone(c.ByStatus)
	if byStatus == nil {
		byStatus = map[string]int{}
	}
	for _, st := range gaugeStatuses {
		byStatus[string(st)] += 0
	}
	for st, n := range byStatus {
		ch <- prometheus.MustNewConstMetric(sandboxesDesc, prometheus.GaugeValue, float64(n), st)
	}
	ch <- prometheus.MustNewConstMetric(pooledDesc, prometheus.GaugeValue, float64(c.Pooled))
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
