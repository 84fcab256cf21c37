package e2e

import (
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/api"
)

// proxyLog is a stand-in HTTP(S) proxy for the sandbox's loopback: it
// logs the first line of every request (a CONNECT for HTTPS) and answers
// 502, so a CLI that reaches out at start leaves a line in the log.
const proxyLog = `import socket, sys, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 3199)); s.listen(16)
print("listening", flush=True)
def serve(c):
    line = c.makefile("rb").readline().decode(errors="replace").strip()
    with open("/tmp/proxy.log", "a") as f: f.write(line + "\n")
    c.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n"); c.close()
while True:
    c, _ = s.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
`

// TestAgentImage runs the five agent CLIs of agent2env/agent in a sandbox,
// as the sandbox user: each answers --version with its pinned version and
// none reaches for the network while doing so (through the proxy the
// environment names; direct connections fail in a sandbox with no
// network and are not seen here).
func TestAgentImage(t *testing.T) {
	if os.Getenv("AGENT2ENV_BUILD_TESTS") != "1" {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but AGENT2ENV_BUILD_TESTS is not 1: run the tests through make test")
		}
		t.Skip("set AGENT2ENV_BUILD_TESTS=1 to build agent2env/agent")
	}
	d := startDaemon(t, "")
	sb := d.create(api.CreateSandboxRequest{Image: "agent2env/agent", Memory: "2Gi"})
	if res := d.exec(sb.ID, "id", "-u"); res.Stdout != "1000\n" {
		t.Fatalf("commands run as uid %q, want the sandbox user 1000", res.Stdout)
	}
	if code, body := d.upload(sb.ID, "/tmp/proxy.py", []byte(proxyLog)); code != http.StatusOK {
		t.Fatalf("upload proxy: %d %s", code, body)
	}
	var bg api.ExecResponse
	d.do("POST", "/api/v1/sandboxes/"+sb.ID+"/exec", api.ExecRequest{
		Command: []string{"sh", "-c", "nohup python3 /tmp/proxy.py >/tmp/proxy.out 2>&1 & sleep 0.5; cat /tmp/proxy.out"}, Timeout: 10,
	}, &bg)
	if !strings.Contains(bg.Stdout, "listening") {
		t.Fatalf("proxy did not start: %+v", bg)
	}
	proxy := "http://127.0.0.1:3199"
	env := map[string]string{"HTTPS_PROXY": proxy, "HTTP_PROXY": proxy, "https_proxy": proxy, "http_proxy": proxy, "ALL_PROXY": proxy, "NO_PROXY": ""}
	for _, tt := range []struct{ cmd, version string }{
		{"claude", "2.1.331"},
		{"codex", "0.169.0"},
		{"gemini", "0.61.0"},
		{"opencode", "1.18.33"},
		{"qwen", "0.24.4"},
		{"node", "v22.23.3"},
	} {
		var res api.ExecResponse
		if code := d.do("POST", "/api/v1/sandboxes/"+sb.ID+"/exec", api.ExecRequest{
			Command: []string{tt.cmd, "--version"}, Env: env, Cwd: "/workspace", Timeout: 60,
		}, &res); code != http.StatusOK {
			t.Fatalf("exec %s: status %d", tt.cmd, code)
		}
		if res.ExitCode != 0 || !strings.Contains(res.Stdout, tt.version) {
			t.Errorf("%s --version = %d %q %q, want %s", tt.cmd, res.ExitCode, res.Stdout, res.Stderr, tt.version)
		}
	}
	if res := d.exec(sb.ID, "sh", "-c", "cat /tmp/proxy.log 2>/dev/null"); res.Stdout != "" {
		t.Errorf("CLIs reached for the network at start:\n%s", res.Stdout)
	}
	for _, tool := range []string{"git", "rg", "python3", "gcc", "make", "npm", "sqlite3"} {
		if res := d.exec(sb.ID, "sh", "-c", "command -v "+tool); res.ExitCode != 0 {
			t.Errorf("%s is not on PATH", tool)
		}
	}
	if res := d.exec(sb.ID, "python3", "-c", "import pytest, matplotlib, pandas"); res.ExitCode != 0 {
		t.Errorf("python modules: %+v", res)
	}
	d.deleteAll()
	d.assertNoLeaks()
}
