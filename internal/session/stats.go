package session

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/store"
)

// recentExecutions is how many of the latest executions the percentiles
// of Stats are taken over.
const recentExecutions = 1024

// recorder counts executions and keeps the durations of the recent ones.
// The zero value is ready; it is safe for concurrent use.
type recorder struct {
	mu     sync.Mutex
	count  int
	errors int
	recent [recentExecutions]time.Duration
}

func (r *recorder) observe(d time.Duration, failed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recent[r.count%recentExecutions] = d
	r.count++
	if failed {
		r.errors++
	}
}

// stats returns the counts and the 50th and 95th percentiles, in seconds.
func (r *recorder) stats() api.ExecutionStats {
	r.mu.Lock()
	ds := slices.Clone(r.recent[:min(r.count, recentExecutions)])
	st := api.ExecutionStats{Count: r.count, Errors: r.errors}
	r.mu.Unlock()
	if len(ds) == 0 {
		return st
	}
	slices.Sort(ds)
	at := func(q float64) float64 { return ds[int(q*float64(len(ds)-1)+0.5)].Seconds() }
	st.P50, st.P95 = at(0.50), at(0.95)
	return st
}

// WithUsage makes Stats measure the cpu and memory running sandboxes use.
func WithUsage(u sandbox.UsageReader) Option { return func(s *Service) { s.usageReader = u } }

// WithWarmPools makes Stats report the warm pools pools returns.
func WithWarmPools(pools func() []api.WarmPool) Option {
	return func(s *Service) { s.warmPools = pools }
}

// Stats reports on sessions, sandboxes, resources and executions.
func (s *Service) Stats(ctx context.Context) (*api.Stats, error) {
	counts, err := s.store.CountSandboxesByStatus(ctx)
	if err != nil {
		return nil, err
	}
	sessions, err := s.store.CountSessions(ctx)
	if err != nil {
		return nil, err
	}
	u, err := s.usage(ctx)
	if err != nil {
		return nil, err
	}
	st := &api.Stats{
		Sessions:  api.SessionStats{Active: sessions, Busy: sessions - u.IdleSessions},
		Sandboxes: map[string]int{"pooled": counts.Pooled},
		Resources: api.ResourceStats{
			MilliCPUCommitted: u.MilliCPU, MilliCPUCapacity: u.MilliCPUCapacity,
			MemoryBytesCommitted: u.MemoryBytes, MemoryBytesCapacity: u.MemoryBytesCapacity,
		},
		Executions: s.execs.stats(),
		WarmPools:  []api.WarmPool{},
	}
	if s.warmPools != nil {
		st.WarmPools = append(st.WarmPools, s.warmPools()...)
	}
	for status, n := range counts.ByStatus {
		st.Sandboxes[status] = n
	}
	if s.usageReader != nil {
		if err := s.measure(ctx, &st.Resources); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// measure adds up what running sandboxes (warm pools' too) use now.
func (s *Service) measure(ctx context.Context, r *api.ResourceStats) error {
	sbs, _, err := s.store.ListSandboxPage(ctx, store.SandboxFilter{}, store.Page{})
	if err != nil {
		return fmt.Errorf("list sandboxes to measure: %w", err)
	}
	for _, sb := range sbs {
		if sb.Status != string(api.StatusRunning) {
			continue
		}
		if use, err := s.usageReader.Usage(ctx, sb.ID); err == nil {
			r.CPUSecondsUsed += time.Duration(use.CPUNanos).Seconds()
			r.MemoryBytesUsed += int64(use.MemoryBytes)
		}
	}
	return nil
}

// The sessions' metrics.
var (
	sessionsDesc   = prometheus.NewDesc("agent2env_sessions", "Sessions that exist.", nil, nil)
	busyDesc       = prometheus.NewDesc("agent2env_sessions_busy", "Sessions with a request running in them.", nil, nil)
	committedDesc  = prometheus.NewDesc("agent2env_committed", "Resource limits of pending, running and paused sandboxes: millicpu, memory bytes.", []string{"resource"}, nil)
	capacityDesc   = prometheus.NewDesc("agent2env_capacity", "What committed resources may add up to: millicpu, memory bytes.", []string{"resource"}, nil)
	executionsDesc = prometheus.NewDesc("agent2env_session_executions_total", "Executions of code and commands in sessions and contexts, by outcome.", []string{"outcome"}, nil)
)

var _ prometheus.Collector = (*Service)(nil)

// Describe sends the descriptors of the sessions' metrics
// (prometheus.Collector).
func (s *Service) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{sessionsDesc, busyDesc, committedDesc, capacityDesc, executionsDesc} {
		ch <- d
	}
}

// Collect sends the sessions' metrics, read when called
// (prometheus.Collector).
func (s *Service) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := s.Stats(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(sessionsDesc, fmt.Errorf("session stats: %w", err))
		return
	}
	ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(st.Sessions.Active))
	ch <- prometheus.MustNewConstMetric(busyDesc, prometheus.GaugeValue, float64(st.Sessions.Busy))
	r := st.Resources
	ch <- prometheus.MustNewConstMetric(committedDesc, prometheus.GaugeValue, float64(r.MilliCPUCommitted), "millicpu")
	ch <- prometheus.MustNewConstMetric(committedDesc, prometheus.GaugeValue, float64(r.MemoryBytesCommitted), "memory_bytes")
	ch <- prometheus.MustNewConstMetric(capacityDesc, prometheus.GaugeValue, float64(r.MilliCPUCapacity), "millicpu")
	ch <- prometheus.MustNewConstMetric(capacityDesc, prometheus.GaugeValue, float64(r.MemoryBytesCapacity), "memory_bytes")
	e := st.Executions
	ch <- prometheus.MustNewConstMetric(executionsDesc, prometheus.CounterValue, float64(e.Count-e.Errors), "ok")
	ch <- prometheus.MustNewConstMetric(executionsDesc, prometheus.CounterValue, float64(e.Errors), "error")
}
