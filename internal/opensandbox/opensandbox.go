// Package opensandbox serves agent2env's OpenSandbox-compatible lifecycle
// API, the third surface beside the LiteBoxd-compatible REST API and MCP
// (issue 23): `/v1/sandboxes` create, get, list, delete, pause, resume,
// renew-expiration, endpoints, metadata and snapshots, `/v1/snapshots`
// (Snapshots), and `/v1/metrics/events`, as the stock
// OpenSandbox SDKs and MCP server call them (docs/opensandbox.md says
// exactly what they send and need back).
//
// The package translates the wire and nothing else: every rule about
// sandboxes is the service layer's (package service), reached through the
// small interfaces Sandboxes and Execd, which *service.Sandboxes
// satisfies.
//
// Wire rules kept here: a create answers exactly 202; every error is JSON
// {code, message}; states are OpenSandbox's names (Pending, Running,
// Paused, Stopping, Terminated, Failed: a pause or resume is done, in
// milliseconds, before its 202, so Pausing and Resuming are never seen);
// expiresAt is absent for a sandbox that never expires; an endpoint is
// host[:port]/path without a scheme or a trailing slash, with the
// sandbox's access token in its headers. Requests authenticate with the
// OPEN-SANDBOX-API-KEY header, holding one of the daemon's own API keys;
// its tenant (auth.Tenant) is the request's.
//
// Handler is an http.Handler for the paths under /v1/ and, for the execd
// API the returned endpoints lead to, under ExecdPrefix; the daemon mounts
// it beside its other surfaces (Register). Of execd it serves /ping,
// POST /command in the foreground and, with their status, logs and
// interrupt, in the background (Commands), the files and directories
// routes (Files), and the code contexts and bash sessions on agent2env's
// kernels (Codes), with the sandbox's access token in X-Access-Token (the
// endpoint's headers); the other execd routes answer 501.
package opensandbox

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/errdefs"
)

// HeaderAPIKey carries the API key of a lifecycle request.
const HeaderAPIKey = "OPEN-SANDBOX-API-KEY"

// HeaderAccessToken is the header of an endpoint's headers that carries
// the sandbox's access token (the port gateway's).
const HeaderAccessToken = "X-Access-Token"

// Ports the SDKs resolve on every create: the in-sandbox daemon (execd)
// and the egress sidecar.
const (
	ExecdPort  = 44772
	EgressPort = 18080
)

// ExecdPrefix starts the paths of the execd and egress endpoints this
// surface hands out: ExecdPrefix + id + "/execd" and + "/egress".
const ExecdPrefix = "/opensandbox/"

// DefaultCreateWait is how long a create waits for a pending sandbox to
// run or fail: well under the SDKs' 30 s request timeout.
const DefaultCreateWait = 20 * time.Second

// maxBody bounds a request body: they are small JSON documents.
const maxBody = 1 << 20

// Config is what a Handler serves.
type Config struct {
	// Sandboxes is the sandbox service (required).
	Sandboxes Sandboxes
	// Execd runs commands and moves files for the execd API; nil: its
	// routes answer 501.
	Execd Execd
	// Files moves, removes, searches and edits sandbox files for execd's
	// files and directories routes; nil: they answer 501.
	Files Files
	// Commands runs execd's background commands; nil: they answer 501.
	Commands Commands
	// Codes runs code in agent2env's kernels for execd's /code and
	// /session routes; nil: they answer 501.
	Codes Codes
	// Metrics measures sandboxes for execd's /metrics; nil: it answers
	// 501.
	Metrics Metrics
	// Snapshots saves sandboxes and lists, gets and deletes their
	// snapshots for /snapshots and a create with snapshotId; nil: they
	// answer 501.
	Snapshots Snapshots
	// Keys are the daemon's API keys.
	Keys *auth.Keys
	// RequireKey says requests must carry a valid key (auth.Required).
	RequireKey bool
	// PublicHost is host[:port] clients reach the daemon at, for
	// endpoints; "": the request's Host.
	PublicHost string
	// GatewayPrefix starts the port gateway's paths (gateway.Prefix);
	// an endpoint of a user port is GatewayPrefix + id + "/port/" + port.
	GatewayPrefix string
	// CreateWait bounds how long a create waits for a pending sandbox to
	// run or fail (service.Sandboxes.CreateAndWait); 0: DefaultCreateWait,
	// negative: not at all.
	CreateWait time.Duration
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
}

