package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/api"
)

// TestPortGateway reaches a web server inside a sandbox through the
// daemon's gateway, only with the sandbox's access token, and never the
// port that serves the daemon's services to the sandbox.
func TestPortGateway(t *testing.T) {
	d := startDaemon(t, "")
	d.do("POST", "/api/v1/templates", `{"name": "web", "spec": {"image": "agent2env/python",
		"files": [{"destination": "/workspace/site/index.html", "content": "<h1>gateway</h1>"}],
		"command": ["python3", "-m", "http.server", "8000", "--directory", "/workspace/site"],
		"readinessProbe": {"exec": {"command": ["python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/')"]}, "periodSeconds": 1, "failureThreshold": 10}}}`, nil)
	var sb api.Sandbox
	d.do("POST", "/api/v1/sandboxes", `{"template": "web"}`, &sb)
	sb = d.waitRunning(sb.ID)
	if !strings.HasPrefix(sb.AccessURL, "http://"+d.addr+"/api/v1/sandbox/") {
		t.Fatalf("accessUrl %q", sb.AccessURL)
	}
	tests := []struct {
		name, token, port string
		status            int
		body              string
	}{
		{"with token", sb.AccessToken, "8000", http.StatusOK, "<h1>gateway</h1>"},
		{"without token", "", "8000", http.StatusUnauthorized, ""},
		{"wrong token", strings.Repeat("0", 64), "8000", http.StatusUnauthorized, ""},
		{"closed port", sb.AccessToken, "8001", http.StatusBadGateway, ""},
		// The daemon's LLM proxy and MCP, as the sandbox: its own programs'.
		{"the daemon's services", sb.AccessToken, "4000", http.StatusForbidden, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, sb.AccessURL+"/port/"+tt.port+"/index.html", nil)
			if tt.token != "" {
				req.Header.Set("X-Access-Token", tt.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status || (tt.body != "" && string(b) != tt.body) {
				t.Errorf("got %d %q, want %d %q", resp.StatusCode, b, tt.status, tt.body)
			}
		})
	}
	d.deleteAll()
	d.assertNoLeaks()
}

// TestEgressPolicy: a sandbox whose template allows some domains reaches
// the daemon's proxy, which refuses every other host; a sandbox without
// network access has no proxy at all.
func TestEgressPolicy(t *testing.T) {
	d := startDaemon(t, "")
	d.do("POST", "/api/v1/templates", `{"name": "net", "spec": {"image": "agent2env/python", "network": {"allowedDomains": ["*.allowed.test"]}}}`, nil)
	d.do("POST", "/api/v1/templates", `{"name": "nonet", "spec": {"image": "agent2env/python"}}`, nil)
	var sb, closed api.Sandbox
	d.do("POST", "/api/v1/sandboxes", `{"template": "net"}`, &sb)
	d.do("POST", "/api/v1/sandboxes", `{"template": "nonet"}`, &closed)
	sb, closed = d.waitRunning(sb.ID), d.waitRunning(closed.ID)

	// Denied: the proxy answers 403 itself, naming the host.
	probe := `import urllib.request, sys
try:
    urllib.request.urlopen(sys.argv[1], timeout=10)
except urllib.error.HTTPError as e:
    print(e.code)
except Exception as e:
    print(type(e).__name__)`
	if res := d.exec(sb.ID, "python3", "-c", probe, "http://denied.example/"); strings.TrimSpace(res.Stdout) != "403" {
		t.Errorf("denied domain through the proxy: %+v", res)
	}
	// Allowed by policy: the proxy dials it (the name does not resolve
	// here, so the proxy answers 502, not 403).
	if res := d.exec(sb.ID, "python3", "-c", probe, "http://a.allowed.test/"); strings.TrimSpace(res.Stdout) != "502" {
		t.Errorf("allowed domain through the proxy: %+v", res)
	}
	if res := d.exec(sb.ID, "sh", "-c", "echo $HTTP_PROXY"); strings.TrimSpace(res.Stdout) != "http://127.0.0.1:3128" {
		t.Errorf("HTTP_PROXY = %q", res.Stdout)
	}
	// No network access: no proxy variable and nothing on 3128.
	if res := d.exec(closed.ID, "python3", "-c", probe, "http://127.0.0.1:3128/"); !strings.Contains(res.Stdout, "URLError") {
		t.Errorf("sandbox without network reached a proxy: %+v", res)
	}
	d.deleteAll()
	d.assertNoLeaks()
}
