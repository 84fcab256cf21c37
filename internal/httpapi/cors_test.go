package httpapi

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestCORS(t *testing.T) {
	cors, err := CORS("http://127.0.0.1:8081")
	if err != nil {
		t.Fatal(err)
	}
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot) // the API's own answer
	})
	h := cors(next)
	const console = "http://127.0.0.1:8081"
	tests := []struct {
		name, method, path, origin, preflight string
		status                                int
		allow                                 string // Access-Control-Allow-Origin
		methods                               string // Access-Control-Allow-Methods
	}{
		{"the console's request", "GET", "/api/v1/stats", console, "", http.StatusTeapot, console, ""},
		{"the console's preflight", "OPTIONS", "/api/v1/sandboxes", console, "POST", http.StatusNoContent, console, corsMethods},
		{"the console's origin spelt with a default port", "GET", "/api/v1/stats", "HTTP://127.0.0.1:8081", "", http.StatusTeapot, "HTTP://127.0.0.1:8081", ""},
		{"another port", "GET", "/api/v1/stats", "http://127.0.0.1:9999", "", http.StatusTeapot, "", ""},
		{"another origin's preflight is refused", "OPTIONS", "/api/v1/sandboxes", "http://evil.example", "POST", http.StatusForbidden, "", ""},
		{"a malformed origin's preflight is refused", "OPTIONS", "/api/v1/sandboxes", "null", "POST", http.StatusForbidden, "", ""},
		{"another origin's plain OPTIONS goes on", "OPTIONS", "/api/v1/sandboxes", "http://evil.example", "", http.StatusTeapot, "", ""},
		{"the port gateway's preflight goes on", "OPTIONS", gatewayPrefix + "x/port/80/", "http://evil.example", "POST", http.StatusTeapot, "", ""},
		{"no origin", "GET", "/api/v1/stats", "", "", http.StatusTeapot, "", ""},
		{"a plain OPTIONS", "OPTIONS", "/api/v1/stats", console, "", http.StatusTeapot, console, ""},
		{"the port gateway answers for itself", "GET", gatewayPrefix + "x/port/80/", console, "", http.StatusTeapot, "", ""},
		{"a malformed origin", "GET", "/api/v1/stats", "null", "", http.StatusTeapot, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, tc.path, nil)
			if tc.origin != "" {
				r.Header.Set("Origin", tc.origin)
			}
			if tc.preflight != "" {
				r.Header.Set("Access-Control-Request-Method", tc.preflight)
				r.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Code != tc.status {
				t.Errorf("status %d, want %d", rec.Code, tc.status)
			}
			if got := rec.Header().Get("Access-Control-Allow-Origin"); got != tc.allow {
				t.Errorf("Access-Control-Allow-Origin %q, want %q", got, tc.allow)
			}
			if got := rec.Header().Get("Access-Control-Allow-Methods"); got != tc.methods {
				t.Errorf("Access-Control-Allow-Methods %q, want %q", got, tc.methods)
			}
			if tc.methods != "" && rec.Header().Get("Access-Control-Allow-Headers") != corsHeaders {
				t.Errorf("Access-Control-Allow-Headers %q, want %q", rec.Header().Get("Access-Control-Allow-Headers"), corsHeaders)
			}
			if rec.Header().Get("Access-Control-Allow-Credentials") != "" {
				t.Error("credentials allowed")
			}
		})
	}
	if _, err := CORS("not an origin"); err == nil {
		t.Error("CORS took a malformed origin")
	}
}
