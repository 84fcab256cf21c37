package daemon

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
)

// TestConsole serves the console on its own listener, the API allowing
// the console's origin (CORS, BrowserGuard) and no other, with keys on.
func TestConsole(t *testing.T) {
	cl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t.TempDir(), fakeruntime.New())
	cfg.Console = cl
	key, _ := twoKeys(t, &cfg)
	d := start(t, cfg, nil)
	consoleURL := "http://" + cl.Addr().String()
	origin := consoleURL

	get := func(url string) (int, string, http.Header) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	status, body, h := get(consoleURL + "/sandboxes")
	if status != http.StatusOK || !strings.Contains(body, `content="http://`+d.addr+`"`) {
		t.Errorf("console index: %d, want 200 naming the API http://%s:\n%s", status, d.addr, body)
	}
	if !strings.Contains(h.Get("Content-Security-Policy"), "connect-src 'self' http://"+d.addr) {
		t.Errorf("CSP %q does not let the console call the API", h.Get("Content-Security-Policy"))
	}
	// The console's origin never answers for the API or a sandbox's port.
	for _, p := range []string{"/api/v1/stats", "/api/v1/sandbox/x/port/80/"} {
		if status, _, _ := get(consoleURL + p); status != http.StatusNotFound {
			t.Errorf("console %s: %d, want 404", p, status)
		}
	}

	tests := []struct {
		name, method, origin string
		status               int
		allow                string
	}{
		{"the console's preflight", http.MethodOptions, origin, http.StatusNoContent, origin},
		// A ticket for a sandbox that does not exist: the API's own answer.
		{"the console's call", http.MethodPost, origin, http.StatusNotFound, origin},
		{"the console by localhost", http.MethodPost, strings.Replace(origin, "127.0.0.1", "localhost", 1), http.StatusNotFound, strings.Replace(origin, "127.0.0.1", "localhost", 1)},
		{"another page", http.MethodPost, "http://127.0.0.1:1", http.StatusForbidden, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := http.NewRequest(tc.method, "http://"+d.addr+"/api/v1/sandboxes/none/exec/interactive/ticket", nil)
			r.Header.Set("Origin", tc.origin)
			r.Header.Set("Sec-Fetch-Site", "cross-site")
			if tc.method == http.MethodOptions {
				r.Header.Set("Access-Control-Request-Method", "POST")
				r.Header.Set("Access-Control-Request-Headers", "authorization")
			} else {
				r.Header.Set("Authorization", "Bearer "+key)
			}
			resp, err := http.DefaultClient.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if got := resp.Header.Get("Access-Control-Allow-Origin"); got != tc.allow {
				t.Errorf("Access-Control-Allow-Origin %q, want %q", got, tc.allow)
			}
		})
	}
}

func TestConsoleAPIOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8080":          "http://127.0.0.1:8080",
		"http://:8080":                   "http://127.0.0.1:8080",
		"http://0.0.0.0:8080":            "http://127.0.0.1:8080",
		"http://[::]:8080":               "http://127.0.0.1:8080",
		"https://a2e.example.com/prefix": "https://a2e.example.com",
	} {
		if got := consoleAPIOrigin(in); got != want {
			t.Errorf("consoleAPIOrigin(%q) = %q, want %q", in, got, want)
		}
	}
}
