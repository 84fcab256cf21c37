package gate

import (
	"context"
	"errors"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/proxy"
	"github.com/agent2env/agent2env/internal/metrics"
)

// Metrics are the LLM proxy's Prometheus collectors; register them with
// metrics.Metrics.Register. A nil *Metrics counts nothing.
type Metrics struct {
	requests *prometheus.CounterVec
	errors   *prometheus.CounterVec
	tokens   *prometheus.CounterVec
	duration *prometheus.HistogramVec
	first    *prometheus.HistogramVec
	limited  *prometheus.CounterVec
}

var _ prometheus.Collector = (*Metrics)(nil)

// NewMetrics returns the collectors, at zero.
func NewMetrics() *Metrics {
	return &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agent2env_llm_requests_total",
			Help: "LLM calls through the proxy, by model asked for, provider that answered, and status code."}, []string{"model", "provider", "code"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agent2env_llm_errors_total",
			Help: "LLM calls that failed, by model, provider and error kind (rate_limit, upstream, timeout, canceled, ...)."}, []string{"model", "provider", "kind"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agent2env_llm_tokens_total",
			Help: "Tokens of LLM calls, by model, provider and type (input, output, cached, reasoning)."}, []string{"model", "provider", "type"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "agent2env_llm_request_duration_seconds",
			Help: "Time an LLM call took to its last byte, by model, provider and whether it streamed.", Buckets: metrics.Buckets}, []string{"model", "provider", "stream"}),
		first: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "agent2env_llm_first_byte_seconds",
			Help: "Time to the first byte answered to an LLM call (time to first token when streaming), by model and provider.", Buckets: metrics.Buckets}, []string{"model", "provider"}),
		limited: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agent2env_llm_limited_total",
			Help: "LLM calls refused by a budget or rate limit, by scope (key, sandbox, run)."}, []string{"scope"}),
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.requests, m.errors, m.tokens, m.duration, m.first, m.limited}
}

func (m *Metrics) observe(ex *proxy.Exchange) {
	if m == nil {
		return
	}
	model, prov := ex.Model, ex.Provider
	if prov == "" {
		model = "" // unknown model names are the client's, unbounded: not labels
	}
	m.requests.WithLabelValues(model, prov, strconv.Itoa(ex.Status)).Inc()
	if ex.Err != nil || ex.Status >= 400 {
		kind := "error"
		var e *llm.Error
		switch {
		case errors.As(ex.Err, &e):
			kind = string(e.Kind)
		case ex.Err == nil:
			kind = string(llm.KindOfStatus(ex.Status))
		case errors.Is(ex.Err, context.Canceled):
			kind = "canceled"
		}
		m.errors.WithLabelValues(model, prov, kind).Inc()
	}
	u := ex.Usage
	for typ, n := range map[string]int{"input": u.InputTokens, "output": u.OutputTokens, "cached": u.CachedTokens, "reasoning": u.ReasoningTokens} {
		if n > 0 {
			m.tokens.WithLabelValues(model, prov, typ).Add(float64(n))
		}
	}
	m.duration.WithLabelValues(model, prov, strconv.FormatBool(ex.Stream)).Observe(ex.Duration.Seconds())
	if ex.FirstByte > 0 {
		m.first.WithLabelValues(model, prov).Observe(ex.FirstByte.Seconds())
	}
}

func (m *Metrics) limit(scope string) {
	if m == nil {
		return
	}
	m.limited.WithLabelValues(scope).Inc()
}