// Handler serves the OpenSandbox lifecycle API. Make one with New.
type Handler struct {
	cfg         Config
	runs        runs        // code executions in flight
	foregrounds foregrounds // foreground commands, for their status
}

// New returns the handler of cfg.
func New(cfg Config) (*Handler, error) {
	if cfg.Sandboxes == nil {
		return nil, errors.New("opensandbox: Sandboxes is required")
	}
	if cfg.GatewayPrefix == "" {
		return nil, errors.New("opensandbox: GatewayPrefix is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.CreateWait == 0 {
		cfg.CreateWait = DefaultCreateWait
	}
	return &Handler{cfg: cfg}, nil
}

// Register serves the handler's two prefixes on mux: /v1/ (the
// lifecycle API) and ExecdPrefix (the execd API of each sandbox).
func (h *Handler) Register(mux *http.ServeMux) {
	mux.Handle("/v1/", h)
	mux.Handle(ExecdPrefix, h)
}

// Prefixes are the path prefixes Register serves, which authenticate
// requests themselves (not with the daemon's Bearer keys).
var Prefixes = []string{"/v1/", ExecdPrefix}

// Serves reports whether r is for one of Prefixes, as the mux routes it
// (httpapi.Surface).
func (h *Handler) Serves(r *http.Request) bool {
	p := path.Clean(r.URL.EscapedPath()) + "/"
	for _, pre := range Prefixes {
		if strings.HasPrefix(p, pre) {
			return true
		}
	}
	return false
}

// WriteError answers err, which r met outside the handler (a panic, the
// daemon's refusal of its Host), as every error of the API: JSON {code,
// message} (httpapi.Surface).
func (h *Handler) WriteError(w http.ResponseWriter, r *http.Request, err error) { writeError(w, err) }

// ServeHTTP authenticates r and routes it: a lifecycle request by its
// API key, an execd request by its sandbox's access token.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Request-ID", requestID(r))
	if strings.HasPrefix(r.URL.EscapedPath(), ExecdPrefix) {
		h.serveExecd(w, r)
		return
	}
	r, err := h.authenticate(r)
	if err != nil {
		writeError(w, err)
		return
	}
	seg, ok := segments(r.URL)
	if !ok {
		writeError(w, errdefs.NotFound("no such route: %s", r.URL.Path))
		return
	}
	h.route(w, r, seg)
}

// route dispatches by the path's segments after /v1/.
func (h *Handler) route(w http.ResponseWriter, r *http.Request, seg []string) {
	n := len(seg)
	switch {
	case n == 1 && seg[0] == "sandboxes":
		methods(w, r, map[string]http.HandlerFunc{
			http.MethodGet:  h.list,
			http.MethodPost: h.create,
		})
	case n == 2 && seg[0] == "sandboxes":
		id := seg[1]
		methods(w, r, map[string]http.HandlerFunc{
			http.MethodGet:    func(w http.ResponseWriter, r *http.Request) { h.get(w, r, id) },
			http.MethodDelete: func(w http.ResponseWriter, r *http.Request) { h.delete(w, r, id) },
		})
	case n == 3 && seg[0] == "sandboxes":
		h.routeSandbox(w, r, seg[1], seg[2])
	case n == 4 && seg[0] == "sandboxes" && seg[2] == "endpoints":
		id, port := seg[1], seg[3]
		methods(w, r, map[string]http.HandlerFunc{
			http.MethodGet: func(w http.ResponseWriter, r *http.Request) { h.endpoint(w, r, id, port) },
		})
	case n == 2 && seg[0] == "metrics" && seg[1] == "events":
		methods(w, r, map[string]http.HandlerFunc{http.MethodPost: h.metricsEvent})
	case n == 1 && seg[0] == "snapshots":
		methods(w, r, map[string]http.HandlerFunc{http.MethodGet: h.listSnapshots})
	case n == 2 && seg[0] == "snapshots":
		id := seg[1]
		methods(w, r, map[string]http.HandlerFunc{
			http.MethodGet:    func(w http.ResponseWriter, r *http.Request) { h.getSnapshot(w, r, id) },
			http.MethodDelete: func(w http.ResponseWriter, r *http.Request) { h.deleteSnapshot(w, r, id) },
		})
	case seg[0] == "templates" || seg[0] == "pools":
		writeError(w, errdefs.NotImplemented("OpenSandbox %s are not supported by agent2env", seg[0]))
	default:
		writeError(w, errdefs.NotFound("no such route: %s", r.URL.Path))
	}
}

