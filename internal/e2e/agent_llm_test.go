package e2e

import (
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/agents"
	"github.com/agent2env/agent2env/internal/agents/all"
	"github.com/agent2env/agent2env/internal/llm/replay"
	"github.com/agent2env/agent2env/internal/task"
)

// TestAgentCLIsThroughProxy runs each agent CLI of agent2env/agent in a
// sandbox of its own, as its adapter plans it, on the example tasks hello,
// fix-failing-test and remote-mcp, against the daemon's LLM proxy at
// 127.0.0.1:4000/llm configured with tasks/replay/llm.yaml and given the
// daemon's MCP server at 127.0.0.1:4000/mcp: every model call goes through
// the proxy in the CLI's own wire format (Anthropic, Responses, Gemini,
// Chat Completions), streaming, and the replay provider answers with the
// task's script for that CLI, whose tool calls (the CLI's own tools, and
// execute_code of the daemon's MCP server as the CLI names it) the CLI
// carries out. Each run exits 0 with no failed tool call, its task's end
// conditions hold, its parser reads the script's final text as the
// result, and the daemon counted every call, each answered 200, under the
// run's model.
func TestAgentCLIsThroughProxy(t *testing.T) {
	agentImageEnabled(t)
	replayDir, err := filepath.Abs(filepath.Join("..", "..", "tasks", "replay"))
	if err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "", func(c *exec.Cmd) { c.Args = append(c.Args, "--llm-config", filepath.Join(replayDir, "llm.yaml")) })
	for _, name := range []string{"claude-code", "codex", "gemini-cli", "opencode", "qwen-code"} {
		t.Run(name, func(t *testing.T) {
			a, ok := all.Get(name)
			if !ok {
				t.Fatalf("no adapter %s", name)
			}
			sb := d.create(api.CreateSandboxRequest{Image: "agent2env/agent", Memory: "2Gi"})
			for _, taskName := range []string{"hello", "fix-failing-test", "remote-mcp"} {
				t.Run(taskName, func(t *testing.T) {
					tk, err := task.LoadFile(filepath.Join("..", "..", "tasks", taskName+".yaml"))
					if err != nil {
						t.Fatal(err)
					}
					script, err := os.ReadFile(filepath.Join(replayDir, taskName, name+".yaml"))
					if err != nil {
						t.Fatal(err)
					}
					s, err := replay.Parse(script)
					if err != nil {
						t.Fatal(err)
					}
					final := s.Turns[len(s.Turns)-1].Text
					model := "replay-" + taskName + "-" + name
					runTaskThroughProxy(t, d, sb.ID, a, tk, model, final, len(s.Turns))
				})
			}
			if code := d.do("DELETE", "/api/v1/sandboxes/"+sb.ID, nil, nil); code != http.StatusNoContent && code != http.StatusOK {
				t.Errorf("delete sandbox: status %d", code)
			}
		})
	}
	// No call of any model failed either (a side call to a model not
	// configured would show here).
	if c := llmRequests(t, d, ""); c.failed != 0 {
		t.Errorf("the proxy answered %d calls with an error", c.failed)
	}
	d.deleteAll()
	d.assertNoLeaks()
}

