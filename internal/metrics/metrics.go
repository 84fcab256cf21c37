// Package metrics is the daemon's Prometheus instrumentation, on a private
// registry (never the process-wide default): the Go and process
// collectors and latency histograms of HTTP requests, sandbox creates,
// execs and context executions. Services with state of their own (the
// manager's sandboxes by status, warm pools, contexts, sessions) Register
// collectors that count it when scraped, with one counting query, never a
// scan.
//
// A *Metrics is safe for concurrent use. Its recording methods do nothing
// on a nil *Metrics, so a service built without metrics needs no checks.
package metrics

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
)

// Buckets are the upper bounds, in seconds, of every latency histogram:
// 100 µs to 10 s in 1–2.5–5 steps. A warm-pool create or a short exec
// takes well under a millisecond, a cold create tens of milliseconds, a
// build or a long command seconds (those land in +Inf).
var Buckets = []float64{
	0.0001, 0.00025, 0.0005,
	0.001, 0.0025, 0.005,
	0.01, 0.025, 0.05,
	0.1, 0.25, 0.5,
	1, 2.5, 5, 10,
}

// Sources of a sandbox create (the source label).
const (
	SourceCold = "cold" // a sandbox made for the request
	SourcePool = "pool" // a ready sandbox taken from a warm pool
)

// Outcomes of an exec or a context execution (the outcome label); a
// create's outcome is the status of the sandbox it returned, or
// OutcomeError.
const (
	// OutcomeOK: the command or code ran to its end, whatever its exit
	// code (exec) — for a context execution, without raising.
	OutcomeOK = "ok"
	// OutcomeCodeError: the context's code raised an error.
	OutcomeCodeError = "code_error"
	// OutcomeTimeout: the request's timeout ended it.
	OutcomeTimeout = "timeout"
	// OutcomeError: it could not run (no such or no running sandbox, the
	// agent failed, the command could not be started), or the create was
	// refused or failed.
	OutcomeError = "error"
)

// Metrics is the daemon's registry with the metrics it records itself.
type Metrics struct {
	reg        *prometheus.Registry
	requests   *prometheus.HistogramVec
	creates    *prometheus.HistogramVec
	execs      *prometheus.HistogramVec
	executions *prometheus.HistogramVec
}

// New returns a registry holding the Go and process collectors and the
// daemon's own metrics, all at zero.
func New() *Metrics {
	histogram := func(name, help string, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: Buckets}, labels)
	}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: histogram("agent2env_http_request_duration_seconds",
			"Time to answer an API request, by route (the pattern it matched) and status code.", "route", "code"),
		creates: histogram("agent2env_sandbox_create_duration_seconds",
			"Time a sandbox create took until it returned, by source (cold, pool) and outcome (the returned sandbox's status, or error).", "source", "outcome"),
		execs: histogram("agent2env_sandbox_exec_duration_seconds",
			"Time a command run in a sandbox took, by outcome (ok, timeout, error).", "outcome"),
		executions: histogram("agent2env_context_execution_duration_seconds",
			"Time a code-interpreter execution took, by language and outcome (ok, code_error, timeout, error).", "language", "outcome"),
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests, m.creates, m.execs, m.executions,
	)
	return m
}

// Register adds collectors to the registry; it fails if one describes a
// metric already registered.
func (m *Metrics) Register(cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := m.reg.Register(c); err != nil {
			return fmt.Errorf("register metrics: %w", err)
		}
	}
	return nil
}

// Gather collects every metric, as a scrape would (prometheus.Gatherer).
func (m *Metrics) Gather() ([]*dto.MetricFamily, error) { return m.reg.Gather() }

// Handler serves the registry in the Prometheus exposition formats. A
// collector that fails is logged and left out; the others are served.
func (m *Metrics) Handler(log *slog.Logger) http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:      slogPrinter{log},
		ErrorHandling: promhttp.ContinueOnError,
	})
}

// Requests is the request latency histogram, with labels route and code,
// for the HTTP middleware; nil on a nil *Metrics.
func (m *Metrics) Requests() *prometheus.HistogramVec {
	if m == nil {
		return nil
	}
	return m.requests
}

// ObserveCreate records a sandbox create that took d.
func (m *Metrics) ObserveCreate(source, outcome string, d time.Duration) {
	if m != nil {
		m.creates.WithLabelValues(source, outcome).Observe(d.Seconds())
	}
}

// ObserveExec records a command run in a sandbox that took d.
func (m *Metrics) ObserveExec(outcome string, d time.Duration) {
	if m != nil {
		m.execs.WithLabelValues(outcome).Observe(d.Seconds())
	}
}

// ObserveExecution records a context execution that took d.
func (m *Metrics) ObserveExecution(language, outcome string, d time.Duration) {
	if m != nil {
		m.executions.WithLabelValues(language, outcome).Observe(d.Seconds())
	}
}

// slogPrinter logs promhttp's errors (promhttp.Logger).
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) {
	if p.log != nil {
		p.log.Warn("serve metrics", "err", fmt.Sprint(v...))
	}
}
