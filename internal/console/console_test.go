package console

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// anAsset returns the path of a built file under /assets/ with extension ext.
func anAsset(t *testing.T, ext string) string {
	t.Helper()
	ents, err := fs.ReadDir(dist, "dist/assets")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ext) {
			return "/assets/" + e.Name()
		}
	}
	t.Fatalf("no %s file in the embedded build", ext)
	return ""
}

func TestHandler(t *testing.T) {
	h, err := Handler(Config{APIOrigin: "http://127.0.0.1:8080"})
	if err != nil {
		t.Fatal(err)
	}
	js := anAsset(t, ".js")
	const index, asset = "index", "asset"
	tests := []struct {
		name, method, path string
		status             int
		body               string // index, asset, or text the body contains
		cache, ctype       string
	}{
		{"root", "GET", "/", 200, index, "no-cache", "text/html; charset=utf-8"},
		{"index by name", "GET", "/index.html", 200, index, "no-cache", "text/html; charset=utf-8"},
		{"an app route", "GET", "/sandboxes/abc", 200, index, "no-cache", "text/html; charset=utf-8"},
		{"an app route with a dot", "GET", "/sessions/my.session", 200, index, "no-cache", "text/html; charset=utf-8"},
		{"an app route ending in an extension", "GET", "/sessions/analysis.js", 200, index, "no-cache", "text/html; charset=utf-8"},
		{"head", "HEAD", "/sandboxes", 200, "", "no-cache", "text/html; charset=utf-8"},
		{"an asset", "GET", js, 200, asset, "public, max-age=31536000, immutable", "text/javascript; charset=utf-8"},
		{"a missing asset", "GET", "/assets/nothing.js", 404, "not found", "", ""},
		{"a missing file with an extension", "GET", "/favicon.ico", 404, "not found", "", ""},
		{"a missing asset below assets", "GET", "/assets/x/y.css", 404, "not found", "", ""},
		{"an API path", "GET", "/api/v1/sandboxes", 404, "serves no API", "", ""},
		{"the API prefix itself", "GET", "/api", 404, "serves no API", "", ""},
		{"a port gateway path", "GET", "/api/v1/sandbox/x/port/80/", 404, "serves no API", "", ""},
		{"a dotted way to the API", "GET", "/assets/../api/v1/stats", 404, "serves no API", "", ""},
		{"a post", "POST", "/", 405, "use GET", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			body := rec.Body.String()
			switch tc.body {
			case index:
				if !strings.Contains(body, `<meta name="agent2env-api" content="http://127.0.0.1:8080">`) {
					t.Errorf("the index does not name the API's origin:\n%s", body)
				}
			case asset:
				want, _ := fs.ReadFile(dist, "dist"+tc.path)
				if body != string(want) {
					t.Errorf("the asset's body differs from the embedded file")
				}
			default:
				if !strings.Contains(body, tc.body) {
					t.Errorf("body %q does not contain %q", body, tc.body)
				}
			}
			if got := rec.Header().Get("Cache-Control"); tc.cache != "" && got != tc.cache {
				t.Errorf("Cache-Control %q, want %q", got, tc.cache)
			}
			if got := rec.Header().Get("Content-Type"); tc.ctype != "" && got != tc.ctype {
				t.Errorf("Content-Type %q, want %q", got, tc.ctype)
			}
			// Every answer, errors included, carries the security headers.
			for k, want := range map[string]string{
				"X-Content-Type-Options": "nosniff",
				"Referrer-Policy":        "no-referrer",
				"X-Frame-Options":        "DENY",
			} {
				if got := rec.Header().Get(k); got != want {
					t.Errorf("%s %q, want %q", k, got, want)
				}
			}
			csp := rec.Header().Get("Content-Security-Policy")
			for _, want := range []string{
				"default-src 'self'", "script-src 'self';", "frame-ancestors 'none'", "object-src 'none'",
				"connect-src 'self' http://127.0.0.1:8080 ws://127.0.0.1:8080;",
			} {
				if !strings.Contains(csp+";", want) {
					t.Errorf("CSP %q lacks %q", csp, want)
				}
			}
			if strings.Contains(csp, "script-src 'self' 'unsafe") {
				t.Errorf("CSP %q allows inline scripts", csp)
			}
		})
	}
}

// TestIndexHasNoInlineScript keeps the build loadable under script-src
// 'self': every script of the index is a file.
func TestIndexHasNoInlineScript(t *testing.T) {
	b, err := fs.ReadFile(dist, "dist/index.html")
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range strings.Split(string(b), "<script")[1:] {
		if !strings.Contains(tag[:strings.Index(tag, ">")], "src=") {
			t.Errorf("inline script in index.html: <script%s", tag)
		}
	}
}

func TestHandlerAPIOrigin(t *testing.T) {
	tests := []struct {
		origin, connect string // connect "": refused
	}{
		{"https://agent2env.example.com", "https://agent2env.example.com wss://agent2env.example.com"},
		{"http://[::1]:8080", "http://[::1]:8080 ws://[::1]:8080"},
		{"http://127.0.0.1:8080/api", ""},
		{"127.0.0.1:8080", ""},
		{"ftp://host", ""},
		{"", ""},
	}
	for _, tc := range tests {
		h, err := Handler(Config{APIOrigin: tc.origin})
		if tc.connect == "" {
			if err == nil {
				t.Errorf("Handler(%q) succeeded, want an error", tc.origin)
			}
			continue
		}
		if err != nil {
			t.Errorf("Handler(%q): %v", tc.origin, err)
			continue
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self' "+tc.connect+";") {
			t.Errorf("origin %q: CSP %q, want connect-src 'self' %s", tc.origin, csp, tc.connect)
		}
	}
}
