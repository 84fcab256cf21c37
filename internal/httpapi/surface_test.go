package httpapi

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/e2b"
	"github.com/agent2env/agent2env/internal/opensandbox"
	"github.com/agent2env/agent2env/internal/service"
)

// browserMiddleware is the daemon's CORS and BrowserGuard, outermost
// first, for a daemon on 127.0.0.1:8080 whose console is on :8081.
func browserMiddleware(t *testing.T) Option {
	t.Helper()
	guard, err := BrowserGuard(BrowserConfig{Listen: "127.0.0.1:8080"})
	if err != nil {
		t.Fatal(err)
	}
	cors, err := CORS("http://127.0.0.1:8081")
	if err != nil {
		t.Fatal(err)
	}
	return func(s *Server) {
		WithMiddleware(cors)(s)
		WithMiddleware(guard)(s)
	}
}

// panicRoutes are routes that panic, one on each surface's paths.
type panicRoutes []string

func (p panicRoutes) Register(mux *http.ServeMux) {
	for _, pattern := range p {
		mux.HandleFunc(pattern, func(http.ResponseWriter, *http.Request) { panic("boom") })
	}
}

// The errors the Server's middleware answers itself, a handler's panic
// (500), BrowserGuard's refusal of a foreign Host (421) and CORS's of a
// preflight from an untrusted web origin (403), take the form
// of the request's surface: the REST API's {error, code}, the OpenSandbox
// API's {code, message}, E2B's {code: status, message}, and Connect's
// error to a call of E2B's envd services.
func TestSurfaceErrors(t *testing.T) {
	// The surfaces' services are never reached: the routes here are the
	// test's.
	var sandboxes *service.Sandboxes
	osAPI, err := opensandbox.New(opensandbox.Config{Sandboxes: sandboxes, GatewayPrefix: "/gw/"})
	if err != nil {
		t.Fatal(err)
	}
	e2bAPI, err := e2b.New(e2b.Config{Sandboxes: sandboxes})
	if err != nil {
		t.Fatal(err)
	}
	h := New(nil, nil, slog.New(slog.DiscardHandler), WithSurface(e2bAPI), WithSurface(osAPI), browserMiddleware(t),
		WithRoutes(panicRoutes{"/api/v1/boom", "/v1/boom", opensandbox.ExecdPrefix + "boom", "/sandboxes/boom",
			"/process.Process/Start"})).Handler()
	const foreign = "evil.example.com"
	e2bCall := map[string]string{e2b.HeaderSandboxID: "sb", "Content-Type": "application/json"}
	preflight := map[string]string{"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}
	for _, tt := range []struct {
		name, path string
		host       string // "": the daemon's
		header     map[string]string
		status     int
		code       any    // the body's code
		message    string // the member with the message
	}{
		{"REST panic", "/api/v1/boom", "", nil, 500, api.CodeInternal, "error"},
		{"REST foreign host", "/api/v1/boom", foreign, nil, 421, api.CodeMisdirected, "error"},
		{"OpenSandbox panic", "/v1/boom", "", nil, 500, api.CodeInternal, "message"},
		{"OpenSandbox foreign host", "/v1/boom", foreign, nil, 421, api.CodeMisdirected, "message"},
		{"OpenSandbox execd panic", opensandbox.ExecdPrefix + "boom", "", nil, 500, api.CodeInternal, "message"},
		{"E2B panic", "/sandboxes/boom", "", nil, 500, float64(500), "message"},
		{"E2B foreign host", "/sandboxes/boom", foreign, nil, 421, float64(421), "message"},
		{"E2B envd call panic", "/process.Process/Start", "", e2bCall, 500, "internal", "message"},
		{"E2B envd call foreign host", "/process.Process/Start", foreign, e2bCall, 400, "invalid_argument", "message"},
		{"REST preflight from an untrusted origin", "/api/v1/boom", "", preflight, 403, api.CodeForbidden, "error"},
		{"OpenSandbox preflight from an untrusted origin", "/v1/boom", "", preflight, 403, api.CodeForbidden, "message"},
		{"OpenSandbox execd preflight from an untrusted origin", opensandbox.ExecdPrefix + "boom", "", preflight, 403, api.CodeForbidden, "message"},
		{"E2B preflight from an untrusted origin", "/sandboxes/boom", "", preflight, 403, float64(403), "message"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			method := http.MethodPost
			if tt.header["Access-Control-Request-Method"] != "" {
				method = http.MethodOptions
			}
			req := httptest.NewRequest(method, tt.path, strings.NewReader("{}"))
			req.Host = "127.0.0.1:8080"
			if tt.host != "" {
				req.Host = tt.host
			}
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			body, _ := io.ReadAll(rec.Body)
			if rec.Code != tt.status {
				t.Errorf("status %d, want %d (body %s)", rec.Code, tt.status, body)
			}
			var eb map[string]any
			if err := json.Unmarshal(body, &eb); err != nil {
				t.Fatalf("body %q is not JSON: %v", body, err)
			}
			if msg, _ := eb[tt.message].(string); eb["code"] != tt.code || msg == "" || len(eb) != 2 {
				t.Errorf("body %s, want {code: %v, %s}", body, tt.code, tt.message)
			}
			if origin := tt.header["Origin"]; origin != "" {
				// The refusal says which origin and how an operator trusts it.
				if msg, _ := eb[tt.message].(string); !strings.Contains(msg, origin) || !strings.Contains(msg, "--trusted-origins") {
					t.Errorf("message %q names neither the origin %s nor --trusted-origins", msg, origin)
				}
			}
		})
	}
}

