// Package gateway serves the ports of sandboxes over the daemon's HTTP
// API, as LiteBoxd's gateway does: a request to
//
//	/api/v1/sandbox/{id}/port/{port}/{path...}
//
// with the sandbox's access token in the X-Access-Token header is
// forwarded to 127.0.0.1:{port} inside the sandbox, with the path after the
// port and the query; WebSocket and any other Upgrade is spliced through
// after the handshake. The token is the only credential: API keys do not
// apply here, and the token is removed before the request goes on.
//
// Checks run in LiteBoxd's order: a bad port is 400, then the access
// checks of Sandboxes.Authorize (a missing token 401, an unknown sandbox
// 404, a wrong token 401, a sandbox that is not running 409), a port that
// serves the daemon's services to the sandbox's own programs (its LLM
// proxy and MCP, its egress proxy: they act as the sandbox) 403, and a
// port nothing listens on 502. Error bodies are the API's flat {"error", "code"}.
//
// Routes checks access through the Sandboxes interface (service.Sandboxes,
// where the rules live) and reaches ports through Sandboxes.Dial (the
// agent's DialPort). Another surface that has checked access itself (the
// E2B API's "<port>-<id>.<domain>" hosts) hands its requests to Forward,
// and its CORS preflights to Preflight, so that a request reads the
// sandbox once.
// Connections to a sandbox port are kept for reuse briefly, per sandbox
// and port. Routes is safe for concurrent use.
package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/service"
)

// Sandboxes is what the gateway needs of the daemon: service.Sandboxes.
type Sandboxes interface {
	// Authorize checks that token grants access to the ports of sandbox
	// id and that it runs: nil, or an error classed (and coded) as the
	// client is to be answered. It allows only ids of sandboxes that
	// exist, which alone reach Dial.
	Authorize(ctx context.Context, id, token string) error
	// Dial connects to 127.0.0.1:port inside the sandbox.
	Dial(ctx context.Context, id string, port int) (net.Conn, error)
}

// TokenHeader carries a sandbox's access token.
const TokenHeader = "X-Access-Token"

// Prefix starts every gateway path: a sandbox's accessUrl
// (service.AccessURL) is the daemon's URL, Prefix and the sandbox id. It
// is written out for the API's route test to read; TestPrefix keeps it
// service.GatewayPrefix.
const Prefix = "/api/v1/sandbox/"

var _ Sandboxes = (*service.Sandboxes)(nil)

// responseHeaderTimeout bounds the wait for a sandbox server's answer.
const responseHeaderTimeout = 60 * time.Second

// Routes is the gateway's routes, for httpapi.WithRoutes. Make one with
// New.
type Routes struct {
	sb  Sandboxes
	log *slog.Logger
	tr  *http.Transport
	rp  *httputil.ReverseProxy
}

// New returns the gateway's routes over sb. log may be nil.
func New(sb Sandboxes, log *slog.Logger) *Routes {
	if log == nil {
		log = slog.Default()
	}
	g := &Routes{sb: sb, log: log}
	g.tr = &http.Transport{
		Proxy:                 nil,
		DialContext:           g.dial,
		MaxIdleConns:          64,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: responseHeaderTimeout,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
	}
	g.rp = &httputil.ReverseProxy{
		Rewrite:        g.rewrite,
		Transport:      g.tr,
		ErrorHandler:   g.proxyError,
		ModifyResponse: allowOrigin,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	return g
}

// Register adds the gateway's routes to mux.
func (g *Routes) Register(mux *http.ServeMux) {
	mux.HandleFunc(Prefix+"{id}/port/{port}", g.serve)
	mux.HandleFunc(Prefix+"{id}/port/{port}/{path...}", g.serve)
}

// Close drops the connections kept for reuse.
func (g *Routes) Close() { g.tr.CloseIdleConnections() }

func (g *Routes) serve(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	port, err := strconv.Atoi(r.PathValue("port"))
	if err != nil || port < 1 || port > 65535 {
		writeError(w, errdefs.Invalid("invalid port number"))
		return
	}
	if IsPreflight(r) {
		g.Preflight(w, r)
		return
	}
	// Authorize passes only ids of sandboxes, which are fit to be the host
	// names of pooled connections (see rewrite).
	if err := g.sb.Authorize(r.Context(), id, r.Header.Get(TokenHeader)); err != nil {
		if status, _ := errdefs.HTTPStatus(err); status >= 500 {
			g.log.Warn("gateway: check access", "sandbox", id, "err", err)
		}
		writeError(w, err)
		return
	}
	prefix := Prefix + id + "/port/" + strconv.Itoa(port)
	// The path after the port, as the client escaped it: "", "api", "v1",
	// "sandbox", id, "port", port, rest.
	rest := "/"
	if parts := strings.SplitN(r.URL.EscapedPath(), "/", 8); len(parts) == 8 {
		rest += parts[7]
	}
	g.forward(w, r, target{id: id, port: port, path: rest, unescaped: "/" + r.PathValue("path"), prefix: prefix})
}

// Forward forwards r to port of sandbox id with r's own path and query,
// for a surface that names the sandbox and port otherwise than by the
// gateway's paths and has checked access itself: Forward does not, and id
// must be a sandbox's (Sandboxes.Authorize allowed it, or
// service.CheckAccess a sandbox just read). The sandbox's server sees no
// access token and no forwarded prefix: the client's paths are its own.
func (g *Routes) Forward(w http.ResponseWriter, r *http.Request, id string, port int) {
	g.forward(w, r, target{id: id, port: port, path: r.URL.EscapedPath(), unescaped: r.URL.Path})
}

// target is where a request goes: port of sandbox id, at path (escaped as
// the client escaped it; unescaped should it not parse again), under
// prefix on the client's side ("" for none).
type target struct {
	id, path, unescaped, prefix string
	port                        int
}

// targetKey is the context key of a forwarded request's target.
type targetKey struct{}

func (g *Routes) forward(w http.ResponseWriter, r *http.Request, t target) {
	g.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), targetKey{}, t)))
}

