package e2e

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/agents"
	"github.com/agent2env/agent2env/internal/agents/agenttest"
	"github.com/agent2env/agent2env/internal/agents/all"
	"github.com/agent2env/agent2env/internal/testenv"
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
	agentImageEnabled(t)
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

// agentImageEnabled gates the tests that need agent2env/agent, which takes
// minutes to build the first time (like the image package's build tests).
func agentImageEnabled(t *testing.T) {
	t.Helper()
	if os.Getenv("AGENT2ENV_BUILD_TESTS") == "1" {
		return
	}
	testenv.Missing(t, "set AGENT2ENV_BUILD_TESTS=1 (make test does) to build agent2env/agent")
}

// TestAgentCLIsInSandbox runs each agent CLI of agent2env/agent in a
// sandbox, as the sandbox user, exactly as its adapter plans it, against
// the scripted model (agenttest.ScriptedModel) running on the sandbox's
// loopback: each writes agent_done.txt with its shell tool, exits 0, ends
// with a result its parser reads, and offered the model the tools of the
// MCP servers it was given: a local one (tasks/local-mcp's sqlite server)
// and a remote one (the scripted model's).
func TestAgentCLIsInSandbox(t *testing.T) {
	agentImageEnabled(t)
	modelBin := filepath.Join(t.TempDir(), "scripted-model")
	build := exec.Command("go", "build", "-o", modelBin, "../agents/agenttest/scriptedmodel")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the scripted model: %v\n%s", err, out)
	}
	d := startDaemon(t, "")
	sb := d.create(api.CreateSandboxRequest{Image: "agent2env/agent", Memory: "2Gi"})
	put := func(path string, data []byte) {
		t.Helper()
		if code, body := d.upload(sb.ID, path, data); code != http.StatusOK {
			t.Fatalf("upload %s: %d %s", path, code, body)
		}
	}
	for _, f := range []string{"sqlite_mcp.py", "make_db.py"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "tasks", "local-mcp", f))
		if err != nil {
			t.Fatal(err)
		}
		put("/workspace/mcp/"+f, b)
	}
	b, err := os.ReadFile(modelBin)
	if err != nil {
		t.Fatal(err)
	}
	put("/tmp/scripted-model", b)
	if res := d.exec(sb.ID, "sh", "-c", "chmod +x /tmp/scripted-model && python3 /workspace/mcp/make_db.py /workspace/shop.db && "+
		"(nohup /tmp/scripted-model -listen 127.0.0.1:18555 >/tmp/model.log 2>&1 &) && sleep 0.5 && cat /tmp/model.log"); !strings.Contains(res.Stdout, "listening") {
		t.Fatalf("scripted model did not start: %+v", res)
	}
	for _, name := range []string{"claude-code", "codex", "gemini-cli", "opencode", "qwen-code"} {
		t.Run(name, func(t *testing.T) {
			a, _ := all.Get(name)
			work := "/workspace/" + name
			d.exec(sb.ID, "mkdir", "-p", work)
			plan, err := a.Plan(agents.Input{
				Goal:   "Create the file agent_done.txt containing ok.",
				Model:  "scripted-model",
				LLMURL: "http://127.0.0.1:18555",
				APIKey: "sk-agent2env-test",
				MCP: []agents.MCPServer{
					{Name: "db", Command: []string{"python3", "/workspace/mcp/sqlite_mcp.py", "/workspace/shop.db"}},
					{Name: "remote", URL: "http://127.0.0.1:18555" + agenttest.MCPPath},
				},
				Workdir: work,
				Home:    "/home/sandbox",
			})
			if err != nil {
				t.Fatal(err)
			}
			before := d.exec(sb.ID, "sh", "-c", "wc -l < /tmp/model.log").Stdout
			_, events, took := runAgent(t, d, sb.ID, a, plan)
			t.Logf("%s: done in %s", name, took)
			if got := d.exec(sb.ID, "cat", work+"/agent_done.txt"); strings.TrimSpace(got.Stdout) != "ok" {
				t.Errorf("agent_done.txt = %+v", got)
			}
			var result *agents.Event
			for _, e := range events {
				if e.Kind == agents.KindResult {
					result = &e
				}
			}
			if result == nil || result.IsError || !strings.Contains(result.Text, agenttest.FinalText) {
				t.Errorf("result %+v, want the model's final text", result)
			}
			log := d.exec(sb.ID, "sh", "-c", "tail -n +$(("+strings.TrimSpace(before)+"+1)) /tmp/model.log").Stdout
			for _, tool := range []string{"query", agenttest.MCPTool} {
				if !strings.Contains(log, tool) {
					t.Errorf("the model was not offered the MCP tool %s; its requests:\n%s", tool, log)
				}
			}
		})
	}
	d.deleteAll()
	d.assertNoLeaks()
}
