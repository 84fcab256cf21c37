package httpapi

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/api"
)

// browserEnv serves the API behind BrowserGuard(cfg), with a stand-in
// for the port gateway.
func browserEnv(t *testing.T, cfg BrowserConfig) *env {
	t.Helper()
	guard, err := BrowserGuard(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return newEnv(t, envOptions{opts: []Option{WithMiddleware(guard), WithRoutes(fakeGateway{})}})
}

// A web page must not drive the API: not by DNS rebinding (a name of the
// attacker's that resolves to the daemon: the Host header gives it away,
// 421), nor by sending requests from its own origin (403), nor from a page
// the gateway served in the daemon's origin (Sec-Fetch-Site: same-origin).
// Nothing is created or changed by a refused request.
func TestBrowserGuardHost(t *testing.T) {
	hostname, _ := os.Hostname()
	e := browserEnv(t, BrowserConfig{
		Listen: "127.0.0.1:8080", PublicURL: "https://sandbox.example.com/prefix",
		AllowedHosts: []string{"Alt.Example.com", "192.0.2.7", "*.Sandboxes.Example.org."},
	})
	wild := browserEnv(t, BrowserConfig{Listen: ":8080"})
	tests := []struct {
		e      *env
		host   string
		path   string
		status int
	}{
		{e, "127.0.0.1:8080", "", http.StatusOK},
		{e, "127.0.0.1", "", http.StatusOK},
		{e, "127.0.0.2:9", "", http.StatusOK},
		{e, "localhost:9999", "", http.StatusOK},
		{e, "LOCALHOST.", "", http.StatusOK},
		{e, "api.localhost:8080", "", http.StatusOK},
		{e, "[::1]:8080", "", http.StatusOK},
		{e, "[::ffff:127.0.0.1]:8080", "", http.StatusOK},
		{e, "sandbox.example.com", "", http.StatusOK},
		{e, "sandbox.example.com:443", "", http.StatusOK},
		{e, "alt.example.com:8080", "", http.StatusOK},
		{e, "192.0.2.7:1", "", http.StatusOK},
		{e, "evil.example.com:8080", "", http.StatusMisdirectedRequest},
		{e, "127.0.0.1.nip.io:8080", "", http.StatusMisdirectedRequest},
		{e, "localhost.evil.example.com", "", http.StatusMisdirectedRequest},
		{e, "192.0.2.8:8080", "", http.StatusMisdirectedRequest},
		// "*.sandboxes.example.org": every name under it, not itself.
		{e, "3000-abc123.sandboxes.example.org:8080", "", http.StatusOK},
		{e, "a.b.SANDBOXES.example.org.", "", http.StatusOK},
		{e, "sandboxes.example.org", "", http.StatusMisdirectedRequest},
		{e, "3000-abc123.evilsandboxes.example.org", "", http.StatusMisdirectedRequest},
		{e, "sandboxes.example.org.evil.example.com", "", http.StatusMisdirectedRequest},
		{e, "evil.example.com", "/api/v1/sandbox/x/port/80/", http.StatusMisdirectedRequest},
		{e, "evil.example.com", "/api/v1/templates", http.StatusMisdirectedRequest},
		// The probes answer whatever the name.
		{e, "evil.example.com", "/health", http.StatusOK},
		{e, "evil.example.com", "/readyz", http.StatusOK},
		// Listening on every address, the daemon answers to any IP literal
		// (no page can be fetched from one but the daemon's) and its host
		// name, and still not to other names.
		{wild, "192.0.2.99:8080", "", http.StatusOK},
		{wild, "[2001:db8::1]:8080", "", http.StatusOK},
		{wild, hostname + ":8080", "", http.StatusOK},
		{wild, "evil.example.com:8080", "", http.StatusMisdirectedRequest},
	}
	for _, tt := range tests {
		path := tt.path
		if path == "" {
			path = "/api/v1/sandboxes"
		}
		t.Run(tt.host+path, func(t *testing.T) {
			req := httptest.NewRequest("GET", path, nil)
			req.Host = tt.host
			rec := httptest.NewRecorder()
			tt.e.h.ServeHTTP(rec, req)
			resp := response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
			switch {
			case tt.status == http.StatusMisdirectedRequest:
				checkError(t, resp, tt.status, api.CodeMisdirected)
			case rec.Code == http.StatusMisdirectedRequest:
				t.Errorf("status %d, want %d (%s)", rec.Code, tt.status, rec.Body)
			}
		})
	}
}

func TestBrowserGuardOrigin(t *testing.T) {
	e := browserEnv(t, BrowserConfig{Listen: "127.0.0.1:8080", TrustedOrigins: []string{"https://UI.example.com:443/"}})
	create := `{"image":"alpine"}`
	tests := []struct {
		name    string
		method  string
		path    string
		header  map[string]string
		refused bool
	}{
		{"cross-site POST", "POST", "/api/v1/sandboxes", map[string]string{"Origin": "https://evil.example.com"}, true},
		{"cross-site POST, fetch metadata", "POST", "/api/v1/sandboxes", map[string]string{"Origin": "https://evil.example.com", "Sec-Fetch-Site": "cross-site"}, true},
		{"opaque origin", "POST", "/api/v1/sandboxes", map[string]string{"Origin": "null"}, true},
		{"same site (another local port)", "POST", "/api/v1/sandboxes", map[string]string{"Origin": "http://localhost:3000", "Sec-Fetch-Site": "same-site"}, true},
		// The daemon serves no pages of its own: a page in its origin is a
		// sandbox's, served by the port gateway.
		{"the daemon's own origin", "POST", "/api/v1/sandboxes", map[string]string{"Origin": "http://127.0.0.1:8080"}, true},
		{"same-origin fetch", "GET", "/api/v1/sandboxes", map[string]string{"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors"}, true},
		{"cross-site read", "GET", "/api/v1/sandboxes", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}, true},
		{"cross-site DELETE", "DELETE", "/api/v1/images/alpine", map[string]string{"Origin": "https://evil.example.com"}, true},
		{"cross-site form import", "POST", "/api/v1/templates/import", map[string]string{"Origin": "https://evil.example.com", "Content-Type": "application/x-www-form-urlencoded"}, true},
		// A WebSocket reads its answers whatever the origin: refused on
		// its Origin alone, fetch metadata or not.
		{"cross-origin WebSocket", "GET", "/api/v1/sandboxes/x/exec/interactive", map[string]string{"Origin": "https://evil.example.com", "Upgrade": "websocket", "Connection": "Upgrade"}, true},
		{"a program's WebSocket", "GET", "/api/v1/sandboxes", map[string]string{"Upgrade": "websocket", "Connection": "Upgrade"}, false},
		{"trusted-origin WebSocket", "GET", "/api/v1/sandboxes", map[string]string{"Origin": "https://ui.example.com", "Upgrade": "websocket", "Connection": "Upgrade"}, false},
		// Allowed: programs (no Origin, no fetch metadata), the address
		// bar, a trusted origin, preflights and the gateway.
		{"a program", "POST", "/api/v1/sandboxes", nil, false},
		{"typed into the address bar", "GET", "/api/v1/sandboxes", map[string]string{"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate"}, false},
		{"safe request with an Origin, no fetch metadata", "GET", "/api/v1/sandboxes", map[string]string{"Origin": "https://evil.example.com"}, false},
		{"trusted origin", "POST", "/api/v1/sandboxes", map[string]string{"Origin": "https://ui.example.com", "Sec-Fetch-Site": "cross-site"}, false},
		{"preflight", "OPTIONS", "/api/v1/sandboxes", map[string]string{"Origin": "https://evil.example.com", "Sec-Fetch-Site": "cross-site"}, false},
		{"gateway", "POST", "/api/v1/sandbox/x/port/80/", map[string]string{"Origin": "https://evil.example.com", "Sec-Fetch-Site": "cross-site"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(e.ids(t))
			body := ""
			if tt.method == "POST" {
				body = create
			}
			req := httptest.NewRequest(tt.method, tt.path, strings.NewReader(body))
			req.Host = "127.0.0.1:8080"
			req.Header.Set("Content-Type", "application/json")
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			e.h.ServeHTTP(rec, req)
			resp := response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
			if tt.refused {
				checkError(t, resp, http.StatusForbidden, api.CodeForbidden)
				if after := len(e.ids(t)); after != before {
					t.Errorf("a refused request made a sandbox")
				}
			} else if rec.Code == http.StatusForbidden {
				t.Errorf("refused: %s", rec.Body)
			}
		})
	}
	if _, err := BrowserGuard(BrowserConfig{TrustedOrigins: []string{"ui.example.com"}}); err == nil {
		t.Error("an origin without a scheme was accepted")
	}
}

