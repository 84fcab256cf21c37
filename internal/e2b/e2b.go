// Package e2b serves agent2env's E2B-compatible API, the fourth surface
// beside REST, MCP and the OpenSandbox API (issue 25), so that the stock E2B
// SDKs (e2b, e2b-code-interpreter) run unchanged with E2B_API_URL and
// E2B_SANDBOX_URL set to the daemon's address (docs/e2b.md says exactly
// what they send and need back).
//
// Everything arrives on the daemon's one port. The routing rule, applied
// before agent2env's own routes (Wrap):
//
//  1. the control-plane paths /sandboxes… and /v2/sandboxes… are E2B's,
//     and those of its other APIs (unsupportedAPIs), authenticated by
//     X-API-KEY (one of the daemon's API keys);
//  2. a request carrying E2b-Sandbox-Id or E2b-Sandbox-Port is E2B's,
//     whatever its path (E2B's in-sandbox daemon serves /health and
//     /metrics, which agent2env serves too): the headers pick the sandbox
//     and the port, 49983 the in-sandbox daemon (envd), 49999 the code
//     interpreter, any other the port gateway; it authenticates with the
//     sandbox's access token (X-Access-Token, or E2B-Traffic-Access-Token
//     that the code interpreter's SDK sends on every call);
//  3. a request that names no sandbox but carries an access token, on a
//     path of envd's or the code interpreter's, is for the sandbox whose
//     token it is (SDK versions that send no E2b-Sandbox-Id);
//  4. anything else is agent2env's.
//
// Before all four, a Host of E2B's form "<port>-<id>.<domain>" (a
// wildcard DNS name in front of the daemon) names the sandbox and port as
// the headers would, whatever the path. Through that form alone, a user
// port (neither envd's nor the code interpreter's) of a sandbox the E2B
// API made public, as E2B makes them unless a create says
// network.allowPublicTraffic false (MetadataPublicTraffic), answers
// without a token, and its pages are the sandbox's own web site
// (ServesSite), unless the daemon keeps every port private
// (Config.PrivatePorts). A CORS preflight to a user port by that form,
// which a browser sends without the token, is the gateway's to answer,
// public or private: it reads and reaches no sandbox. Any other request
// to it reads the sandbox once, here, and the gateway does not check it
// again (Ports.Forward).
//
// An unknown or stopped sandbox answers 502 "The sandbox was not found",
// as E2B's proxy does: the SDKs' is_running() reads that status.
//
// Served so far (docs/e2b.md §8): the control plane, snapshots included
// (agent2env's own, Snapshots); envd's /health,
// plain /files and its Connect services process.Process and
// filesystem.Filesystem (code generated from E2B's own .proto files, in
// envdpb); the code interpreter's /execute and /contexts; and other ports
// through the port gateway.
//
// The package translates the wire and nothing else: sandboxes, their
// files, background processes and code-interpreter contexts are the
// service layer's (Sandboxes, Files, Procs, Contexts). Its one state of
// its own is the directory watchers of envd's CreateWatcher (inotify
// watches in the sandbox, service.DirWatcher), kept until removed or left
// idle.
package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/gateway"
	"github.com/agent2env/agent2env/internal/jsonbody"
	"github.com/agent2env/agent2env/internal/service"
)

// Headers of the E2B wire.
const (
	HeaderAPIKey        = "X-API-KEY"
	HeaderSandboxID     = "E2b-Sandbox-Id"
	HeaderSandboxPort   = "E2b-Sandbox-Port"
	HeaderAccessToken   = "X-Access-Token"
	HeaderTrafficToken  = "E2B-Traffic-Access-Token"
	HeaderNextToken     = "X-Next-Token"
	headerContentType   = "Content-Type"
	contentTypeJSON     = "application/json"
	contentTypeNDJSON   = "application/x-ndjson"
	contentTypePlain    = "text/plain; charset=utf-8"
	sandboxNotFoundText = "The sandbox was not found"
)

// Ports of the in-sandbox servers the SDKs address.
const (
	EnvdPort        = 49983
	InterpreterPort = 49999
)

// EnvdVersion is the envd version every sandbox reports. The SDKs gate
// features on it (docs/e2b.md §4): ≥ 0.4.0 lets envd pick the default
// user, ≥ 0.5.2 closes stdin, ≥ 0.5.7 uploads as octet-stream (with gzip
// when asked); below 0.6.2, they send no file metadata, which agent2env
// does not keep.
const EnvdVersion = "0.5.7"

// ClientID is the clientID every sandbox reports (E2B's is a node name).
const ClientID = "agent2env"