// runTaskThroughProxy does what the task runner does with tk in sandbox
// id, with agent a and the proxy's model: copies the inputs in, plans and
// runs the agent, checks the end conditions; then compares the result to
// the script's final text and the proxy's count of model's calls to the
// script's turns.
func runTaskThroughProxy(t *testing.T, d *daemon, id string, a agents.Adapter, tk *task.Task, model, final string, turns int) {
	t.Helper()
	for _, in := range tk.Inputs {
		src := filepath.Join(tk.Dir, in.Source)
		err := filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(src, p)
			if code, body := d.upload(id, path.Join(in.Destination, filepath.ToSlash(rel)), b); code != http.StatusOK {
				t.Fatalf("upload %s: %d %s", rel, code, body)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if tk.End.Check != "" {
		// Without bytecode left behind: an edit of the same size in the
		// same second would not invalidate it, and the fixed code would
		// still fail.
		if res := d.exec(id, "sh", "-c", "export PYTHONDONTWRITEBYTECODE=1; "+tk.End.Check); res.ExitCode == 0 {
			t.Fatalf("the check passes before the agent ran: %+v", res)
		}
	}
	plan, err := a.Plan(agents.Input{
		Goal:    tk.Goal,
		Model:   model,
		LLMURL:  "http://127.0.0.1:4000/llm",
		APIKey:  "agent2env",
		MCP:     []agents.MCPServer{{Name: task.OwnMCPServer, URL: "http://127.0.0.1:4000/mcp"}},
		Workdir: tk.Workdir,
		Home:    agents.DefaultHome,
	})
	if err != nil {
		t.Fatal(err)
	}
	before := llmRequests(t, d, model)
	res, events, took := runAgent(t, d, id, a, plan)
	if f := tk.End.SuccessFile; f != "" {
		if res := d.exec(id, "test", "-e", f); res.ExitCode != 0 {
			t.Errorf("%s was not written", f)
		}
	}
	if tk.End.Check != "" {
		if res, out := d.exec(id, "sh", "-c", tk.End.Check), res; res.ExitCode != 0 {
			t.Errorf("check %q failed: %+v\nthe agent's output:\n%s", tk.End.Check, res, out.Stdout)
		}
	}
	var result *agents.Event
	mcpAnswered := false
	for _, e := range events {
		switch {
		case e.Kind == agents.KindResult:
			result = &e
		case e.Kind == agents.KindToolResult && e.IsError:
			t.Errorf("a tool call of the script failed: %s", e.Text)
		case e.Kind == agents.KindToolResult:
			mcpAnswered = mcpAnswered || strings.Contains(e.Text, "338350")
		}
	}
	// remote-mcp's answer comes from execute_code of the daemon's MCP server.
	if tk.Name == "remote-mcp" && !mcpAnswered {
		t.Errorf("no tool result holds execute_code's answer 338350; events:\n%+v", events)
	}
	if result == nil || result.IsError || !strings.Contains(result.Text, final) {
		t.Errorf("result %+v, want the script's final text %q\nstdout:\n%s", result, final, res.Stdout)
	}
	after := llmRequests(t, d, model)
	ok, failed := after.ok-before.ok, after.failed-before.failed
	t.Logf("%s: exit %d in %s, %d model calls", model, res.ExitCode, took, ok+failed)
	// A CLI may make side calls (opencode's title) besides its turns.
	if ok < turns || failed != 0 {
		t.Errorf("the proxy answered %d calls of %s with 200 and %d otherwise, want at least the script's %d turns and no failure",
			ok, model, failed, turns)
	}
}

// runAgent carries out plan in sandbox id as the task runner does: writes
// its files, runs its command (an exit other than 0 is an error of the
// test), and reads its output with a's parser.
func runAgent(t *testing.T, d *daemon, id string, a agents.Adapter, plan *agents.Plan) (api.ExecResponse, []agents.Event, time.Duration) {
	t.Helper()
	for _, f := range plan.Files {
		if code, body := d.upload(id, f.Path, f.Content); code != http.StatusOK {
			t.Fatalf("upload %s: %d %s", f.Path, code, body)
		}
	}
	var res api.ExecResponse
	start := time.Now()
	if code := d.do("POST", "/api/v1/sandboxes/"+id+"/exec", api.ExecRequest{
		Command: plan.Command, Env: plan.Env, Cwd: plan.Dir, Timeout: 240,
	}, &res); code != http.StatusOK {
		t.Fatalf("exec: status %d", code)
	}
	took := time.Since(start).Round(10 * time.Millisecond)
	if res.ExitCode != 0 {
		t.Errorf("exit %d (timed out %v)\nstderr:\n%s\nstdout:\n%s", res.ExitCode, res.TimedOut, res.Stderr, res.Stdout)
	}
	p := a.NewParser()
	var events []agents.Event
	for _, l := range strings.Split(res.Stdout, "\n") {
		events = append(events, p.Line([]byte(l))...)
	}
	return res, append(events, p.Close()...), took
}

type llmCount struct{ ok, failed int }

var llmRequestsLine = regexp.MustCompile(`(?m)^agent2env_llm_requests_total\{code="(\d+)",model="([^"]*)",provider="[^"]*"\} (\d+)$`)

// llmRequests counts the calls of model (of every model when it is "")
// the daemon's /metrics shows.
func llmRequests(t *testing.T, d *daemon, model string) llmCount {
	t.Helper()
	resp, err := http.Get(d.url("/metrics"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var c llmCount
	for _, m := range llmRequestsLine.FindAllStringSubmatch(string(b), -1) {
		if model != "" && m[2] != model {
			continue
		}
		n, _ := strconv.Atoi(m[3])
		if m[1] == "200" {
			c.ok += n
		} else {
			c.failed += n
		}
	}
	return c
}
