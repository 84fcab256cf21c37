package httpapi

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// instrument records the latency of every request h answers in the
// server's request histogram, by route and status code. The route is the
// mux pattern that matched, never the raw path, so that the label has as
// few values as there are routes. It returns h itself when the server has
// no metrics.
func (s *Server) instrument(mux *http.ServeMux, h http.Handler) http.Handler {
	if s.metrics == nil {
		return h
	}
	route := func(r *http.Request) string {
		if r.Pattern != "" {
			return r.Pattern
		}
		// A middleware answered without the mux (or passed it a copy of
		// r): the route is the one the mux would have matched.
		if _, pattern := mux.Handler(r); pattern != "" {
			return pattern
		}
		return "unmatched"
	}
	// promhttp's response writer keeps the Flusher and Hijacker of the one
	// it wraps, which streams and the port gateway's WebSockets need.
	return promhttp.InstrumentHandlerDuration(s.metrics.Requests(), h, promhttp.WithLabelFromRequest("route", route))
}
