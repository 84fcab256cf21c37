package httpapi

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
)

// BrowserConfig says which names the daemon answers to and which web
// origins may use its API, for BrowserGuard.
type BrowserConfig struct {
	// Listen is the address the daemon listens on ("127.0.0.1:8080",
	// ":8080"). Its host is accepted; a wildcard accepts every IP literal
	// and the machine's host name.
	Listen string
	// PublicURL is where clients reach the daemon; its host is accepted.
	PublicURL string
	// AllowedHosts are more Host header values to accept: names or IP
	// addresses, without port (any port goes); "*.example.com", every
	// name under example.com (a wildcard DNS name in front of the daemon,
	// as E2B's sandbox hosts want). "*" accepts every host, which gives
	// up the protection against DNS rebinding.
	AllowedHosts []string
	// TrustedOrigins are web origins ("https://ui.example.com") whose pages
	// may use the API.
	TrustedOrigins []string
}

// BrowserGuard returns a middleware (for WithMiddleware, outside
// AuthMiddleware) that keeps web pages from driving the API. The daemon
// serves no pages of its own, and without API keys on loopback it trusts
// whoever can reach it, which a page in the user's browser can:
//
//   - A request whose Host names none of the daemon's names is refused with
//     421: a page that makes its own name resolve to the daemon's address
//     (DNS rebinding) sends that name. Loopback names and addresses, the
//     listen address, the public URL's host and AllowedHosts are the
//     daemon's names. The probes are exempt.
//   - Outside the port gateway and the sandboxes' sites of a SiteSurface
//     (whose pages are the sandboxes' and which check their own tokens,
//     if any), a request a browser makes for a page
//     (Sec-Fetch-Site is same-origin, same-site or cross-site: everything
//     but the address bar) or a state-changing one carrying an Origin is
//     refused with 403, unless the origin is trusted. The daemon's own
//     origin is not: the pages there are sandboxes', served by the
//     gateway. Browsers too old to send Sec-Fetch-Site still send Origin on
//     state-changing requests; safe ones cannot read the answer across
//     origins. A WebSocket, which can, is refused on its Origin alone.
//
// A refusal takes the form of the request's surface (WithSurface).
// It fails on a malformed TrustedOrigins entry.
func BrowserGuard(cfg BrowserConfig) (func(http.Handler) http.Handler, error) {
	g := &browserGuard{hosts: map[string]bool{}, origins: map[string]bool{}}
	if host, _, err := net.SplitHostPort(cfg.Listen); err == nil {
		if a, ok := hostAddr(host); host == "" || ok && a.IsUnspecified() {
			g.anyIP = true
			if name, err := os.Hostname(); err == nil {
				g.hosts[normalizeHost(name)] = true
			}
		} else {
			g.hosts[normalizeHost(host)] = true
		}
	}
	if u, err := url.Parse(cfg.PublicURL); err == nil && u.Host != "" {
		g.hosts[normalizeHost(u.Hostname())] = true
	}
	for _, h := range cfg.AllowedHosts {
		switch h = strings.TrimSpace(h); {
		case h == "*":
			g.anyHost = true
		case strings.HasPrefix(h, "*."):
			g.suffixes = append(g.suffixes, "."+normalizeHost(h[2:]))
		case h != "":
			g.hosts[normalizeHost(h)] = true
		}
	}
	for _, o := range cfg.TrustedOrigins {
		origin, err := parseOrigin(o)
		if err != nil {
			return nil, fmt.Errorf("trusted origin %q: %w", o, err)
		}
		g.origins[origin] = true
	}
	return g.wrap, nil
}

type browserGuard struct {
	hosts   map[string]bool // normalized names and addresses
	anyIP   bool            // every IP literal (listening on a wildcard)
	anyHost bool
	// suffixes are ".example.com" for each "*.example.com" allowed.
	suffixes []string
	origins  map[string]bool // scheme://host[:port], lower case, default port dropped
}

func (g *browserGuard) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isProbe(r) {
			next.ServeHTTP(w, r)
			return
		}
		if !g.hostAllowed(r.Host) {
			writeRequestError(w, r, errdefs.WithCode(errdefs.Invalid(
				"host %q is not a name of this daemon (a web page may be rebinding its DNS name to it): "+
					"reach the daemon by its address or public URL, or add the name to the allowed hosts", r.Host), api.CodeMisdirected))
			return
		}
		if msg := g.pageRefusal(r); msg != "" {
			writeRequestError(w, r, errdefs.Forbidden("%s", msg))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostAllowed reports whether the Host header names this daemon.
func (g *browserGuard) hostAllowed(hostport string) bool {
	if g.anyHost || hostport == "" {
		return true // an HTTP/1.0 program; browsers always send Host
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = normalizeHost(host)
	if a, ok := hostAddr(host); ok {
		return a.IsLoopback() || g.anyIP || g.hosts[a.String()]
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") || g.hosts[host] {
		return true
	}
	return slices.ContainsFunc(g.suffixes, func(suffix string) bool { return strings.HasSuffix(host, suffix) })
}

// pageRefusal says why r, made by a browser for a web page, is refused,
// or returns "".
func (g *browserGuard) pageRefusal(r *http.Request) string {
	if r.Method == http.MethodOptions || sandboxPage(r) {
		return ""
	}
	origin := r.Header.Get("Origin")
	if origin != "" {
		if o, err := parseOrigin(origin); err == nil && g.origins[o] {
			return ""
		}
	}
	const advice = "the API is not for web pages; an operator may trust a web origin explicitly"
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "none" {
		return fmt.Sprintf("refused a request a browser made for a web page (Sec-Fetch-Site: %s, Origin: %q): %s", site, origin, advice)
	}
	if origin != "" && r.Method != http.MethodGet && r.Method != http.MethodHead {
		return fmt.Sprintf("refused a %s request from the web origin %q: %s", r.Method, origin, advice)
	}
	if origin != "" && strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		// A WebSocket is not bound by the same-origin policy: a page's
		// socket reads every answer.
		return fmt.Sprintf("refused a WebSocket from the web origin %q: %s", origin, advice)
	}
	return ""
}

// hostAddr parses an IP literal, bracketed or not.
func hostAddr(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// normalizeHost lower-cases a name and drops a final dot; addresses become
// their canonical text.
func normalizeHost(s string) string {
	s = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), ".")
	if a, ok := hostAddr(s); ok {
		return a.String()
	}
	return s
}

// parseOrigin returns an origin as scheme://host[:port] in lower case,
// without a default port.
func parseOrigin(s string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("want scheme://host[:port]")
	}
	host, port := normalizeHost(u.Hostname()), u.Port()
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port == "" || u.Scheme == "http" && port == "80" || u.Scheme == "https" && port == "443" {
		return u.Scheme + "://" + host, nil
	}
	return u.Scheme + "://" + host + ":" + port, nil
}
