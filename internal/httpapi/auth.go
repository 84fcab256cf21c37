package httpapi

import (
	"context"
	"encoding/base64"
	"net/http"
	"path"
	"strings"

	"github.com/gorilla/websocket"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/llm/gate"
	"github.com/agent2env/agent2env/internal/service"
)

// gatewayPrefix starts the port gateway's paths, which check a
// per-sandbox access token of their own instead of an API key.
const gatewayPrefix = service.GatewayPrefix

// AuthMiddleware demands an API key of keys (`Authorization: Bearer
// <key>`) on every request, for WithMiddleware; a WebSocket upgrade
// without that header may carry the key as a subprotocol entry
// (api.TerminalAuthProtocolPrefix), as browsers cannot set headers. Without one the answer is
// 401 with the error body: "authentication required" when no key was
// sent, "invalid or expired API key" when a wrong one was. Exempt are the
// health and readiness probes (GET), CORS preflights (OPTIONS), the
// port gateway and the LLM proxy (gate.Prefix), which checks keys itself and
// answers in its clients' wire formats, and the paths under each of
// ownAuth: a surface's that authenticates its requests itself (the
// OpenSandbox API's header). A nil or empty keys refuses every request that is not
// exempt.
func AuthMiddleware(keys *auth.Keys, ownAuth ...string) func(http.Handler) http.Handler {
	return AuthMiddlewareWithTickets(keys, nil, ownAuth...)
}

// TicketRedeemer checks, then spends, one-time terminal tickets on a
// sandbox, each returning the tenant the ticket grants
// (service.Sandboxes).
type TicketRedeemer interface {
	CheckTerminalTicket(ticket, sandboxID string) (tenant string, err error)
	RedeemTerminalTicket(ticket, sandboxID string) (tenant string, err error)
}

// ticketKey is the context key of the function that spends the ticket
// which authenticated a request (spendTicket).
type ticketKey struct{}

