// Package agenttest is the conformance suite every agent adapter passes:
// what its Plan must carry (the proxy's URL and key, the model, the goal
// as one argument, each MCP server, files only under $HOME and private)
// and what its Parser must read from a run's output (tool calls, model
// calls, the result) without failing on lines it does not know.
package agenttest

import (
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/agents"
)

// Sample is an agent's standard output and what the parser must read
// from it.
type Sample struct {
	Name   string
	Stdout string
	// Tools are the tools called, in order.
	Tools []string
	// Result is a part of the final result's text; ResultError whether
	// the result is a failure.
	Result      string
	ResultError bool
	// LLMCalls is how many model calls the output reports.
	LLMCalls int
}

// Input is the run the suite plans: every kind of MCP server, a task
// environment, a key, a model and a goal that each must be found again.
func Input() agents.Input {
	return agents.Input{
		Goal:   "Create the file agent_done.txt containing ok. Don't \"quote\" $HOME; it's fine.",
		Model:  "test-model-7",
		LLMURL: "http://127.0.0.1:47001/llm",
		APIKey: "a2e-run-key-123",
		MCP: []agents.MCPServer{
			{Name: "agent2env", URL: "http://127.0.0.1:47002/mcp"},
			{Name: "docs", URL: "https://mcp.example/mcp", Headers: map[string]string{"X-Token": "t1"}},
			{Name: "db", Command: []string{"python3", "/workspace/mcp/sqlite_mcp.py", "/workspace/shop.db"}, Env: map[string]string{"DB_MODE": "ro"}},
		},
		Workdir:    "/workspace/repo",
		Home:       "/home/sandbox",
		Entrypoint: "./run.sh --fast",
		Env:        map[string]string{"TASK_VAR": "task-value"},
	}
}

// Run checks adapter a against the suite and the samples.
func Run(t *testing.T, a agents.Adapter, samples ...Sample) {
	t.Run("Plan", func(t *testing.T) { testPlan(t, a) })
	t.Run("PlanWithoutMCP", func(t *testing.T) { testNoMCP(t, a) })
	t.Run("GoalLikeAnOption", func(t *testing.T) { testDashGoal(t, a) })
	t.Run("ParserRobust", func(t *testing.T) { testRobust(t, a) })
	for _, s := range samples {
		t.Run("Sample/"+s.Name, func(t *testing.T) { testSample(t, a, s) })
	}
}

func plan(t *testing.T, a agents.Adapter, in agents.Input) *agents.Plan {
	t.Helper()
	p, err := a.Plan(in)
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	again, err := a.Plan(in)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(p, again); diff != "" {
		t.Errorf("Plan is not deterministic (-first +second):\n%s", diff)
	}
	return p
}

// custom reports whether a is the custom agent, which runs the entrypoint
// and has no configuration of its own.
func custom(a agents.Adapter) bool { return a.Name() == "custom" }

func testPlan(t *testing.T, a agents.Adapter) {
	in := Input()
	p := plan(t, a, in)
	if len(p.Command) == 0 || p.Command[0] == "" {
		t.Fatalf("Command = %q", p.Command)
	}
	if p.Dir != in.Workdir {
		t.Errorf("Dir = %q, want the workdir %q", p.Dir, in.Workdir)
	}
	for k, want := range map[string]string{
		"TASK_VAR":              "task-value",
		"AGENT2ENV_LLM_URL":     in.LLMURL,
		"AGENT2ENV_API_KEY":     in.APIKey,
		"AGENT2ENV_MODEL":       in.Model,
		"AGENT2ENV_MCP_URL":     "http://127.0.0.1:47002/mcp",
		"OPENAI_BASE_URL":       in.LLMURL + "/v1",
		"ANTHROPIC_BASE_URL":    in.LLMURL,
		"AGENT2ENV_MCP_SERVERS": "",
	} {
		got, ok := p.Env[k]
		if !ok || (want != "" && got != want) {
			t.Errorf("Env[%s] = %q (set %v), want %q", k, got, ok, want)
		}
	}
	for _, f := range p.Files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || !strings.HasPrefix(f.Path, in.Home+"/") {
			t.Errorf("file %s is not a clean path under $HOME %s", f.Path, in.Home)
		}
		if f.Mode&0o077 != 0 || f.Mode&0o600 != 0o600 {
			t.Errorf("file %s has mode %o, want private (it may hold the key)", f.Path, f.Mode)
		}
		if strings.HasSuffix(f.Path, ".json") && !json.Valid(f.Content) {
			t.Errorf("file %s is not JSON:\n%s", f.Path, f.Content)
		}
	}
	if custom(a) {
		if diff := cmp.Diff([]string{"/bin/sh", "-c", in.Entrypoint}, p.Command); diff != "" {
			t.Errorf("custom command (-want +got):\n%s", diff)
		}
		if len(p.Files) != 0 {
			t.Errorf("custom agent writes files: %v", p.Files)
		}
		for _, s := range in.MCP {
			if !strings.Contains(p.Env["AGENT2ENV_MCP_SERVERS"], s.Name) {
				t.Errorf("AGENT2ENV_MCP_SERVERS %q lacks %s", p.Env["AGENT2ENV_MCP_SERVERS"], s.Name)
			}
		}
		return
	}
	if n := count(p.Command, in.Goal); n != 1 {
		t.Errorf("the goal is %d arguments of %q, want exactly one", n, p.Command)
	}
	everything := strings.Join(p.Command, "\n") + "\n" + envText(p.Env)
	for _, f := range p.Files {
		if strings.Contains(string(f.Content), in.Goal) {
			t.Errorf("the goal is written into %s: it belongs on the command line", f.Path)
		}
		everything += "\n" + string(f.Content)
	}
	config := everything[len(strings.Join(p.Command, "\n")):] // env and files
	if !strings.Contains(config, in.LLMURL) {
		t.Errorf("the LLM URL %s is in neither the environment nor a file", in.LLMURL)
	}
	if !strings.Contains(config, in.APIKey) {
		t.Errorf("the key is in neither the environment nor a file")
	}
	if !strings.Contains(everything, in.Model) {
		t.Errorf("the model %s is nowhere in the plan", in.Model)
	}
	mcpText := strings.Join(p.Command, "\n")
	for _, f := range p.Files {
		mcpText += "\n" + string(f.Content)
	}
	for _, s := range in.MCP {
		want := []string{s.Name}
		if s.Remote() {
			want = append(want, s.URL)
			for _, v := range s.Headers {
				want = append(want, v)
			}
		} else {
			want = append(want, s.Command...)
			for _, v := range s.Env {
				want = append(want, v)
			}
		}
		for _, w := range want {
			if !strings.Contains(mcpText, w) {
				t.Errorf("MCP server %s: %q is in neither the command nor a file", s.Name, w)
			}
		}
	}
}