// rewrite points the request at its target's port: the pool's host name
// is "<id>:<port>", which dial takes apart again.
func (g *Routes) rewrite(pr *httputil.ProxyRequest) {
	t, _ := pr.In.Context().Value(targetKey{}).(target) // set by forward
	host := net.JoinHostPort(t.id, strconv.Itoa(t.port))
	if !strings.HasPrefix(t.path, "/") {
		t.path, t.unescaped = "/"+t.path, "/"+t.unescaped
	}
	u, err := url.Parse("http://" + host + t.path)
	if err != nil {
		// The escaped path came from a parsed URL; should it not parse
		// again, take it unescaped.
		u = &url.URL{Scheme: "http", Host: host, Path: t.unescaped}
	}
	u.RawQuery = pr.In.URL.RawQuery
	pr.Out.URL = u
	pr.Out.Host = pr.In.Host
	pr.Out.Header.Del(TokenHeader)
	pr.SetXForwarded()
	pr.Out.Header.Del("X-Forwarded-Prefix")
	if t.prefix != "" {
		pr.Out.Header.Set("X-Forwarded-Prefix", t.prefix)
	}
}

// dial reaches the sandbox port named by addr ("<id>:<port>").
func (g *Routes) dial(ctx context.Context, _, addr string) (net.Conn, error) {
	id, p, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return nil, err
	}
	return g.sb.Dial(ctx, id, port)
}

// proxyError answers a request that could not be forwarded.
func (g *Routes) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return // the client is gone
	}
	var ne net.Error
	switch {
	case errors.Is(err, errdefs.ErrNotFound), errors.Is(err, errdefs.ErrFailedPrecondition):
		// The sandbox went away or stopped since Authorize: Dial said so.
	case errors.Is(err, errdefs.ErrPermissionDenied):
		// A port no one outside the sandbox may reach (its agent's
		// services to the sandbox's own programs).
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		err = fmt.Errorf("sandbox port %s: %w: no answer in time", r.PathValue("port"), errdefs.ErrDeadlineExceeded)
	default:
		// Unavailable, answered as a proxy does: 502, not the class's 503.
		writeJSON(w, http.StatusBadGateway, errdefs.Body(errdefs.Unavailable("sandbox port %s: %v", r.PathValue("port"), err)))
		return
	}
	writeError(w, err)
}

// The CORS answers of LiteBoxd's gateway: any origin, the token header
// allowed.
const corsMethods = "GET, POST, PUT, DELETE, PATCH, HEAD, OPTIONS"

// IsPreflight reports whether r is a CORS preflight: OPTIONS with
// Access-Control-Request-Method, which a browser sends before a request
// across origins that carries a header of its own (an access token), and
// sends without it.
func IsPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
}

// Preflight answers the CORS preflight r (IsPreflight) for a sandbox port,
// as LiteBoxd's gateway does, whatever the sandbox: any origin, the
// methods of corsMethods, the headers asked for (the access token's among
// them). It needs no token, reads no sandbox and reaches none: only the
// request it clears, which carries the token, can.
func (g *Routes) Preflight(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Allow-Methods", corsMethods)
	allow := "Content-Type, Authorization, " + TokenHeader
	if req := r.Header.Get("Access-Control-Request-Headers"); req != "" {
		allow = req
	}
	h.Set("Access-Control-Allow-Headers", allow)
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
}

// allowOrigin lets browsers read answers, unless the sandbox's server
// said otherwise.
func allowOrigin(resp *http.Response) error {
	if resp.Header.Get("Access-Control-Allow-Origin") == "" {
		resp.Header.Set("Access-Control-Allow-Origin", "*")
	}
	return nil
}

// writeError answers with err as errdefs maps it, with the gateway's
// headers.
func writeError(w http.ResponseWriter, err error) {
	status, _ := errdefs.HTTPStatus(err)
	writeJSON(w, status, errdefs.Body(err))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