// DefaultCreateWait bounds how long a create waits for a pending sandbox to
// run or fail.
const DefaultCreateWait = 60 * time.Second

// maxBody bounds a JSON request body.
const maxBody = 1 << 20

// Sandboxes is what the surface needs of the sandbox service.
type Sandboxes interface {
	CreateAndWait(ctx context.Context, req api.CreateSandboxRequest, wait time.Duration) (*api.Sandbox, error)
	Get(ctx context.Context, id string) (*api.Sandbox, error)
	List(ctx context.Context, opts service.ListOptions) (*api.SandboxList, error)
	Delete(ctx context.Context, id string) error
	Renew(ctx context.Context, id string, at time.Time) (*api.Sandbox, error)
	Authorize(ctx context.Context, id, token string) error
	// Pause freezes sandbox id's processes in memory; Resume lets them go
	// on.
	Pause(ctx context.Context, id string) (*api.Sandbox, error)
	Resume(ctx context.Context, id string) (*api.Sandbox, error)
	// Usage measures a running sandbox (GET …/metrics).
	Usage(ctx context.Context, id string) (service.SandboxUsage, error)
}

var _ Sandboxes = (*service.Sandboxes)(nil)

// Contexts is what the code interpreter needs of the context service.
type Contexts interface {
	Create(ctx context.Context, sandboxID string, req api.CreateContextRequest) (*api.Context, error)
	List(ctx context.Context, sandboxID, sessionName string) (*api.ContextList, error)
	Delete(ctx context.Context, sandboxID, id string) (*api.DeleteContextResponse, error)
	Default(ctx context.Context, sandboxID string, req api.CreateContextRequest) (*api.Context, error)
	Restart(ctx context.Context, sandboxID, id string) error
	// StreamChecked checks that context id is in sandboxID and req is
	// valid, and returns the function that runs the code, passing its
	// output to the sink as it comes; the sandbox is one the request's
	// access check (Sandboxes.Authorize) has just found running, which it
	// does not read again.
	StreamChecked(ctx context.Context, sandboxID, id string, req api.ExecuteRequest) (func(context.Context, service.Sink) (*api.ExecuteResponse, error), error)
}

var _ Contexts = (*service.Contexts)(nil)

// Ports is what the surface needs of the port gateway (gateway.Routes).
type Ports interface {
	// Forward forwards r, with its own path and query, to port of
	// sandbox id, which the surface has checked r may reach.
	Forward(w http.ResponseWriter, r *http.Request, id string, port int)
	// Preflight answers the CORS preflight r for a sandbox port, allowing
	// the headers it asks for; it reads and reaches no sandbox.
	Preflight(w http.ResponseWriter, r *http.Request)
}

var _ Ports = (*gateway.Routes)(nil)

// Config is what a Handler serves.
type Config struct {
	// Sandboxes is the sandbox service (required).
	Sandboxes Sandboxes
	// Files serves envd's /files and its filesystem service; nil: they
	// answer 501.
	Files Files
	// Procs serves envd's process service; nil: it answers 501.
	Procs Procs
	// Contexts runs code for the code interpreter; nil: its routes answer
	// 501.
	Contexts Contexts
	// Ports is the port gateway, which serves the other ports; nil: they
	// answer 501.
	Ports Ports
	// Snapshots serves E2B's snapshots and the creates from them; nil:
	// they answer 501.
	Snapshots Snapshots
	// Keys are the daemon's API keys.
	Keys *auth.Keys
	// RequireKey says control-plane requests must carry a valid key.
	RequireKey bool
	// PrivatePorts makes every sandbox port require the sandbox's access
	// token, whatever its create asked (network.allowPublicTraffic).
	PrivatePorts bool
	// CreateWait bounds a create's wait for its sandbox; 0:
	// DefaultCreateWait.
	CreateWait time.Duration
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
}

// Handler serves the E2B API. Make one with New.
type Handler struct {
	cfg    Config
	rpc    http.Handler // envd's Connect services
	tokens tokenIndex   // sandboxes by access token, for requests that name none
	// defaults remembers the default contexts' ids: sandbox id + "\x00" +
	// language -> context id.
	defaults memo
}

