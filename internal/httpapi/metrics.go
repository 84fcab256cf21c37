package httpapi

import (
	"bytes"
	"context"
	"io"
	"net/http"
)

// MetricsSource writes its metrics in the Prometheus text format.
type MetricsSource interface {
	WriteMetrics(ctx context.Context, w io.Writer) error
}

// MetricsRoutes serves GET /metrics from its sources.
type MetricsRoutes struct {
	sources []MetricsSource
}

// NewMetricsRoutes returns the /metrics route over sources.
func NewMetricsRoutes(sources ...MetricsSource) *MetricsRoutes {
	return &MetricsRoutes{sources: sources}
}

// Register adds the route to mux.
func (m *MetricsRoutes) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /metrics", m.metrics)
}

func (m *MetricsRoutes) metrics(w http.ResponseWriter, r *http.Request) {
	var buf bytes.Buffer
	for _, s := range m.sources {
		if err := s.WriteMetrics(r.Context(), &buf); err != nil {
			writeError(w, err)
			return
		}
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = buf.WriteTo(w)
}