// okRoutes answer 200 on their paths, to every method.
type okRoutes []string

func (o okRoutes) Register(mux *http.ServeMux) {
	for _, pattern := range o {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	}
}

// TestSandboxSites checks that the requests of a sandbox's own web site
// (the E2B API's host form of a user port: a SiteSurface's) pass
// BrowserGuard's refusal of pages and CORS's of preflights, as the port
// gateway's paths do, while its Host check stays and envd's and the code
// interpreter's ports, and the daemon's own names, are refused as before.
func TestSandboxSites(t *testing.T) {
	var sandboxes *service.Sandboxes // never reached: the routes are the test's
	e2bAPI, err := e2b.New(e2b.Config{Sandboxes: sandboxes})
	if err != nil {
		t.Fatal(err)
	}
	h := New(nil, nil, slog.New(slog.DiscardHandler), WithSurface(e2bAPI), browserMiddleware(t),
		WithRoutes(okRoutes{"/app.js"})).Handler()
	const site = "3000-sb.localhost:8080"
	sameOrigin := map[string]string{"Sec-Fetch-Site": "same-origin"}
	for _, tt := range []struct {
		name, method, host string
		header             map[string]string
		status             int
	}{
		{"a subresource of the site", "GET", site, sameOrigin, 200},
		{"a page's POST to its site", "POST", site, map[string]string{"Origin": "http://" + site, "Sec-Fetch-Site": "same-origin"}, 200},
		{"another site's page", "GET", site, map[string]string{"Origin": "https://other.example", "Sec-Fetch-Site": "cross-site"}, 200},
		{"a preflight to the site", "OPTIONS", site, map[string]string{"Origin": "https://other.example", "Access-Control-Request-Method": "PUT"}, 200},
		{"a WebSocket of the site", "GET", site, map[string]string{"Origin": "http://" + site, "Upgrade": "websocket"}, 200},
		{"a site on a foreign name", "GET", "3000-sb.evil.example.com", sameOrigin, 421},
		{"envd by host", "GET", "49983-sb.localhost:8080", sameOrigin, 403},
		{"the interpreter by host", "GET", "49999-sb.localhost:8080", sameOrigin, 403},
		{"the daemon", "GET", "127.0.0.1:8080", sameOrigin, 403},
		{"a preflight to the daemon", "OPTIONS", "127.0.0.1:8080", map[string]string{"Origin": "https://other.example", "Access-Control-Request-Method": "PUT"}, 403},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, "/app.js", nil)
			req.Host = tt.host
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.status {
				t.Errorf("status %d, want %d (body %s)", rec.Code, tt.status, rec.Body)
			}
			if rec.Header().Get("Access-Control-Allow-Origin") != "" {
				t.Errorf("CORS answered for the site: %v", rec.Header())
			}
		})
	}
}
