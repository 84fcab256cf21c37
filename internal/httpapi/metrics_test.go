package httpapi

import (
	"bytes"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/contexts"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/metrics"
	"github.com/agent2env/agent2env/internal/metrics/metricstest"
	"github.com/agent2env/agent2env/internal/pool"
)

// scrape GETs /metrics and parses it as Prometheus does.
func (e *env) scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	r := e.do(t, http.MethodGet, "/metrics", "", nil)
	if r.status != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("GET /metrics: Content-Type %q, want the text format", ct)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(r.body))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, r.body)
	}
	return fams
}

// sample finds the sample of family name whose labels are labels, or nil.
func sample(fams map[string]*dto.MetricFamily, name string, labels map[string]string) *dto.Metric {
	for _, m := range fams[name].GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if cmp.Equal(got, labels) {
			return m
		}
	}
	return nil
}

// TestMetricsScrape: /metrics parses, keeps every metric the daemon served
// before client_golang with its type, and the new histograms observe what
// the requests did, by route pattern rather than path.
func TestMetricsScrape(t *testing.T) {
	mt := metrics.New()
	e := newEnv(t, envOptions{metrics: mt})
	log := slog.New(slog.DiscardHandler)
	// The daemon registers these beside the manager's gauges; a pool that
	// is never run reports its target and nothing ready.
	pools, err := pool.New(e.m, []pool.Spec{{Name: "alpine", Size: 2, Request: manager.CreateRequest{Image: "alpine"}}}, log)
	if err != nil {
		t.Fatal(err)
	}
	ctxs := contexts.New(contexts.Config{}, e.m, e.st, nil, log, contexts.WithMetrics(mt))
	if err := mt.Register(e.m, pools, ctxs); err != nil {
		t.Fatal(err)
	}

	sb := e.createSandbox(t, `{"image":"alpine"}`)
	if r := e.postJSON(t, "/api/v1/sandboxes/"+sb.ID+"/exec", `{"command":["true"]}`); r.status != http.StatusOK {
		t.Fatalf("exec: %d %s", r.status, r.body)
	}
	c, err := ctxs.Create(t.Context(), api.CreateContextRequest{SandboxID: sb.ID, Language: api.LanguageBash})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ctxs.Execute(t.Context(), c.ContextID, api.ExecuteRequest{Code: "echo hi"}); err != nil {
		t.Fatal(err)
	}
	e.do(t, http.MethodGet, "/api/v1/sandboxes/nosuchsandbox", "", nil)
	e.do(t, http.MethodGet, "/nosuchroute", "", nil)

	fams := e.scrape(t)
	for name, typ := range map[string]dto.MetricType{
		// Served before, and relied on (e2e, bench, dashboards).
		"agent2env_sandboxes":         dto.MetricType_GAUGE,
		"agent2env_sandboxes_pooled":  dto.MetricType_GAUGE,
		"agent2env_contexts":          dto.MetricType_GAUGE,
		"agent2env_pool_ready":        dto.MetricType_GAUGE,
		"agent2env_pool_target":       dto.MetricType_GAUGE,
		"agent2env_pool_hits_total":   dto.MetricType_COUNTER,
		"agent2env_pool_misses_total": dto.MetricType_COUNTER,
		// New.
		"agent2env_http_request_duration_seconds":      dto.MetricType_HISTOGRAM,
		"agent2env_sandbox_create_duration_seconds":    dto.MetricType_HISTOGRAM,
		"agent2env_sandbox_exec_duration_seconds":      dto.MetricType_HISTOGRAM,
		"agent2env_context_execution_duration_seconds": dto.MetricType_HISTOGRAM,
		"go_goroutines":                 dto.MetricType_GAUGE,
		"process_cpu_seconds_total":     dto.MetricType_COUNTER,
		"process_resident_memory_bytes": dto.MetricType_GAUGE,
	} {
		f := fams[name]
		if f == nil {
			t.Errorf("%s missing", name)
			continue
		}
		if f.GetType() != typ {
			t.Errorf("%s is a %v, want a %v", name, f.GetType(), typ)
		}
	}

	gauges := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"agent2env_sandboxes", map[string]string{"status": "running"}, 1},
		{"agent2env_sandboxes", map[string]string{"status": "pending"}, 0},
		{"agent2env_sandboxes_pooled", map[string]string{}, 0},
		{"agent2env_contexts", map[string]string{}, 1},
		{"agent2env_pool_target", map[string]string{"pool": "alpine"}, 2},
		{"agent2env_pool_ready", map[string]string{"pool": "alpine"}, 0},
	}
	for _, g := range gauges {
		m := sample(fams, g.name, g.labels)
		if m == nil {
			t.Errorf("%s%v: no sample", g.name, g.labels)
		} else if v := m.GetGauge().GetValue(); v != g.want {
			t.Errorf("%s%v = %v, want %v", g.name, g.labels, v, g.want)
		}
	}

	histograms := []struct {
		name   string
		labels map[string]string
	}{
		{"agent2env_http_request_duration_seconds", map[string]string{"route": "POST /api/v1/sandboxes", "code": "201"}},
		{"agent2env_http_request_duration_seconds", map[string]string{"route": "POST /api/v1/sandboxes/{id}/exec", "code": "200"}},
		{"agent2env_http_request_duration_seconds", map[string]string{"route": "GET /api/v1/sandboxes/{id}", "code": "404"}},
		{"agent2env_http_request_duration_seconds", map[string]string{"route": "/", "code": "404"}},
		{"agent2env_sandbox_create_duration_seconds", map[string]string{"source": "cold", "outcome": "running"}},
		{"agent2env_sandbox_exec_duration_seconds", map[string]string{"outcome": "ok"}},
		{"agent2env_context_execution_duration_seconds", map[string]string{"language": "bash", "outcome": "ok"}},
	}
	for _, h := range histograms {
		m := sample(fams, h.name, h.labels)
		if m == nil {
			t.Errorf("%s%v: no sample", h.name, h.labels)
			continue
		}
		hist := m.GetHistogram()
		if hist.GetSampleCount() != 1 || hist.GetSampleSum() <= 0 {
			t.Errorf("%s%v: %d observations summing to %v, want 1", h.name, h.labels, hist.GetSampleCount(), hist.GetSampleSum())
		}
		var bounds []float64
		for _, b := range hist.GetBucket() {
			bounds = append(bounds, b.GetUpperBound())
		}
		if diff := cmp.Diff(append(slices.Clone(metrics.Buckets), math.Inf(1)), bounds); diff != "" {
			t.Errorf("%s%v: bucket bounds (-want +got):\n%s", h.name, h.labels, diff)
		}
	}
	for _, m := range fams["agent2env_http_request_duration_seconds"].GetMetric() {
		for _, l := range m.GetLabel() {
			if strings.Contains(l.GetValue(), sb.ID) || strings.Contains(l.GetValue(), "nosuch") {
				t.Errorf("label %s=%q holds a raw path", l.GetName(), l.GetValue())
			}
		}
	}

	// The gauges follow the sandbox out.
	if r := e.do(t, http.MethodDelete, "/api/v1/sandboxes/"+sb.ID, "", nil); r.status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	fams = e.scrape(t)
	for _, status := range []string{"running", "terminating"} {
		if m := sample(fams, "agent2env_sandboxes", map[string]string{"status": status}); m.GetGauge().GetValue() != 0 {
			t.Errorf("after delete, %s sandboxes = %v, want 0", status, m.GetGauge().GetValue())
		}
	}
}

// TestMetricsRouteBehindMiddleware: a request a middleware answers without
// reaching the mux is labelled with the route it asked for, and one the
// middleware passed on as a copy with the route the mux matched.
func TestMetricsRouteBehindMiddleware(t *testing.T) {
	mt := metrics.New()
	refuse := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Has("refuse") {
				http.Error(w, "no", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r.WithContext(r.Context())) // a copy
		})
	}
	srv := New(nil, nil, nil, WithMetrics(mt), WithMiddleware(refuse))
	srv.SetReady(true)
	h := srv.Handler()
	for _, target := range []string{"/readyz", "/readyz?refuse", "/api/v1/sandboxes/x/logs?refuse"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, target, nil))
	}
	got := metricstest.Observations(t, mt, "agent2env_http_request_duration_seconds")
	want := map[string]uint64{
		"code=200,route=GET /readyz":                     1,
		"code=401,route=GET /readyz":                     1,
		"code=401,route=GET /api/v1/sandboxes/{id}/logs": 1,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests by labels (-want +got):\n%s", diff)
	}
}
