package all

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/agents"
	"github.com/agent2env/agent2env/internal/agents/agenttest"
	"github.com/agent2env/agent2env/internal/image"
	"github.com/agent2env/agent2env/internal/testenv"
)

// TestRealCLIs runs each agent CLI, configured by its adapter, against a
// scripted model on loopback: the model asks for the CLI's shell tool to
// write agent_done.txt, then answers. It checks the file, the exit code,
// the events the parser reads, and that the CLI offered the model the
// tools of a local MCP server (the sqlite server of tasks/local-mcp) and
// of a remote one (the scripted model's). Then it checks the output
// against the CLI's recorded run, testdata/recorded.jsonl of its
// adapter's package, which the adapter's tests parse: the same kinds of
// lines, the same tool calls, model calls and result (sameRun). A CLI
// whose output changed is recorded again with AGENT2ENV_RECORD=1, which
// writes the fixtures instead of comparing.
//
// The CLIs are agent2env/agent's (see agentCLIs); it runs in make test.
// The task runner's end-to-end tests run the same CLIs in sandboxes.
func TestRealCLIs(t *testing.T) {
	bin := agentCLIs(t)
	python, err := exec.LookPath("python3")
	if err != nil {
		testenv.Missing(t, "python3, which runs tasks/local-mcp's server, is not installed: %v", err)
	}
	mcpServer, err := filepath.Abs(filepath.Join("..", "..", "..", "tasks", "local-mcp"))
	if err != nil {
		t.Fatal(err)
	}
	record := os.Getenv("AGENT2ENV_RECORD") == "1"
	for _, name := range []string{"claude-code", "codex", "gemini-cli", "opencode", "qwen-code"} {
		t.Run(name, func(t *testing.T) {
			a, _ := Get(name)
			model := agenttest.NewScriptedModel(t)
			dir := t.TempDir()
			// The CLIs' temporary files (claude-code's sockets, opencode's
			// native library) go to tmp, not the host's /tmp.
			home, work, tmp := filepath.Join(dir, "home"), filepath.Join(dir, "work"), filepath.Join(dir, "tmp")
			for _, d := range []string{home, work, tmp} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			db := filepath.Join(dir, "shop.db")
			if out, err := exec.Command(python, filepath.Join(mcpServer, "make_db.py"), db).CombinedOutput(); err != nil {
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
			cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "HOME=" + home, "TMPDIR=" + tmp, "LANG=C.UTF-8",
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

			got := parseRun(a, stdout.String())
			t.Logf("%+v, model requests %v", got, model.Paths())
			if runErr != nil {
				t.Errorf("exit: %v\nstderr:\n%s\nstdout:\n%s", runErr, tail(stderr.String()), tail(stdout.String()))
			}
			if b, err := os.ReadFile(filepath.Join(work, "agent_done.txt")); err != nil || strings.TrimSpace(string(b)) != "ok" {
				t.Errorf("agent_done.txt = %q, %v", b, err)
			}
			if len(got.Tools) == 0 {
				t.Errorf("the parser saw no tool call in:\n%s", tail(stdout.String()))
			}
			if got.Results != 1 || got.IsError {
				t.Errorf("%d results, the last %q (error %v); want one success", got.Results, got.Result, got.IsError)
			}
			fixture := filepath.Join("..", strings.ReplaceAll(name, "-", ""), "testdata", "recorded.jsonl")
			if record {
				if err := os.WriteFile(fixture, stdout.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				t.Logf("recorded %s: check its adapter's \"recorded run\" sample", fixture)
			} else if recorded, err := os.ReadFile(fixture); err != nil {
				t.Errorf("the recorded run: %v", err)
			} else {
				sameRun(t, a, string(recorded), stdout.String())
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

// agentCLIs returns the directory holding the CLIs' commands:
// $AGENT2ENV_AGENT_CLIS when set, else, when AGENT2ENV_BUILD_TESTS=1 (make
// test sets it), those of agent2env/agent's npm layer from the image
// build cache, built first if needed (image.Store.AgentCLIs).
func agentCLIs(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("AGENT2ENV_AGENT_CLIS")
	if bin == "" {
		if os.Getenv("AGENT2ENV_BUILD_TESTS") != "1" {
			testenv.Missing(t, "the agent CLIs: set AGENT2ENV_BUILD_TESTS=1 (make test does) to take them from agent2env/agent's npm layer, "+
				"or AGENT2ENV_AGENT_CLIS to a directory holding them")
		}
		if runtime.GOARCH != "amd64" {
			testenv.Skip(t, "agent2env/agent's CLIs are installed for amd64 only, this is %s", runtime.GOARCH)
		}
		s, err := image.Open(filepath.Join(t.TempDir(), "images"))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if bin, err = s.AgentCLIs(context.Background(), func(p image.Progress) {
			if p.Phase == image.PhaseBuild && !strings.HasPrefix(p.Item, "fetched ") {
				t.Logf("%s: %s", time.Since(start).Round(time.Second), p.Item)
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []string{"claude", "codex", "gemini", "opencode", "qwen", "node"} {
		if fi, err := os.Stat(filepath.Join(bin, c)); err != nil || fi.Mode()&0o111 == 0 {
			testenv.Missing(t, "the agent CLIs: %s has no command %s", bin, c)
		}
	}
	return bin
}

// run is what matters of a CLI's output: the kinds of its lines and what
// its adapter's parser reads from it.
type run struct {
	// Lines are the distinct kinds of JSON lines, "type" or "type/subtype".
	Lines []string
	// Tools are the tools called, in order.
	Tools []string
	// LLMCalls is the number of model calls the output reports.
	LLMCalls int
	// Results counts the results; Result is the last one's text and
	// IsError whether it is a failure.
	Results int
	Result  string
	IsError bool
}

// parseRun reads stdout as the adapter's parser does.
func parseRun(a agents.Adapter, stdout string) run {
	var r run
	kinds := map[string]bool{}
	p := a.NewParser()
	var evs []agents.Event
	for _, l := range strings.Split(stdout, "\n") {
		var line struct{ Type, Subtype string }
		if json.Unmarshal([]byte(l), &line) == nil && line.Type != "" {
			k := line.Type
			if line.Subtype != "" {
				k += "/" + line.Subtype
			}
			kinds[k] = true
		}
		evs = append(evs, p.Line([]byte(l))...)
	}
	evs = append(evs, p.Close()...)
	r.Lines = slices.Sorted(maps.Keys(kinds))
	for _, e := range evs {
		switch e.Kind {
		case agents.KindToolCall:
			r.Tools = append(r.Tools, e.Tool)
		case agents.KindLLMCall:
			r.LLMCalls++
		case agents.KindResult:
			r.Results++
			r.Result, r.IsError = e.Text, e.IsError
		}
	}
	return r
}

// sameRun fails t when the run of stdout differs from the recorded one in
// what matters (see run): the recording, which the adapter's tests check
// the parser against, would no longer be what the CLI prints.
func sameRun(t *testing.T, a agents.Adapter, recorded, stdout string) {
	t.Helper()
	if diff := cmp.Diff(parseRun(a, recorded), parseRun(a, stdout)); diff != "" {
		t.Errorf("the CLI's output is no longer what testdata/recorded.jsonl of its adapter holds (-recorded +now):\n%s"+
			"record it again with AGENT2ENV_RECORD=1 and check the adapter against it", diff)
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