func testNoMCP(t *testing.T, a agents.Adapter) {
	in := Input()
	in.MCP = nil
	p := plan(t, a, in)
	text := strings.Join(p.Command, "\n")
	for _, f := range p.Files {
		text += "\n" + string(f.Content)
	}
	for _, s := range Input().MCP {
		mark := s.URL
		if !s.Remote() {
			mark = s.Command[1]
		}
		if strings.Contains(text, mark) {
			t.Errorf("plan without MCP servers still configures %s", s.Name)
		}
	}
	if _, ok := p.Env["AGENT2ENV_MCP_SERVERS"]; ok {
		t.Error("AGENT2ENV_MCP_SERVERS set without MCP servers")
	}
}

func testDashGoal(t *testing.T, a agents.Adapter) {
	if custom(a) {
		return
	}
	in := Input()
	in.Goal = "--help me fix the tests"
	p := plan(t, a, in)
	if slices.Contains(p.Command[1:], in.Goal) {
		t.Errorf("goal %q passed as it is: the CLI would take it for an option", in.Goal)
	}
	if count(p.Command, " "+in.Goal) != 1 {
		t.Errorf("goal not found once as %q in %q", " "+in.Goal, p.Command)
	}
}

// testRobust feeds the parser lines of every shape it may meet: it must not
// panic, and a line that is not JSON is output.
func testRobust(t *testing.T, a agents.Adapter) {
	p := a.NewParser()
	for _, l := range []string{
		"", "   ", "plain warning line", "{", "[1,2]", "{}", `{"type":5}`, `{"type":null}`,
		`{"type":"assistant","message":{"content":5}}`, `{"type":"assistant","message":null}`,
		`{"type":"user","message":{"content":"x"}}`, `{"type":"result"}`,
		`{"type":"item.completed","item":null}`, `{"type":"item.started","item":{"type":"command_execution"}}`,
		`{"type":"turn.completed","usage":null}`, `{"type":"tool_use","part":null}`, `{"type":"step_finish","part":{"tokens":null}}`,
		`{"type":"message","role":"assistant","content":"x","delta":true}`, `{"type":"error","error":{"data":5}}`,
		"\x00\xff\xfe", strings.Repeat("x", 1<<16),
	} {
		p.Line([]byte(l))
	}
	p.Close()
	evs := a.NewParser().Line([]byte("plain warning line"))
	if len(evs) != 1 || evs[0].Kind != agents.KindOutput || evs[0].Text != "plain warning line" {
		t.Errorf("a plain line gives %+v, want one output event", evs)
	}
}

func testSample(t *testing.T, a agents.Adapter, s Sample) {
	p := a.NewParser()
	var evs []agents.Event
	for _, l := range strings.Split(s.Stdout, "\n") {
		evs = append(evs, p.Line([]byte(l))...)
	}
	evs = append(evs, p.Close()...)
	var tools []string
	var results []agents.Event
	calls := 0
	for _, e := range evs {
		switch e.Kind {
		case agents.KindToolCall:
			tools = append(tools, e.Tool)
			if len(e.Input) > 0 && !json.Valid(e.Input) {
				t.Errorf("tool call %s input is not JSON: %s", e.Tool, e.Input)
			}
		case agents.KindLLMCall:
			calls++
		case agents.KindResult:
			results = append(results, e)
		}
	}
	if diff := cmp.Diff(s.Tools, tools); diff != "" {
		t.Errorf("tool calls (-want +got):\n%s", diff)
	}
	if calls != s.LLMCalls {
		t.Errorf("%d model calls, want %d", calls, s.LLMCalls)
	}
	if len(results) != 1 {
		t.Fatalf("%d results, want 1: %+v", len(results), evs)
	}
	if r := results[0]; r.IsError != s.ResultError || !strings.Contains(r.Text, s.Result) {
		t.Errorf("result %+v, want error=%v with %q", r, s.ResultError, s.Result)
	}
	if t.Failed() {
		for _, e := range evs {
			t.Logf("%+v", e)
		}
	}
}

// Recorded returns testdata/recorded.jsonl of the package under test: the
// standard output of a real run of its CLI (from agent2env/agent,
// configured by its adapter) against the scripted model of package all's
// TestRealCLIs.
func Recorded(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "recorded.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func count(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

func envText(env map[string]string) string {
	var b strings.Builder
	for k, v := range env {
		b.WriteString(k + "=" + v + "\n")
	}
	return b.String()
}
