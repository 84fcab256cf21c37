// Package httpapi is the daemon's REST edge: it decodes requests, calls the
// services (package service, and the domain services that speak api:
// template, prepull, session, run and the LLM gate's keys; the rule is in
// package service's doc), and encodes results and errors. No rule of the
// API lives here: a handler decodes, calls one service method and encodes.
// Errors are answered with errdefs.WriteHTTP, the one mapping of error
// classes to HTTP statuses and wire codes; those of a request another
// surface on the port serves (WithSurface), in that surface's form.
// NewServer and LimitListener bound the connections of the API's server
// and of each sandbox's channel.
package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"sync/atomic"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/buildinfo"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/jsonbody"
	"github.com/agent2env/agent2env/internal/metrics"
	"github.com/agent2env/agent2env/internal/service"
)

// maxJSONBody bounds every JSON request body.
const maxJSONBody = 1 << 20

// Server serves the REST API. Set Ready once the daemon has recovered its
// state; until then, and while a ReadyCheck fails, /readyz answers 503.
type Server struct {
	sandboxes  *service.Sandboxes
	images     *service.Images
	log        *slog.Logger
	ready      atomic.Bool
	routes     []Routes
	middleware []func(http.Handler) http.Handler
	// surfaces answer the errors of their requests (WithSurface).
	surfaces []Surface
	metrics  *metrics.Metrics // nil: /metrics not served, nothing recorded
	// readyChecks are what /readyz checks besides ready (readiness.go).
	readyChecks []ReadyCheck
}

// Routes is a group of API routes served beside the sandbox routes, such
// as the template or prepull API.
type Routes interface {
	Register(mux *http.ServeMux)
}

// Option configures a Server.
type Option func(*Server)

// WithRoutes serves the routes of r as well.
func WithRoutes(r Routes) Option { return func(s *Server) { s.routes = append(s.routes, r) } }

// WithMiddleware wraps every route (after panic recovery, before routing);
// the first given is the outermost.
func WithMiddleware(mw func(http.Handler) http.Handler) Option {
	return func(s *Server) { s.middleware = append(s.middleware, mw) }
}

// New returns a Server of the sandbox and image services.
func New(sandboxes *service.Sandboxes, images *service.Images, log *slog.Logger, opts ...Option) *Server {
	if log == nil {
		log = slog.Default()
	}
	s := &Server{sandboxes: sandboxes, images: images, log: log}
	for _, o := range opts {
		o(s)
	}
	return s
}

// SetReady marks the daemon ready (or not) for /readyz.
func (s *Server) SetReady(ready bool) { s.ready.Store(ready) }

