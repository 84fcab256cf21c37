package daemon

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
)

// startWithConsole starts a daemon with keys on, its console listening on
// addr, and its public URL publicURL (when not empty); it returns the
// daemon, the console's listener and a key.
func startWithConsole(t *testing.T, addr, publicURL string) (*testDaemon, net.Listener, string) {
	t.Helper()
	cl, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t.TempDir(), fakeruntime.New())
	cfg.Console = cl
	if publicURL != "" {
		cfg.PublicURL = publicURL
	}
	key, _ := twoKeys(t, &cfg)
	return start(t, cfg, nil), cl, key
}

// TestConsole serves the console on its own listener, the API allowing
// the console's origin (CORS, BrowserGuard) and no other, with keys on.
func TestConsole(t *testing.T) {
	d, cl, key := startWithConsole(t, "127.0.0.1:0", "")
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

// addrListener is a net.Listener that only has an address.
type addrListener struct {
	net.Listener
	addr net.Addr
}

func (l addrListener) Addr() net.Addr { return l.addr }

func TestConsoleOrigins(t *testing.T) {
	tests := []struct {
		name, listen, publicURL string
		want                    []string
	}{
		{"loopback", "127.0.0.1:8081", "http://127.0.0.1:8080", []string{"http://127.0.0.1:8081", "http://localhost:8081"}},
		{"an address", "192.0.2.5:8081", "http://192.0.2.5:8080", []string{"http://192.0.2.5:8081"}},
		{"every address, the public URL's name", "0.0.0.0:8081", "https://a2e.example.com/x",
			[]string{"http://a2e.example.com:8081", "http://127.0.0.1:8081", "http://localhost:8081"}},
		{"every IPv6 address, an IPv6 public URL", "[::]:8081", "http://[2001:db8::1]:8080",
			[]string{"http://[2001:db8::1]:8081", "http://127.0.0.1:8081", "http://localhost:8081"}},
		{"every address, a public URL on every address", "0.0.0.0:8081", "http://0.0.0.0:8080",
			[]string{"http://127.0.0.1:8081", "http://localhost:8081"}},
		{"every address, a loopback public URL", "0.0.0.0:8081", "http://127.0.0.1:8080",
			[]string{"http://127.0.0.1:8081", "http://localhost:8081"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr, err := net.ResolveTCPAddr("tcp", tc.listen)
			if err != nil {
				t.Fatal(err)
			}
			got := consoleOrigins(addrListener{addr: addr}, tc.publicURL)
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("consoleOrigins(%s, %s) = %q, want %q", tc.listen, tc.publicURL, got, tc.want)
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

// TestConsoleOnEveryAddress serves the console on every address: the API
// lets it call from the name in the public URL at the console's port, the
// one the log gives, as a browser elsewhere reaches it.
func TestConsoleOnEveryAddress(t *testing.T) {
	d, cl, _ := startWithConsole(t, "0.0.0.0:0", "http://a2e.example.com:8080")
	origin := "http://a2e.example.com:" + strconv.Itoa(cl.Addr().(*net.TCPAddr).Port)
	if !strings.Contains(d.log.String(), "url="+origin+"/") {
		t.Errorf("the log does not give the console as %s/:\n%s", origin, d.log)
	}
	r, _ := http.NewRequest(http.MethodOptions, "http://"+d.addr+"/api/v1/stats", nil)
	r.Header.Set("Origin", origin)
	r.Header.Set("Access-Control-Request-Method", "GET")
	r.Header.Set("Access-Control-Request-Headers", "authorization")
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != origin {
		t.Errorf("the console's preflight from %s: %d, Access-Control-Allow-Origin %q; want 204 allowing it",
			origin, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
}

// TestTrustedOriginsCORS: without a console, the pages of the operator's
// trusted origins call the API across origins, and a preflight from any
// other is refused with a 403 that says how to trust its origin (it was
// a 404, the API having no OPTIONS routes).
func TestTrustedOriginsCORS(t *testing.T) {
	const trusted = "https://ui.example.com"
	cfg := testConfig(t.TempDir(), fakeruntime.New())
	cfg.TrustedOrigins = []string{trusted}
	d := start(t, cfg, nil)
	tests := []struct {
		name, origin string
		status       int
		allow        string
	}{
		{"a trusted origin", trusted, http.StatusNoContent, trusted},
		{"another origin", "https://evil.example", http.StatusForbidden, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := http.NewRequest(http.MethodOptions, "http://"+d.addr+"/api/v1/sandboxes", nil)
			r.Header.Set("Origin", tc.origin)
			r.Header.Set("Sec-Fetch-Site", "cross-site")
			r.Header.Set("Access-Control-Request-Method", "POST")
			r.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
			resp, err := http.DefaultClient.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if got := resp.Header.Get("Access-Control-Allow-Origin"); got != tc.allow {
				t.Errorf("Access-Control-Allow-Origin %q, want %q", got, tc.allow)
			}
			if tc.status == http.StatusForbidden && !strings.Contains(string(body), "--trusted-origins") {
				t.Errorf("the refusal does not say how to trust the origin: %s", body)
			}
		})
	}
}
