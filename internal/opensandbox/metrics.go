package opensandbox

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/service"
)

// Metrics measures sandboxes for execd's /metrics (docs/opensandbox.md
// §7.4).
type Metrics interface {
	Usage(ctx context.Context, id string) (service.SandboxUsage, error)
}

var _ Metrics = (*service.Sandboxes)(nil)

// metricsWindow is how long a measure of CPU use lasts: the CPU time
// used over it, as a share of the sandbox's CPUs. Stock execd measures
// the host's over a second; a quarter is as steady for a sandbox's
// cgroup and answers sooner.
var metricsWindow = 250 * time.Millisecond

// metricsInterval is how often /metrics/watch sends a measure, as
// execd's.
var metricsInterval = time.Second

// metricsView is execd's Metrics: the sandbox's CPUs (its CPU limit, in
// cores) and memory limit, and what its processes use of them.
type metricsView struct {
	CPUCount    float64 `json:"cpu_count"`
	CPUUsedPct  float64 `json:"cpu_used_pct"`
	MemTotalMiB float64 `json:"mem_total_mib"`
	MemUsedMiB  float64 `json:"mem_used_mib"`
	Timestamp   int64   `json:"timestamp"`
}

// measure reads sandbox id's usage twice, metricsWindow apart.
func (h *Handler) measure(ctx context.Context, id string) (metricsView, error) {
	first, err := h.cfg.Metrics.Usage(ctx, id)
	if err != nil {
		return metricsView{}, err
	}
	select {
	case <-ctx.Done():
		return metricsView{}, ctx.Err()
	case <-time.After(metricsWindow):
	}
	last, err := h.cfg.Metrics.Usage(ctx, id)
	if err != nil {
		return metricsView{}, err
	}
	const mib = 1 << 20
	m := metricsView{
		CPUCount:    float64(last.MilliCPU) / 1000,
		MemTotalMiB: float64(last.MemoryLimit) / mib,
		MemUsedMiB:  float64(last.MemoryBytes) / mib,
		Timestamp:   last.At.UnixMilli(),
	}
	if span := last.At.Sub(first.At); span > 0 && m.CPUCount > 0 {
		used := float64(last.CPUTime-first.CPUTime) / float64(span) / m.CPUCount * 100
		m.CPUUsedPct = min(max(used, 0), 100)
	}
	return m, nil
}

// metrics answers GET /metrics.
func (h *Handler) metrics(w http.ResponseWriter, r *http.Request, id string) {
	m, err := h.measure(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, m)
}

// watchMetrics answers GET /metrics/watch: a measure every
// metricsInterval, each one JSON object on a line, until the client
// leaves; a measure that fails is {"error": why} on its line, as execd's,
// and ends the stream when the sandbox is gone (no measure will come).
func (h *Handler) watchMetrics(w http.ResponseWriter, r *http.Request, id string) {
	ctx := r.Context()
	if _, err := h.cfg.Metrics.Usage(ctx, id); err != nil {
		writeError(w, err)
		return
	}
	h.startStream(w)
	t := time.NewTicker(metricsInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var line any
		m, err := h.measure(ctx, id)
		if err != nil {
			line = map[string]string{"error": err.Error()}
		} else {
			line = m
		}
		b, _ := json.Marshal(line)
		if _, err := w.Write(append(b, '\n')); err != nil {
			return
		}
		if http.NewResponseController(w).Flush() != nil || errors.Is(err, errdefs.ErrNotFound) {
			return
		}
	}
}
