// Package httpapi is the daemon's REST edge: it decodes requests, calls the
// manager and image services, and encodes results and errors. Error classes
// (package errdefs) are mapped to HTTP statuses and wire codes here and
// nowhere else.
package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/metrics"
)

// maxJSONBody bounds every JSON request body.
const maxJSONBody = 1 << 20

// Server serves the REST API. Set Ready once the daemon has recovered its
// state; until then /readyz answers 503.
type Server struct {
	mgr        *manager.Manager
	images     Images
	log        *slog.Logger
	ready      atomic.Bool
	routes     []Routes
	middleware []func(http.Handler) http.Handler
	// publicURL is where clients reach the daemon, for accessUrl.
	publicURL string
	metrics   *metrics.Metrics // nil: /metrics not served, nothing recorded
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

// WithPublicURL sets the base URL clients reach the daemon at (e.g.
// http://sandbox.example.com:8080), from which sandboxes' accessUrl is made.
func WithPublicURL(u string) Option {
	return func(s *Server) { s.publicURL = strings.TrimRight(u, "/") }
}

// New returns a Server.
func New(mgr *manager.Manager, images Images, log *slog.Logger, opts ...Option) *Server {
	if log == nil {
		log = slog.Default()
	}
	s := &Server{mgr: mgr, images: images, log: log}
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

	mux.HandleFunc("POST /api/v1/sandboxes", s.createSandbox)
	mux.HandleFunc("GET /api/v1/sandboxes", s.listSandboxes)
	mux.HandleFunc("GET /api/v1/sandboxes/{id}", s.getSandbox)
	mux.HandleFunc("DELETE /api/v1/sandboxes/{id}", s.deleteSandbox)
	mux.HandleFunc("POST /api/v1/sandboxes/{id}/exec", s.exec)
	mux.HandleFunc("POST /api/v1/sandboxes/{id}/exec/stream", s.execStream)
	mux.HandleFunc("POST /api/v1/sandboxes/{id}/files", s.upload)
	mux.HandleFunc("GET /api/v1/sandboxes/{id}/files", s.download)
	mux.HandleFunc("GET /api/v1/sandboxes/{id}/logs", s.logs)
	mux.HandleFunc("POST /api/v1/sandboxes/{id}/stop", s.control("stop", s.mgr.Stop))
	mux.HandleFunc("POST /api/v1/sandboxes/{id}/start", s.control("start", s.mgr.Start))
	mux.HandleFunc("POST /api/v1/sandboxes/{id}/restart", s.control("restart", s.mgr.Restart))

	mux.HandleFunc("GET /api/v1/images", s.listImages)
	mux.HandleFunc("POST /api/v1/images/pull", s.pullImage)
	mux.HandleFunc("POST /api/v1/images/build", s.buildImage)
	mux.HandleFunc("POST /api/v1/images/import", s.importImage)
	mux.HandleFunc("DELETE /api/v1/images/{ref...}", s.removeImage)

	for _, r := range s.routes {
		r.Register(mux)
	}

	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errdefs.WithCode(errdefs.NotFound("no route for %s %s", r.Method, r.URL.Path), api.CodeNotFound))
	})
	var h http.Handler = mux
	for i := len(s.middleware) - 1; i >= 0; i-- {
		h = s.middleware[i](h)
	}
	return s.instrument(mux, s.recoverPanics(h))
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if !s.ready.Load() {
		writeError(w, fmt.Errorf("daemon is still recovering: %w", errdefs.ErrUnavailable))
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, "ready")
}

// recoverPanics turns a handler panic into a 500 instead of a dropped
// connection, and logs it.
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
			writeError(w, fmt.Errorf("internal error"))
		}()
		h.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// classes maps each error class to its status and generic code.
var classes = []struct {
	class  error
	status int
	code   string
}{
	{errdefs.ErrInvalidArgument, http.StatusBadRequest, api.CodeInvalidRequest},
	{errdefs.ErrUnauthenticated, http.StatusUnauthorized, api.CodeUnauthorized},
	{errdefs.ErrPermissionDenied, http.StatusForbidden, api.CodeForbidden},
	{errdefs.ErrNotFound, http.StatusNotFound, api.CodeNotFound},
	{errdefs.ErrAlreadyExists, http.StatusConflict, api.CodeAlreadyExists},
	{errdefs.ErrFailedPrecondition, http.StatusConflict, api.CodeConflict},
	{errdefs.ErrResourceExhausted, http.StatusTooManyRequests, api.CodeLimitExceeded},
	{errdefs.ErrNotImplemented, http.StatusNotImplemented, api.CodeNotImplemented},
	{errdefs.ErrUnavailable, http.StatusServiceUnavailable, api.CodeUnavailable},
	{errdefs.ErrDeadlineExceeded, http.StatusGatewayTimeout, api.CodeTimeout},
}

// statusOf returns the HTTP status and wire code for err.
func statusOf(err error) (int, string) {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return http.StatusRequestEntityTooLarge, api.CodeTooLarge
	}
	code := errdefs.Code(err)
	for _, c := range classes {
		if errors.Is(err, c.class) {
			if code == "" {
				code = c.code
			}
			status := c.status
			if code == api.CodeNoSpace || code == api.CodeInsufficientCapacity {
				status = http.StatusInsufficientStorage
			}
			return status, code
		}
	}
	return http.StatusInternalServerError, api.CodeInternal
}

// writeError writes err as the API's error body, with the fields
// errdefs.WithDetails gave it.
func writeError(w http.ResponseWriter, err error) {
	status, code := statusOf(err)
	details := errdefs.Details(err)
	if details == nil {
		writeJSON(w, status, api.Error{Message: err.Error(), Code: code})
		return
	}
	body := make(map[string]any, len(details)+2)
	for k, v := range details {
		body[k] = v
	}
	body["error"], body["code"] = err.Error(), code
	writeJSON(w, status, body)
}

// decode reads a JSON body into v, rejecting bodies that are too large,
// malformed, of the wrong types or followed by more data.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	return decodeLimit(w, r, v, maxJSONBody)
}

// decodeLimit is decode with a body limit of its own.
func decodeLimit(w http.ResponseWriter, r *http.Request, v any, limit int64) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return errdefs.Invalid("content type %q: want application/json", ct)
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return err
		}
		if errors.Is(err, io.EOF) {
			return errdefs.Invalid("request body is empty")
		}
		return errdefs.Invalid("decode request body: %v", err)
	}
	// dec.More would miss a trailing ']' or '}': only the end may follow.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return err
		}
		return errdefs.Invalid("request body has data after the JSON value")
	}
	return nil
}
