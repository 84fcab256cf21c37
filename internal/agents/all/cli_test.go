package all

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/agents"
	"github.com/agent2env/agent2env/internal/agents/agenttest"
)

// TestRealCLIs runs each agent CLI, configured by its adapter, against a
// scripted model on loopback: the model asks for the CLI's shell tool to
// write agent_done.txt, then answers. It checks the file, the exit code,
// the events the parser reads, and that the CLI offered the model the
// tools of a local MCP server (the sqlite server of tasks/local-mcp) and
// of a remote one (the scripted model's).
//
// It needs the CLIs: AGENT2ENV_AGENT_CLIS names a directory holding
// claude, codex, gemini, opencode, qwen and node 22 (such as
// node_modules/.bin of agent2env/agent's npm layer, unpacked). The task
// runner's end-to-end tests run the same CLIs in sandboxes.
func TestRealCLIs(t *testing.T) {
	bin := os.Getenv("AGENT2ENV_AGENT_CLIS")
	if bin == "" {
		t.Skip("set AGENT2ENV_AGENT_CLIS to a directory with the agent CLIs to run them")
	}
	mcpServer, err := filepath.Abs(filepath.Join("..", "..", "..", "tasks", "local-mcp"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"claude-code", "codex", "gemini-cli", "opencode", "qwen-code"} {
		t.Run(name, func(t *testing.T) {
			a, _ := Get(name)
			model := agenttest.NewScriptedModel(t)
			dir := t.TempDir()
			home, work := filepath.Join(dir, "home"), filepath.Join(dir, "work")
			for _, d := range []string{home, work} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			db := filepath.Join(dir, "shop.db")
			if out, err := exec.Command("python3", filepath.Join(mcpServer, "make_db.py"), db).CombinedOutput(); err != nil {
				t.Fatalf("make_db.py: %v %s", err, out)
			}
			plan, err := a.Plan(agents.Input{
				Goal:   "Create the file agent_done.txt containing ok.",
				Model:  "scripted-model",
				LLMURL: model.URL,
				APIKey: "sk-agent2env-test",
				MCP: []agents.MCPServer{
					{Name: "db", Command: []string{"python3", filepath.Join(mcpServer, "sqlite_mcp.py"), db}},
					{Name: "remote", URL: model.URL + agenttest.MCPPath},
				},
				Workdir: work,
				Home:    home,
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range plan.Files {
				if err := os.MkdirAll(filepath.Dir(f.Path), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(f.Path, f.Content, os.FileMode(f.Mode)); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(bin, plan.Command[0]), plan.Command[1:]...)
			cmd.Dir = plan.Dir
			// Anything that is not loopback goes to a proxy that logs and
			// refuses it.
			proxy := newRefusingProxy(t)
			cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "HOME=" + home, "LANG=C.UTF-8",
				"HTTPS_PROXY=" + proxy.url, "HTTP_PROXY=" + proxy.url, "https_proxy=" + proxy.url, "http_proxy=" + proxy.url,
				"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost"}
			for k, v := range plan.Env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			start := time.Now()
			runErr := cmd.Run()
			t.Logf("%s ran %s: %v", name, time.Since(start).Round(10*time.Millisecond), runErr)

			p := a.NewParser()
			var evs []agents.Event
			for _, l := range strings.Split(stdout.String(), "\n") {
				evs = append(evs, p.Line([]byte(l))...)
			}
			evs = append(evs, p.Close()...)
			var tools []string
			var result *agents.Event
			for i, e := range evs {
				switch e.Kind {
				case agents.KindToolCall:
					tools = append(tools, e.Tool)
				case agents.KindResult:
					result = &evs[i]
				}
			}
			t.Logf("tool calls %v, result %+v, model requests %v", tools, result, model.Paths())
			if runErr != nil {
				t.Errorf("exit: %v\nstderr:\n%s\nstdout:\n%s", runErr, tail(stderr.String()), tail(stdout.String()))
			}
			if b, err := os.ReadFile(filepath.Join(work, "agent_done.txt")); err != nil || strings.TrimSpace(string(b)) != "ok" {
				t.Errorf("agent_done.txt = %q, %v", b, err)
			}
			if len(tools) == 0 {
				t.Errorf("the parser saw no tool call in:\n%s", tail(stdout.String()))
			}
			if result == nil || result.IsError {
				t.Errorf("result %+v", result)
			}
			if dir := os.Getenv("AGENT2ENV_RECORD_DIR"); dir != "" {
				os.WriteFile(filepath.Join(dir, name+".jsonl"), stdout.Bytes(), 0o644)
			}
			// opencode's one background fetch of its plugin package from the
			// npm registry is known and harmless (docs/agent-clis.md).
			for _, req := range proxy.requests() {
				if name == "opencode" && strings.Contains(req, "registry.npmjs.org") {
					continue
				}
				t.Errorf("%s reached for the network: %s", name, req)
			}
			if !model.SawTool("query") {
				t.Errorf("the model was not offered the local db server's query tool: the MCP config did not take")
			}
			if !model.SawTool(agenttest.MCPTool) {
				t.Errorf("the model was not offered the remote server's %s tool: the MCP config did not take", agenttest.MCPTool)
			}
		})
	}
}

// refusingProxy logs the first line of every request sent to it (a
// CONNECT for HTTPS) and answers 403.
type refusingProxy struct {
	url  string
	mu   sync.Mutex
	seen []string
}

func newRefusingProxy(t *testing.T) *refusingProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &refusingProxy{url: "http://" + l.Addr().String()}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				line, _ := bufio.NewReader(c).ReadString('\n')
				p.mu.Lock()
				p.seen = append(p.seen, strings.TrimSpace(line))
				p.mu.Unlock()
				io.WriteString(c, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			}()
		}
	}()
	t.Cleanup(func() { l.Close() })
	return p
}

func (p *refusingProxy) requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen...)
}

func tail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return s
}
