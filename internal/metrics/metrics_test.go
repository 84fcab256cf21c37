package metrics

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestBuckets(t *testing.T) {
	if !slices.IsSorted(Buckets) || Buckets[0] != 0.0001 || Buckets[len(Buckets)-1] != 10 {
		t.Errorf("buckets %v: want sorted, from 100µs to 10s", Buckets)
	}
}

// TestNilRecordsNothing: a service built without metrics may call every
// recording method.
func TestNilRecordsNothing(t *testing.T) {
	var m *Metrics
	m.ObserveCreate(SourceCold, OutcomeError, time.Second)
	m.ObserveExec(OutcomeOK, time.Second)
	m.ObserveExecution("python", OutcomeOK, time.Second)
	if m.Requests() != nil {
		t.Error("nil Metrics has a request histogram")
	}
}

// failing is a collector whose source cannot be read.
type failing struct{ desc *prometheus.Desc }

func (f failing) Describe(ch chan<- *prometheus.Desc) { ch <- f.desc }
func (f failing) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.NewInvalidMetric(f.desc, errors.New("store closed"))
}

// TestHandler: the text format, the Go and process collectors, and a
// failing collector left out rather than failing the scrape.
func TestHandler(t *testing.T) {
	m := New()
	if err := m.Register(failing{prometheus.NewDesc("agent2env_broken", "Never read.", nil, nil)}); err != nil {
		t.Fatal(err)
	}
	if err := m.Register(failing{prometheus.NewDesc("agent2env_broken", "Never read.", nil, nil)}); err == nil {
		t.Error("registered a metric twice")
	}
	m.ObserveExec(OutcomeOK, 3*time.Millisecond)
	rec := httptest.NewRecorder()
	m.Handler(nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Errorf("status %d, Content-Type %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	for _, s := range []string{
		"go_goroutines ", "process_cpu_seconds_total ",
		`agent2env_sandbox_exec_duration_seconds_bucket{outcome="ok",le="0.005"} 1`,
		`agent2env_sandbox_exec_duration_seconds_bucket{outcome="ok",le="0.0025"} 0`,
	} {
		if !strings.Contains(string(body), s) {
			t.Errorf("no %q in\n%s", s, body)
		}
	}
	if strings.Contains(string(body), "agent2env_broken") {
		t.Errorf("the failing collector was served:\n%s", body)
	}
}
