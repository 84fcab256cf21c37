package httpapi

import (
	"context"
	"net/http"
	"path"
	"strings"
)

// A Surface is a protocol served on the daemon's port beside the REST API
// (the OpenSandbox and E2B APIs) whose errors take a form of its own. The
// Server's own middleware (panic recovery, BrowserGuard's refusals)
// answers the errors of a surface's requests with its WriteError, so that
// every error a surface's client reads is in that surface's form.
type Surface interface {
	// Serves reports whether r is the surface's.
	Serves(r *http.Request) bool
	// WriteError answers err, which r met, in the surface's form.
	WriteError(w http.ResponseWriter, r *http.Request, err error)
}

// A SiteSurface is a Surface that also serves web sites of their own: a
// sandbox's pages on an origin of their own (the E2B API's
// "<port>-<id>.<domain>"). Like the port gateway's paths, their requests
// pass BrowserGuard's refusal of pages (not its Host check) and CORS
// leaves them to the site: the pages there are the sandbox's, and so are
// the requests they make.
type SiteSurface interface {
	Surface
	// ServesSite reports whether r is for a site of the surface's.
	ServesSite(r *http.Request) bool
}

// WithSurface answers the errors of the requests s serves in its form;
// of several surfaces serving a request, the first given answers.
func WithSurface(sf Surface) Option { return func(s *Server) { s.surfaces = append(s.surfaces, sf) } }

// surfaceKey is the context key of the Surface a request is for;
// siteKey's value is true for a request for a SiteSurface's site.
type (
	surfaceKey struct{}
	siteKey    struct{}
)

// markSurfaces gives each request the surface that serves it, if any, for
// writeRequestError: the outermost middleware, so that every error on
// the way is answered in the request's form.
func (s *Server) markSurfaces(h http.Handler) http.Handler {
	if len(s.surfaces) == 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, sf := range s.surfaces {
			if sf.Serves(r) {
				ctx := context.WithValue(r.Context(), surfaceKey{}, sf)
				if site, ok := sf.(SiteSurface); ok && site.ServesSite(r) {
					ctx = context.WithValue(ctx, siteKey{}, true)
				}
				r = r.WithContext(ctx)
				break
			}
		}
		h.ServeHTTP(w, r)
	})
}

// sandboxPage reports whether r is for a sandbox's web page or made by
// one: on the port gateway's paths, or for a SiteSurface's site.
func sandboxPage(r *http.Request) bool {
	site, _ := r.Context().Value(siteKey{}).(bool)
	return site || strings.HasPrefix(path.Clean(r.URL.EscapedPath()), gatewayPrefix)
}

// writeRequestError answers err in the form of r's surface (WithSurface),
// or the REST API's.
func writeRequestError(w http.ResponseWriter, r *http.Request, err error) {
	if sf, ok := r.Context().Value(surfaceKey{}).(Surface); ok {
		sf.WriteError(w, r, err)
		return
	}
	writeError(w, err)
}