// Handler returns the API's routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	health := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "OK")
	}
	mux.HandleFunc("GET /health", health)
	mux.HandleFunc("GET /api/v1/health", health)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /api/v1/version", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, buildinfo.Get())
	})
	mux.HandleFunc("GET /api/v1/capabilities", s.capabilities)

	mux.HandleFunc("POST /api/v1/sandboxes", s.createSandbox)
	mux.HandleFunc("GET /api/v1/sandboxes", s.listSandboxes)
	mux.HandleFunc("GET /api/v1/sandboxes/{id}", s.getSandbox)
	mux.HandleFunc("DELETE /api/v1/sandboxes/{id}", s.deleteSandbox)
	mux.HandleFunc("POST /api/v1/sandboxes/{id}/exec", s.exec)
	mux.HandleFunc("POST /api/v1/sandboxes/{id}/exec/stream", s.execStream)
	mux.HandleFunc("GET /api/v1/sandboxes/{id}/exec/interactive", s.terminal)
	mux.HandleFunc("POST /api/v1/sandboxes/{id}/exec/interactive/ticket", s.terminalTicket)
	s.registerTerminals(mux)
	s.registerFileList(mux)
	mux.HandleFunc("POST /api/v1/sandboxes/{id}/files", s.upload)
	mux.HandleFunc("GET /api/v1/sandboxes/{id}/files", s.download)
	mux.HandleFunc("GET /api/v1/sandboxes/{id}/logs", s.logs)
	mux.HandleFunc("POST /api/v1/sandboxes/{id}/stop", s.control("stop", s.sandboxes.Stop))
	mux.HandleFunc("POST /api/v1/sandboxes/{id}/start", s.control("start", s.sandboxes.Start))
	mux.HandleFunc("POST /api/v1/sandboxes/{id}/restart", s.control("restart", s.sandboxes.Restart))
	mux.HandleFunc("POST /api/v1/sandboxes/{id}/pause", s.sandboxOp(s.sandboxes.Pause))
	mux.HandleFunc("POST /api/v1/sandboxes/{id}/resume", s.sandboxOp(s.sandboxes.Resume))
	s.registerSnapshots(mux)

	mux.HandleFunc("GET /api/v1/images", s.listImages)
	mux.HandleFunc("POST /api/v1/images/pull", s.imageOp(s.images.Pull))
	mux.HandleFunc("POST /api/v1/images/build", s.imageOp(s.images.Build))
	mux.HandleFunc("POST /api/v1/images/import", s.importImage)
	mux.HandleFunc("GET /api/v1/images/follow", s.followImage)
	mux.HandleFunc("DELETE /api/v1/images/{ref...}", s.removeImage)

	for _, r := range s.routes {
		r.Register(mux)
	}

	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errdefs.WithCode(errdefs.NotFound("no route for %s %s", r.Method, r.URL.Path), api.CodeNotFound))
	})
	var h http.Handler = requireMediaTypes(mux)
	for i := len(s.middleware) - 1; i >= 0; i-- {
		h = s.middleware[i](h)
	}
	return s.instrument(mux, s.markSurfaces(s.recoverPanics(h)))
}

// recoverPanics turns a handler panic into a 500 in the request's form
// (writeRequestError) instead of a dropped connection, and logs it.
func (s *Server) recoverPanics(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				// The deliberate way to cut a response short: the server
				// must see it to break the connection, or a truncated
				// stream would look complete to the client.
				panic(v)
			}
			s.log.Error("handler panic", "method", r.Method, "path", r.URL.Path, "panic", v)
			writeRequestError(w, r, fmt.Errorf("internal error"))
		}()
		h.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers with err, mapped by errdefs' one table.
func writeError(w http.ResponseWriter, err error) { errdefs.WriteHTTP(w, err) }

// decode reads a JSON body into v, rejecting bodies that are too large,
// malformed, of the wrong types or followed by more data.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	return decodeLimit(w, r, v, maxJSONBody)
}

// decodeLimit is decode with a body limit of its own.
func decodeLimit(w http.ResponseWriter, r *http.Request, v any, limit int64) error {
	return decodeBody(w, r, v, limit, false)
}

// decodeStrict is decodeLimit refusing a member v has no field for, with
// a 400 naming it, so that a misspelt field is not silently left out.
// Only agent2env's own additions decode so: the LiteBoxd-compatible
// routes ignore unknown members, as LiteBoxd does.
func decodeStrict(w http.ResponseWriter, r *http.Request, v any, limit int64) error {
	return decodeBody(w, r, v, limit, true)
}

// errEmptyBody is decodeBody's error for a body with nothing in it.
var errEmptyBody = errdefs.Invalid("request body is empty")

// decodeBody is decodeLimit, refusing unknown members when strict.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, limit int64, strict bool) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return errdefs.Invalid("content type %q: want application/json", ct)
		}
	}
	err := jsonbody.Decode(w, r, v, limit, strict)
	var tooBig *http.MaxBytesError
	switch {
	case err == nil, errors.As(err, &tooBig):
		return err
	case errors.Is(err, io.EOF):
		return errEmptyBody
	case errors.Is(err, jsonbody.ErrMore):
		return errdefs.Invalid("request body has data after the JSON value")
	case errors.As(err, new(*jsonbody.SyntaxError)):
		return errdefs.Invalid("request body is not valid JSON: %v", err)
	case errors.As(err, new(*jsonbody.KindError)):
		return errdefs.Invalid("%v", err) // "a.b must be an integer (got string)"
	}
	return errdefs.Invalid("request body: %v", err)
}
