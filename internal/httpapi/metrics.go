package httpapi

import (
	"net/http"

	"github.com/agent2env/agent2env/internal/metrics"
)

// WithMetrics serves m at GET /metrics and records the latency of every
// request in it, by route and status code. A nil m serves no /metrics.
func WithMetrics(m *metrics.Metrics) Option {
	return func(s *Server) {
		if m == nil {
			return
		}
		s.metrics = m
		s.routes = append(s.routes, metricsRoutes{m: m, s: s})
	}
}

// metricsRoutes serves GET /metrics.
type metricsRoutes struct {
	m *metrics.Metrics
	s *Server
}

func (r metricsRoutes) Register(mux *http.ServeMux) {
	mux.Handle("GET /metrics", r.m.Handler(r.s.log))
}