// New returns the handler of cfg.
func New(cfg Config) (*Handler, error) {
	if cfg.Sandboxes == nil {
		return nil, errors.New("e2b: Sandboxes is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.CreateWait == 0 {
		cfg.CreateWait = DefaultCreateWait
	}
	return &Handler{cfg: cfg, rpc: envdRPC(cfg)}, nil
}

// Wrap returns next behind the E2B routes: the middleware the daemon puts
// before its own authentication (E2B's requests carry their own).
func (h *Handler) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !h.Serves(r) {
			next.ServeHTTP(w, r)
			return
		}
		if id, port, ok := HostTarget(r.Host); ok {
			// The host names the sandbox and port, whatever the path.
			r = r.Clone(r.Context())
			r.Header.Set(HeaderSandboxID, id)
			r.Header.Set(HeaderSandboxPort, port)
			h.serveSandbox(w, r, true)
			return
		}
		switch {
		case IsControlPlane(r):
			h.serveAPI(w, r)
		case IsSandboxRequest(r):
			h.serveSandbox(w, r, false)
		case isSignedFileURL(r):
			writeError(w, errSignedURL)
		default: // an access token on a path of envd's or the interpreter's
			port, _ := tokenOnlyPort(r)
			h.serveByToken(w, r, port)
		}
	})
}

// Serves reports whether r is the E2B API's, by the package doc's rules:
// its Host, its control-plane path, its headers naming a sandbox, or its
// access token on a path of an in-sandbox server (httpapi.Surface).
func (h *Handler) Serves(r *http.Request) bool {
	_, _, byHost := HostTarget(r.Host)
	_, byToken := tokenOnlyPort(r)
	return byHost || IsControlPlane(r) || IsSandboxRequest(r) || isSignedFileURL(r) || byToken
}

// ServesSite reports whether r is for a sandbox's own web site: a user
// port named by the host form, an origin of its own, whose pages and
// their requests are the sandbox's (httpapi.SiteSurface).
func (h *Handler) ServesSite(r *http.Request) bool {
	_, port, ok := HostTarget(r.Host)
	return ok && userPort(port)
}

// userPort reports whether port, as the host form gives it, is neither
// envd's nor the code interpreter's.
func userPort(port string) bool {
	n, err := strconv.Atoi(port)
	return err == nil && n != EnvdPort && n != InterpreterPort
}

// public reports whether sandbox sb's user ports answer without a token
// through the host form.
func (h *Handler) public(sb *api.Sandbox) bool { return !h.cfg.PrivatePorts && publicTraffic(sb) }

// WriteError answers err, which r met outside the routes above (a panic,
// the daemon's refusal of its Host), as E2B's servers do: a Connect error
// to a call of envd's Connect services, {code, message} to any other
// (httpapi.Surface).
func (h *Handler) WriteError(w http.ResponseWriter, r *http.Request, err error) {
	if isRPCPath(r.URL.Path) {
		_ = rpcErrors.Write(w, r, rpcError(err))
		return
	}
	writeError(w, err)
}

// isSignedFileURL reports whether r is for an SDK's download_url() or
// upload_url(): it names neither the sandbox nor a token, so it never
// reaches one.
func isSignedFileURL(r *http.Request) bool {
	return r.URL.Path == "/files" && r.URL.Query().Has("signature")
}

// IsControlPlane reports whether r is for E2B's control plane: its path
// is /sandboxes, /v2/sandboxes or under either, or under another of the
// roots of E2B's API (/snapshots, unsupportedAPIs), which the SDKs call
// too.
func IsControlPlane(r *http.Request) bool {
	_, ok := apiRoot(r.URL.EscapedPath())
	return ok
}

// unsupportedAPIs are the roots of E2B's API besides the sandboxes' and
// the snapshots', which the SDKs call (Template.build, Volume.create, …)
// and agent2env does not serve, with what each is: they answer 501
// {code, message} rather than fall through to agent2env's own routes,
// whose errors the SDKs cannot read. (A snapshot is a template on E2B:
// DELETE /templates/{id} of a snapshot's id is served.)
var unsupportedAPIs = map[string]string{
	"/templates":         "template builds",
	"/v2/templates":      "template builds",
	"/v3/templates":      "template builds",
	"/default-templates": "default templates",
	"/volumes":           "volumes",
	"/volumecontent":     "volumes",
	"/secrets":           "secrets",
}

// apiRoot returns the root of E2B's API that path p is or is under:
// /sandboxes, /v2/sandboxes, /snapshots or one of unsupportedAPIs.
func apiRoot(p string) (string, bool) {
	for _, root := range []string{"/sandboxes", "/v2/sandboxes", "/snapshots"} {
		if p == root || strings.HasPrefix(p, root+"/") {
			return root, true
		}
	}
	for root := range unsupportedAPIs {
		if p == root || strings.HasPrefix(p, root+"/") {
			return root, true
		}
	}
	return "", false
}

