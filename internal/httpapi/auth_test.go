package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/service"
)

// fakeGateway stands in for the port gateway, which checks its own
// per-sandbox token.
type fakeGateway struct{}

func (fakeGateway) Register(mux *http.ServeMux) {
	mux.HandleFunc("/api/v1/sandbox/{id}/port/{port}/{path...}", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "gateway")
	})
	// And for the LLM proxy, which checks keys itself.
	mux.HandleFunc("/llm/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "llm") })
}

func TestAuthMiddleware(t *testing.T) {
	key := auth.NewKey()
	keys, err := auth.NewKeys(key)
	if err != nil {
		t.Fatal(err)
	}
	srv := New(nil, service.NewImages(newFakeImages("alpine")), slog.New(slog.DiscardHandler),
		WithMiddleware(AuthMiddleware(keys)), WithRoutes(fakeGateway{}))
	srv.SetReady(true)
	h := srv.Handler()

	const (
		missing = "authentication required"
		invalid = "invalid or expired API key"
	)
	bearer := "Bearer " + key
	tests := []struct {
		name   string
		method string
		target string
		header string
		status int
		msg    string // the 401's message
	}{
		{"health", "GET", "/health", "", http.StatusOK, ""},
		{"health head", "HEAD", "/health", "", http.StatusOK, ""},
		{"api health", "GET", "/api/v1/health", "", http.StatusOK, ""},
		{"readyz", "GET", "/readyz", "", http.StatusOK, ""},
		{"health with a wrong key", "GET", "/health", "Bearer wrong-key-wrong-key", http.StatusOK, ""},
		{"health by post", "POST", "/health", "", http.StatusUnauthorized, missing},
		{"preflight", "OPTIONS", "/api/v1/sandboxes", "", http.StatusNotFound, ""},
		{"gateway", "GET", "/api/v1/sandbox/abc123/port/8080/index.html", "", http.StatusOK, ""},
		{"gateway post", "POST", "/api/v1/sandbox/abc123/port/8080/", "", http.StatusOK, ""},
		{"llm proxy", "POST", "/llm/v1/chat/completions", "", http.StatusOK, ""},
		{"llm proxy with its own key", "POST", "/llm/v1/messages", "Bearer a2e_llm_whatever", http.StatusOK, ""},
		{"dot-dot out of the llm proxy", "GET", "/llm/../api/v1/images", "", http.StatusUnauthorized, missing},
		{"llm prefix is not the proxy", "GET", "/llmx/v1/models", "", http.StatusUnauthorized, missing},
		{"no key", "GET", "/api/v1/images", "", http.StatusUnauthorized, missing},
		{"key", "GET", "/api/v1/images", bearer, http.StatusOK, ""},
		{"lower-case scheme", "GET", "/api/v1/images", "bearer " + key, http.StatusOK, ""},
		{"wrong key", "GET", "/api/v1/images", "Bearer wrong-key-wrong-key", http.StatusUnauthorized, invalid},
		{"empty bearer", "GET", "/api/v1/images", "Bearer ", http.StatusUnauthorized, missing},
		{"basic auth", "GET", "/api/v1/images", "Basic dXNlcjpwYXNz", http.StatusUnauthorized, missing},
		{"bare key", "GET", "/api/v1/images", key, http.StatusUnauthorized, missing},
		{"sandboxes is not the gateway", "GET", "/api/v1/sandboxes", "", http.StatusUnauthorized, missing},
		{"sandboxes id is not the gateway", "GET", "/api/v1/sandboxes/abc123", "", http.StatusUnauthorized, missing},
		{"sandbox root is not the gateway", "GET", "/api/v1/sandbox/", "", http.StatusUnauthorized, missing},
		{"dot-dot out of the gateway", "DELETE", "/api/v1/sandbox/../images/alpine", "", http.StatusUnauthorized, missing},
		{"escaped dot-dot into the gateway", "DELETE", "/api/v1/images/x%2F..%2F..%2Fsandbox%2Fy", "", http.StatusUnauthorized, missing},
		{"unknown route", "GET", "/api/v1/nothing-here", "", http.StatusUnauthorized, missing},
		{"unknown route with key", "GET", "/api/v1/nothing-here", bearer, http.StatusNotFound, ""},
		{"delete image", "DELETE", "/api/v1/images/alpine", bearer, http.StatusNoContent, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.target, nil)
			if tt.header != "" {
				req.Header.Set("Authorization", tt.header)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			resp := response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
			if tt.status != http.StatusUnauthorized {
				if resp.status != tt.status {
					t.Errorf("%d %s, want %d", resp.status, resp.body, tt.status)
				}
				return
			}
			checkError(t, resp, http.StatusUnauthorized, api.CodeUnauthorized)
			var eb api.Error
			json.Unmarshal(resp.body, &eb)
			if eb.Message != tt.msg {
				t.Errorf("message %q, want %q", eb.Message, tt.msg)
			}
			if resp.header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
}

// A WebSocket may carry the key as a subprotocol entry, which the
// handlers see as the Authorization header; nothing else may.
func TestAuthMiddlewareSubprotocol(t *testing.T) {
	key := auth.NewKey()
	keys, err := auth.NewKeys(key)
	if err != nil {
		t.Fatal(err)
	}
	var seen string
	h := AuthMiddleware(keys)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = r.Header.Get("Authorization") }))
	entry := func(k string) string {
		return api.TerminalAuthProtocolPrefix + base64.RawURLEncoding.EncodeToString([]byte(k))
	}
	for _, tt := range []struct {
		name      string
		upgrade   bool
		protocols string
		status    int
	}{
		{"key entry", true, entry(key), http.StatusOK},
		{"key entry after another", true, "v5.channel.k8s.io, " + entry(key), http.StatusOK},
		{"padded", true, entry(key) + "==", http.StatusOK},
		{"wrong key", true, entry("wrong-key-wrong-key"), http.StatusUnauthorized},
		{"not base64url", true, api.TerminalAuthProtocolPrefix + "!!", http.StatusUnauthorized},
		{"no entry", true, "v5.channel.k8s.io", http.StatusUnauthorized},
		{"not a WebSocket", false, entry(key), http.StatusUnauthorized},
	} {
		t.Run(tt.name, func(t *testing.T) {
			seen = ""
			req := httptest.NewRequest("GET", "/api/v1/sandboxes/x/exec/interactive", nil)
			req.Header.Set("Sec-WebSocket-Protocol", tt.protocols)
			if tt.upgrade {
				req.Header.Set("Upgrade", "websocket")
				req.Header.Set("Connection", "Upgrade")
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.status {
				t.Fatalf("%d %s, want %d", rec.Code, rec.Body, tt.status)
			}
			if tt.status == http.StatusOK && seen != "Bearer "+key {
				t.Errorf("the handler saw Authorization %q", seen)
			}
		})
	}
}

// Without keys nothing but the exempt paths is served.
func TestAuthMiddlewareNoKeys(t *testing.T) {
	for _, keys := range []*auth.Keys{nil, {}} {
		h := AuthMiddleware(keys, "/own/")(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		for target, want := range map[string]int{
			"/api/v1/images":        http.StatusUnauthorized,
			"/health":               http.StatusOK,
			"/own/":                 http.StatusOK, // authenticates itself
			"/own/x":                http.StatusOK,
			"/own":                  http.StatusOK,
			"/owner":                http.StatusUnauthorized,
			"/own/../api/v1/images": http.StatusUnauthorized,
			"/api/v1/own/x":         http.StatusUnauthorized,
		} {
			req := httptest.NewRequest("GET", target, nil)
			req.Header.Set("Authorization", "Bearer anything-at-all-here")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != want {
				t.Errorf("%s with keys %v: %d, want %d", target, keys, rec.Code, want)
			}
		}
	}
}