// routeSandbox dispatches /v1/sandboxes/{id}/{op}.
func (h *Handler) routeSandbox(w http.ResponseWriter, r *http.Request, id, op string) {
	switch op {
	case "metadata":
		methods(w, r, map[string]http.HandlerFunc{
			http.MethodPatch: func(w http.ResponseWriter, r *http.Request) { h.patchMetadata(w, r, id) },
		})
	case "renew-expiration":
		methods(w, r, map[string]http.HandlerFunc{
			http.MethodPost: func(w http.ResponseWriter, r *http.Request) { h.renew(w, r, id) },
		})
	case "pause":
		methods(w, r, map[string]http.HandlerFunc{
			http.MethodPost: func(w http.ResponseWriter, r *http.Request) { h.freeze(w, r, id, h.cfg.Sandboxes.Pause) },
		})
	case "resume":
		methods(w, r, map[string]http.HandlerFunc{
			http.MethodPost: func(w http.ResponseWriter, r *http.Request) { h.freeze(w, r, id, h.cfg.Sandboxes.Resume) },
		})
	case "snapshots":
		methods(w, r, map[string]http.HandlerFunc{
			http.MethodPost: func(w http.ResponseWriter, r *http.Request) { h.createSnapshot(w, r, id) },
		})
	case "networkpolicy", "diagnostics":
		writeError(w, errdefs.NotImplemented("sandbox %s are not supported by agent2env", op))
	default:
		writeError(w, errdefs.NotFound("no such route: %s", r.URL.Path))
	}
}

// segments returns the unescaped segments of u's path after /v1/, or
// false when it is not under /v1/ or has an empty or undecodable segment.
func segments(u *url.URL) ([]string, bool) {
	rest, ok := strings.CutPrefix(u.EscapedPath(), "/v1/")
	if !ok || rest == "" {
		return nil, false
	}
	seg := strings.Split(rest, "/")
	for i, s := range seg {
		v, err := url.PathUnescape(s)
		if err != nil || v == "" {
			return nil, false
		}
		seg[i] = v
	}
	return seg, true
}

// methods runs the handler of r's method, or answers 405 naming the
// allowed ones.
func methods(w http.ResponseWriter, r *http.Request, by map[string]http.HandlerFunc) {
	if f, ok := by[r.Method]; ok {
		f(w, r)
		return
	}
	allowed := make([]string, 0, len(by))
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPatch, http.MethodDelete} {
		if by[m] != nil {
			allowed = append(allowed, m)
		}
	}
	w.Header().Set("Allow", strings.Join(allowed, ", "))
	writeErrorStatus(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED",
		"method "+r.Method+" is not allowed here; use "+strings.Join(allowed, " or "))
}

// authenticate checks r's API key when keys are required and gives r the
// key's tenant. The codes are the stock server's.
func (h *Handler) authenticate(r *http.Request) (*http.Request, error) {
	key := r.Header.Get(HeaderAPIKey)
	if h.cfg.RequireKey {
		if key == "" {
			return nil, errdefs.WithCode(auth.ErrNoKey, "MISSING_API_KEY")
		}
		if !h.cfg.Keys.Valid(key) {
			return nil, errdefs.WithCode(auth.ErrInvalidKey, "INVALID_API_KEY")
		}
	}
	if key != "" {
		r = r.WithContext(auth.WithTenant(r.Context(), auth.Tenant(key)))
	}
	return r, nil
}

// requestID returns the request's X-Request-ID, or a new one.
func requestID(r *http.Request) string {
	if id := r.Header.Get("X-Request-ID"); id != "" && len(id) <= 128 {
		return id
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