// AuthMiddlewareWithTickets is AuthMiddleware that also takes, in place
// of a key, a one-time ticket of tickets as ?ticket= on one request
// only: a GET WebSocket upgrade of /api/v1/sandboxes/{id}/exec/interactive
// or of a persistent terminal's .../terminals/{name}/attach (spelt as the
// mux routes it, without Authorization), for sandbox id.
// The request then has the ticket's tenant (auth.WithTenant). A ticket
// that is not valid for it is 401; on any other request ?ticket= is
// ignored and a key is demanded as ever. The ticket is only checked here:
// the terminal's handler spends it (spendTicket) once it has validated
// the request, so that a request refused for its parameters or sandbox
// leaves it for the next.
func AuthMiddlewareWithTickets(keys *auth.Keys, tickets TicketRedeemer, ownAuth ...string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if authExempt(r) || underAny(r, ownAuth) {
				next.ServeHTTP(w, r)
				return
			}
			if id, ticket, ok := terminalTicketRequest(r); ok && tickets != nil {
				tenant, err := tickets.CheckTerminalTicket(ticket, id)
				if err != nil {
					refuseAuth(w, err)
					return
				}
				spend := func() error {
					_, err := tickets.RedeemTerminalTicket(ticket, id)
					return err
				}
				ctx := context.WithValue(auth.WithTenant(r.Context(), tenant), ticketKey{}, spend)
				next.ServeHTTP(w, r.WithContext(ctx))
				return
			}
			if r.Header.Get("Authorization") == "" {
				if key, ok := subprotocolKey(r); ok {
					// A browser's WebSocket, which cannot set headers:
					// the handlers after this one see the key as sent by
					// a program.
					r = r.Clone(r.Context())
					r.Header.Set("Authorization", "Bearer "+key)
				}
			}
			if err := keys.Check(r.Header.Get("Authorization")); err != nil {
				refuseAuth(w, err)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// refuseAuth answers a request that is not authenticated, with err.
func refuseAuth(w http.ResponseWriter, err error) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="agent2env"`)
	writeError(w, err)
}

// spendTicket spends the terminal ticket that authenticated r, if one did
// (AuthMiddlewareWithTickets only checked it). The terminal's handlers
// call it once the request is valid and before they open anything: a
// request refused for its parameters leaves the ticket, one that goes
// through uses it up, and of requests racing with one ticket only one
// goes on (the others: ErrUnauthenticated).
func spendTicket(r *http.Request) error {
	if spend, ok := r.Context().Value(ticketKey{}).(func() error); ok {
		return spend()
	}
	return nil
}

// terminalTicketRequest returns the sandbox and the ticket of a request
// that may be authenticated by a terminal ticket: GET, a WebSocket
// upgrade, no Authorization header, a non-empty ?ticket=, and the path
// /api/v1/sandboxes/{id}/exec/interactive or
// /api/v1/sandboxes/{id}/terminals/{name}/attach exactly as the mux
// serves it (clean, id and name one segment each, without escapes).
func terminalTicketRequest(r *http.Request) (id, ticket string, ok bool) {
	if r.Method != http.MethodGet || !websocket.IsWebSocketUpgrade(r) || r.Header.Get("Authorization") != "" {
		return "", "", false
	}
	q := r.URL.Query()
	if len(q["ticket"]) != 1 || q.Get("ticket") == "" {
		return "", "", false
	}
	p := r.URL.EscapedPath()
	if p != path.Clean(p) || strings.Contains(p, "%") {
		return "", "", false
	}
	rest, ok := strings.CutPrefix(p, "/api/v1/sandboxes/")
	if !ok {
		return "", "", false
	}
	id, ok = strings.CutSuffix(rest, "/exec/interactive")
	if !ok {
		// A persistent terminal's attachment: {id}/terminals/{name}/attach.
		parts := strings.Split(rest, "/")
		ok = len(parts) == 4 && parts[1] == "terminals" && parts[2] != "" && parts[3] == "attach"
		id = parts[0]
	}
	if !ok || id == "" || strings.Contains(id, "/") {
		return "", "", false
	}
	return id, q.Get("ticket"), true
}

// subprotocolKey returns the API key a WebSocket request carries as a
// subprotocol entry (api.TerminalAuthProtocolPrefix followed by the key
// in unpadded base64url), as Kubernetes' API server accepts one.
func subprotocolKey(r *http.Request) (string, bool) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return "", false
	}
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(h, ",") {
			enc, ok := strings.CutPrefix(strings.TrimSpace(p), api.TerminalAuthProtocolPrefix)
			if !ok {
				continue
			}
			key, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(enc, "="))
			if err != nil || len(key) == 0 {
				return "", false
			}
			return string(key), true
		}
	}
	return "", false
}

// authExempt reports whether r may go without an API key. It looks at the
// path as the mux routes it: escaped, then cleaned (the mux redirects
// other spellings). Decoding first would let /api/v1/images/x%2F..%2F..
// %2Fsandbox%2Fy look like the gateway while the mux serves it as an
// image route.
func authExempt(r *http.Request) bool {
	if r.Method == http.MethodOptions || isProbe(r) {
		return true
	}
	p := path.Clean(r.URL.EscapedPath())
	return strings.HasPrefix(p, gatewayPrefix) || strings.HasPrefix(p, gate.Prefix+"/")
}

// underAny reports whether r's path, as the mux routes it, starts with
// one of prefixes (each ending in "/").
func underAny(r *http.Request, prefixes []string) bool {
	p := path.Clean(r.URL.EscapedPath())
	for _, pre := range prefixes {
		if strings.HasPrefix(p+"/", pre) {
			return true
		}
	}
	return false
}

// isProbe reports whether r is a health or readiness probe (GET or HEAD).
func isProbe(r *http.Request) bool {
	switch path.Clean(r.URL.EscapedPath()) {
	case "/health", "/api/v1/health", "/readyz":
		return r.Method == http.MethodGet || r.Method == http.MethodHead
	}
	return false
}
