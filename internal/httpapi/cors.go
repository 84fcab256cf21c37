package httpapi

import (
	"fmt"
	"net/http"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// corsMethods and corsHeaders are what a trusted page may send: every
// method of the API, with a key and a JSON body.
const (
	corsMethods = "GET, HEAD, POST, PUT, PATCH, DELETE"
	corsHeaders = "Authorization, Content-Type"
)

// CORS returns a middleware (for WithMiddleware) that lets the pages of
// exactly origins — the web console's and the operator's trusted ones —
// call the API across origins: their requests' answers, errors included,
// carry Access-Control-Allow-Origin for that origin, and their preflights
// are answered 204 with the methods and the Authorization and Content-Type
// headers. No credentials (cookies) are allowed: the console sends its key
// as Authorization. Other origins get no CORS header, and their preflights
// are refused with 403 in the form of the request's surface (WithSurface),
// naming the origin and the setting that trusts one, which a browser
// reports as a failed preflight and a person reads in its network log.
// The port gateway's paths and the sandboxes' sites (SiteSurface) are
// left alone: they answer CORS for the sandboxes' pages themselves. BrowserGuard must trust the same origins.
// It fails on a malformed origin.
func CORS(origins ...string) (func(http.Handler) http.Handler, error) {
	allowed := map[string]bool{}
	for _, o := range origins {
		origin, err := parseOrigin(o)
		if err != nil {
			return nil, fmt.Errorf("web origin %q: %w", o, err)
		}
		allowed[origin] = true
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			origin := r.Header.Get("Origin")
			if origin == "" || sandboxPage(r) {
				next.ServeHTTP(w, r)
				return
			}
			preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
			if o, err := parseOrigin(origin); err != nil || !allowed[o] {
				if preflight {
					writeRequestError(w, r, errdefs.Forbidden("the web origin %q may not call this API across origins: "+
						"an operator may trust it with --trusted-origins (trusted-origins in the configuration file)", origin))
					return
				}
				next.ServeHTTP(w, r)
				return
			}
			h := w.Header()
			h.Add("Vary", "Origin")
			h.Set("Access-Control-Allow-Origin", origin)
			if preflight {
				h.Add("Vary", "Access-Control-Request-Method, Access-Control-Request-Headers")
				h.Set("Access-Control-Allow-Methods", corsMethods)
				h.Set("Access-Control-Allow-Headers", corsHeaders)
				h.Set("Access-Control-Max-Age", "600")
				w.WriteHeader(http.StatusNoContent)
				return
			}
			next.ServeHTTP(w, r)
		})
	}, nil
}
