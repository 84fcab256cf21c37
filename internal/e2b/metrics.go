package e2b

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/service"
)

// metricsWindow is how long a measure of CPU use lasts: the CPU time the
// sandbox's processes used over it, as a share of its CPUs (E2B samples
// every 5 s; agent2env measures when asked).
var metricsWindow = 200 * time.Millisecond

// maxMetricsIDs bounds the sandboxes of one GET /sandboxes/metrics, as
// E2B's.
const maxMetricsIDs = 100

// metricView is E2B's SandboxMetric. agent2env keeps no history: a call
// answers one measure, taken now. It does not measure disk use or the
// page cache, so memCache, diskUsed and diskTotal are 0 (as diskSizeMB).
type metricView struct {
	Timestamp     time.Time `json:"timestamp"`
	TimestampUnix int64     `json:"timestampUnix"`
	CPUCount      int       `json:"cpuCount"`
	CPUUsedPct    float64   `json:"cpuUsedPct"`
	MemUsed       int64     `json:"memUsed"`
	MemTotal      int64     `json:"memTotal"`
	MemCache      int64     `json:"memCache"`
	DiskUsed      int64     `json:"diskUsed"`
	DiskTotal     int64     `json:"diskTotal"`
}

// measureAll reads the usage of each of sbs twice, metricsWindow apart,
// and returns the measures by id; a sandbox not running (paused, or
// ended meanwhile) has none.
func (h *Handler) measureAll(ctx context.Context, sbs []*api.Sandbox) (map[string]metricView, error) {
	first := map[string]service.SandboxUsage{}
	for _, sb := range sbs {
		u, err := h.cfg.Sandboxes.Usage(ctx, sb.ID)
		if errors.Is(err, errdefs.ErrFailedPrecondition) || errors.Is(err, errdefs.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		first[sb.ID] = u
	}
	out := map[string]metricView{}
	if len(first) == 0 {
		return out, nil
	}
	t := time.NewTimer(metricsWindow)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
	}
	for _, sb := range sbs {
		start, ok := first[sb.ID]
		if !ok {
			continue
		}
		last, err := h.cfg.Sandboxes.Usage(ctx, sb.ID)
		if errors.Is(err, errdefs.ErrFailedPrecondition) || errors.Is(err, errdefs.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		v := metricView{
			Timestamp:     last.At.UTC(),
			TimestampUnix: last.At.Unix(),
			CPUCount:      cpuCount(sb.CPU),
			MemUsed:       last.MemoryBytes,
			MemTotal:      last.MemoryLimit,
		}
		if span := last.At.Sub(start.At); span > 0 && last.MilliCPU > 0 {
			share := float64(last.CPUTime-start.CPUTime) / float64(span) / (float64(last.MilliCPU) / 1000)
			v.CPUUsedPct = min(max(share*100, 0), 100)
		}
		out[sb.ID] = v
	}
	return out, nil
}

// metrics answers GET /sandboxes/{id}/metrics: one measure of a running
// sandbox, none of a paused one (whose processes run nothing). start and
// end, which ask E2B for a range of its samples, change nothing.
func (h *Handler) metrics(w http.ResponseWriter, r *http.Request, id string) {
	sb, err := h.live(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	got, err := h.measureAll(r.Context(), []*api.Sandbox{sb})
	if err != nil {
		writeError(w, err)
		return
	}
	list := []metricView{}
	if v, ok := got[id]; ok {
		list = append(list, v)
	}
	writeJSON(w, http.StatusOK, list)
}

// manyMetrics answers GET /sandboxes/metrics?sandbox_ids=a,b: the measure
// of each running sandbox named, by id; ids of sandboxes that are not
// running are left out, as E2B's.
func (h *Handler) manyMetrics(w http.ResponseWriter, r *http.Request) {
	var ids []string
	for _, id := range strings.Split(r.URL.Query().Get("sandbox_ids"), ",") {
		if id = strings.TrimSpace(id); id != "" {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 || len(ids) > maxMetricsIDs {
		writeError(w, errdefs.Invalid("sandbox_ids: want 1 to %d sandbox ids, comma-separated", maxMetricsIDs))
		return
	}
	var sbs []*api.Sandbox
	for _, id := range ids {
		if sb, err := h.cfg.Sandboxes.Get(r.Context(), id); err == nil && alive(sb) {
			sbs = append(sbs, sb)
		}
	}
	out, err := h.measureAll(r.Context(), sbs)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Sandboxes map[string]metricView `json:"sandboxes"`
	}{out})
}