// HostTarget returns the sandbox and port a host of E2B's form
// "<port>-<id>.<domain>[:port]" names, for users who put a wildcard DNS
// name in front of the daemon; false for any other host.
func HostTarget(host string) (id, port string, ok bool) {
	label, rest, dotted := strings.Cut(host, ".")
	if !dotted || rest == "" {
		return "", "", false
	}
	port, id, ok = strings.Cut(label, "-")
	if !ok || port == "" || id == "" || strings.TrimLeft(port, "0123456789") != "" || len(port) > 5 ||
		strings.TrimLeft(id, "abcdefghijklmnopqrstuvwxyz0123456789") != "" {
		return "", "", false
	}
	return id, port, true
}

// IsSandboxRequest reports whether r is for a sandbox's in-sandbox server:
// it names one with E2b-Sandbox-Id or E2b-Sandbox-Port.
func IsSandboxRequest(r *http.Request) bool {
	return r.Header.Get(HeaderSandboxID) != "" || r.Header.Get(HeaderSandboxPort) != ""
}

// errorBody is E2B's Error: code is the HTTP status.
type errorBody struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// writeError answers err as {code, message} with errdefs' status.
func writeError(w http.ResponseWriter, err error) {
	status, _ := errdefs.HTTPStatus(err)
	writeJSON(w, status, errorBody{Code: status, Message: err.Error()})
}

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body, _ = json.Marshal(errorBody{Code: status, Message: "encode response: " + err.Error()})
	}
	w.Header().Set(headerContentType, contentTypeJSON)
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// decodeJSON reads r's JSON body, at most maxBody bytes, into v; an empty
// body leaves v as it is when empty is allowed.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any, emptyOK bool) error {
	return decodeJSONUpTo(w, r, v, emptyOK, maxBody)
}

// decodeJSONUpTo is decodeJSON for a body of at most limit bytes.
func decodeJSONUpTo(w http.ResponseWriter, r *http.Request, v any, emptyOK bool, limit int64) error {
	if ct := r.Header.Get(headerContentType); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != contentTypeJSON {
			return errdefs.Invalid("the body must be application/json, not %q", ct)
		}
	} else if !emptyOK {
		return errdefs.Invalid("the body must be application/json")
	}
	err := jsonbody.Decode(w, r, v, limit, false)
	var tooBig *http.MaxBytesError
	switch {
	case err == nil, errors.As(err, &tooBig):
		return err
	case errors.Is(err, jsonbody.ErrMore):
		return errdefs.Invalid("%v", err)
	case emptyOK && errors.Is(err, io.EOF):
		return nil
	}
	return errdefs.Invalid("the body is not valid JSON of the expected shape: %v", err)
}

// authenticate checks a control-plane request's API key when keys are
// required, and gives r the key's tenant.
func (h *Handler) authenticate(r *http.Request) (*http.Request, error) {
	key := r.Header.Get(HeaderAPIKey)
	if h.cfg.RequireKey {
		if key == "" {
			return nil, auth.ErrNoKey
		}
		if !h.cfg.Keys.Valid(key) {
			return nil, auth.ErrInvalidKey
		}
	}
	if key != "" {
		r = r.WithContext(auth.WithTenant(r.Context(), auth.Tenant(key)))
	}
	return r, nil
}

// sandboxPort returns the port E2b-Sandbox-Port names; none is envd's.
func sandboxPort(r *http.Request) (int, error) {
	raw := r.Header.Get(HeaderSandboxPort)
	if raw == "" {
		return EnvdPort, nil
	}
	port, err := strconv.Atoi(raw)
	if err != nil || port < 1 || port > 65535 {
		return 0, errdefs.Invalid("%s %q: want a port number from 1 to 65535", HeaderSandboxPort, raw)
	}
	return port, nil
}

// writeSandboxGone answers 502 "The sandbox was not found", as E2B's proxy
// does for a sandbox that does not exist or no longer runs.
func writeSandboxGone(w http.ResponseWriter, id string) {
	writeSandboxUnavailable(w, id, sandboxNotFoundText)
}

// writeSandboxUnavailable answers 502 with message, which must hold "was
// not found" for the SDKs to raise their not-running exception (and
// is_running() to say false).
func writeSandboxUnavailable(w http.ResponseWriter, id, message string) {
	writeJSON(w, http.StatusBadGateway, proxyError{id, message, http.StatusBadGateway})
}