// FuzzBrowserGuard: whatever the headers, a request either reaches the
// API with a Host that names the daemon and, if state-changing, no
// untrusted Origin, or is refused with 421 or 403 and the error body.
func FuzzBrowserGuard(f *testing.F) {
	f.Add("POST", "127.0.0.1:8080", "https://evil.example.com", "cross-site")
	f.Add("GET", "[::1]", "", "none")
	f.Add("DELETE", "LOCALHOST.:1", "null", "")
	f.Add("PUT", "evil.localhost.example.com", "https://ui.example.com:443", "same-origin")
	f.Add("GET", "[fe80::1%25lo]:80", "http://[::1]", "same-site")
	guard, err := BrowserGuard(BrowserConfig{Listen: "127.0.0.1:8080", PublicURL: "https://sandbox.example.com",
		TrustedOrigins: []string{"https://ui.example.com"}})
	if err != nil {
		f.Fatal(err)
	}
	var passed bool
	h := guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { passed = true }))
	f.Fuzz(func(t *testing.T, method, host, origin, site string) {
		req, err := http.NewRequest(method, "http://x/api/v1/sandboxes", nil)
		if err != nil {
			return
		}
		req.Host = host
		req.Header.Set("Origin", origin)
		req.Header.Set("Sec-Fetch-Site", site)
		passed = false
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if !passed {
			if rec.Code != http.StatusMisdirectedRequest && rec.Code != http.StatusForbidden {
				t.Fatalf("refused with %d", rec.Code)
			}
			checkErrorBody(t, rec.Body.Bytes(), "")
			return
		}
		name := normalizeHost(host)
		if h, _, err := net.SplitHostPort(host); err == nil {
			name = normalizeHost(h)
		}
		a, isAddr := hostAddr(name)
		if host != "" && name != "sandbox.example.com" && name != "localhost" && !strings.HasSuffix(name, ".localhost") && !(isAddr && a.IsLoopback()) {
			t.Fatalf("Host %q passed", host)
		}
		o, err := parseOrigin(origin)
		trusted := err == nil && o == "https://ui.example.com"
		if !trusted && site != "" && site != "none" && method != http.MethodOptions {
			t.Fatalf("Sec-Fetch-Site %q from %q passed", site, origin)
		}
		if !trusted && origin != "" && method != "GET" && method != "HEAD" && method != http.MethodOptions {
			t.Fatalf("%s from %q passed", method, origin)
		}
	})
}