// proxyError is the body of E2B's proxy's refusals.
type proxyError struct {
	SandboxID string `json:"sandboxId"`
	Message   string `json:"message"`
	Code      int    `json:"code"`
}

// writeTrafficTokenRefused answers a request for a user port of sandbox
// id without its traffic token (missing) or with another: 403 with the
// body and message of E2B's proxy. (envd's and the interpreter's ports
// answer 401 for their access token, as envd does.)
func writeTrafficTokenRefused(w http.ResponseWriter, id string, missing bool) {
	header := strings.ToLower(HeaderTrafficToken)
	message := "Sandbox is secured with traffic access token. Provided token in header '" + header + "' is invalid"
	if missing {
		message = "Sandbox is secured with traffic access token. Token header '" + header + "' is missing"
	}
	writeJSON(w, http.StatusForbidden, proxyError{id, message, http.StatusForbidden})
}

// serveSandbox routes a request for an in-sandbox server by its headers,
// which its host gave when byHost.
func (h *Handler) serveSandbox(w http.ResponseWriter, r *http.Request, byHost bool) {
	id := r.Header.Get(HeaderSandboxID)
	port, err := sandboxPort(r)
	if err == nil && id == "" {
		err = errdefs.Invalid("%s is required with %s", HeaderSandboxID, HeaderSandboxPort)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	token := requestToken(r)
	site := byHost && port != EnvdPort && port != InterpreterPort
	if site && gateway.IsPreflight(r) {
		// A page on another origin that sends the token is preflighted
		// first, and a browser never puts the token on a preflight: the
		// gateway answers it, allowing the token's header, and nothing
		// reaches the sandbox before the request that carries the token.
		if h.portsServed(w) {
			h.cfg.Ports.Preflight(w, r)
		}
		return
	}
	// The sandbox is read once: for a user port named by the host, whose
	// details say whether it is public, by Get; for any other, by the
	// access check.
	var sb *api.Sandbox
	if site {
		sb, err = h.cfg.Sandboxes.Get(r.Context(), id)
		if err == nil {
			if h.public(sb) {
				// A public port needs no token; it still must run.
				token = sb.AccessToken
			}
			err = service.CheckAccess(sb, token)
		}
	} else {
		err = h.cfg.Sandboxes.Authorize(r.Context(), id, token)
	}
	if err != nil {
		h.tokens.forget(token)
		if site {
			// A page on another origin reads why (401, 502), as it reads
			// the port's own answers.
			w.Header().Set("Access-Control-Allow-Origin", "*")
		}
		if errors.Is(err, errdefs.ErrFailedPrecondition) {
			// The token is right; say why the sandbox does not answer
			// when it is paused, as E2B's proxy cannot.
			if sb == nil {
				sb, _ = h.cfg.Sandboxes.Get(r.Context(), id)
			}
			if sb != nil && sb.Status == api.StatusPaused {
				writeSandboxUnavailable(w, id, sandboxNotFoundText+": sandbox "+id+" is paused; connect to it (Sandbox.connect) to resume it")
				return
			}
		}
		if errors.Is(err, errdefs.ErrNotFound) || errors.Is(err, errdefs.ErrFailedPrecondition) {
			writeSandboxGone(w, id) // as E2B's proxy answers, a browser too
			return
		}
		if errors.Is(err, errdefs.ErrUnauthenticated) && port != EnvdPort && port != InterpreterPort {
			writeTrafficTokenRefused(w, id, token == "")
			return
		}
		writeError(w, err)
		return
	}
	switch port {
	case EnvdPort:
		h.serveEnvd(w, r, id)
	case InterpreterPort:
		h.serveInterpreter(w, r, id)
	default:
		if h.portsServed(w) {
			h.servePort(w, r, id, port)
		}
	}
}

// portsServed reports whether the port gateway serves the ports other
// than envd's and the interpreter's, and answers 501 when not.
func (h *Handler) portsServed(w http.ResponseWriter) bool {
	if h.cfg.Ports == nil {
		writeError(w, errdefs.NotImplemented("ports other than 49983 and 49999 are not served here"))
	}
	return h.cfg.Ports != nil
}

// servePort hands a request for a user port, its access checked, to the
// port gateway, without the headers that named the sandbox or held its
// tokens.
func (h *Handler) servePort(w http.ResponseWriter, r *http.Request, id string, port int) {
	r2 := r.Clone(r.Context())
	for _, k := range []string{HeaderSandboxID, HeaderSandboxPort, HeaderTrafficToken, HeaderAccessToken} {
		r2.Header.Del(k)
	}
	h.cfg.Ports.Forward(w, r2, id, port)
}
