package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/agents"
	"github.com/agent2env/agent2env/internal/agents/all"
	"github.com/agent2env/agent2env/internal/llm/replay"
	"github.com/agent2env/agent2env/internal/task"
)

// exampleAgents are the agent CLIs every example task is scripted for
// (tasks/replay/<task>/<agent>.yaml).
var exampleAgents = []string{"claude-code", "codex", "gemini-cli", "opencode", "qwen-code"}

// exampleArtifacts says, per example task, what its artifacts must hold:
// a file (under the run's artifacts directory in --out) and a test of its
// content.
var exampleArtifacts = map[string][]struct {
	path string
	ok   func([]byte) bool
}{
	"hello": {{"workspace/hello.txt", func(b []byte) bool { return string(b) == "hello\n" }}},
	"fix-failing-test": {
		{"workspace/repo/stats.py", func(b []byte) bool { return bytes.Contains(b, []byte("ordered[mid - 1]")) }},
		{"workspace/repo/test_stats.py", func(b []byte) bool { return len(b) > 0 }},
	},
	"analyse-csv": {
		{"workspace/chart.png", func(b []byte) bool { return bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) && len(b) > 1000 }},
		{"workspace/report.md", func(b []byte) bool { return string(b) == "north: 770\nsouth: 480\neast: 455\nwest: 395\n" }},
	},
	"local-mcp":  {{"workspace/answer.txt", func(b []byte) bool { return strings.TrimSpace(string(b)) == "360" }}},
	"remote-mcp": {{"workspace/answer.txt", func(b []byte) bool { return strings.TrimSpace(string(b)) == "338350" }}},
}

// exampleOutput is, per example task, what the agent's output log must
// show: for local-mcp, the answer of the sqlite MCP server's query tool
// (its JSON rows, escaped or not by the CLI's own JSON), so that the
// answer did come from the server the CLI started in the sandbox.
var exampleOutput = map[string]*regexp.Regexp{
	"local-mcp": regexp.MustCompile(`"total\\*":\s*360\b`),
}

// TestTaskExamples runs every example task of tasks/ with each agent CLI
// through the task runner, as a user does: one daemon serving the LLM
// proxy configured with tasks/replay/llm.yaml (no model at all: each
// model replay-<task>-<agent> replays the script that does the task with
// that CLI's own tools), and per task and agent one `agent2env task run
// tasks/<task>.yaml --agent <agent> --model replay-<task>-<agent> --out
// DIR` (for claude-code `task run --name <task>`, the task of the daemon's
// --tasks-dir), all at once (the daemon's --max-runs bounds how many go). Each
// exits 0 with its run succeeded (the agent exited 0, the check passed),
// and leaves in DIR the run's result.json, with the task, agent, model and
// timings of every phase, its output log and its artifacts, whose content
// is the task's answer (the fixed code, the chart PNG and report, the
// numbers asked for). The proxy answered every call, at least one per
// script turn for each model.
func TestTaskExamples(t *testing.T) {
	agentImageEnabled(t)
	tasksDir, err := filepath.Abs(filepath.Join("..", "..", "tasks"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(tasksDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no example tasks in %s: %v", tasksDir, err)
	}
	d := startDaemon(t, "", func(c *exec.Cmd) {
		c.Args = append(c.Args, "--llm-config", filepath.Join(tasksDir, "replay", "llm.yaml"), "--tasks-dir", tasksDir,
			"--max-runs", "4")
	})
	type example struct {
		task, agent, file string
		turns             int
	}
	var examples []example
	for _, f := range files {
		tk, err := task.LoadFile(f)
		if err != nil {
			t.Fatalf("example %s: %v", f, err)
		}
		if _, ok := exampleArtifacts[tk.Name]; !ok {
			t.Errorf("example %s: the test does not know what its artifacts must hold", tk.Name)
			continue
		}
		for _, a := range exampleAgents {
			b, err := os.ReadFile(filepath.Join(tasksDir, "replay", tk.Name, a+".yaml"))
			if err != nil {
				t.Fatalf("example %s: no replay script for %s: %v", tk.Name, a, err)
			}
			s, err := replay.Parse(b)
			if err != nil {
				t.Fatalf("example %s, %s: %v", tk.Name, a, err)
			}
			examples = append(examples, example{tk.Name, a, f, len(s.Turns)})
		}
	}
	out := t.TempDir()
	type outcome struct {
		code int
		text string
		took time.Duration
	}
	outcomes := make([]outcome, len(examples))
	var sandboxes []string
	start := time.Now()
	var wg sync.WaitGroup
	for i, ex := range examples {
		wg.Add(1)
		go func() {
			defer wg.Done()
			began := time.Now()
			which := []string{ex.file}
			if ex.agent == "claude-code" {
				// By name, from the daemon's tasks directory (inputs
				// read there) rather than the file.
				which = []string{"--name", ex.task}
			}
			cmd := exec.Command(binary, slices.Concat([]string{"--url", d.url(""), "task", "run"}, which,
				[]string{"--agent", ex.agent, "--model", "replay-" + ex.task + "-" + ex.agent, "--out", filepath.Join(out, ex.task, ex.agent)})...)
			text, err := cmd.CombinedOutput()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				code = -1
				text = append(text, err.Error()...)
			}
			outcomes[i] = outcome{code, string(text), time.Since(began)}
		}()
	}
	wg.Wait()
	t.Logf("%d runs of %d example tasks in %s", len(examples), len(files), time.Since(start).Round(time.Second))
	for i, ex := range examples {
		t.Run(ex.task+"/"+ex.agent, func(t *testing.T) {
			o := outcomes[i]
			if o.code != 0 {
				t.Errorf("task run exited %d\n%s", o.code, o.text)
			}
			dir := filepath.Join(out, ex.task, ex.agent)
			results, _ := filepath.Glob(filepath.Join(dir, "*", "result.json"))
			if len(results) != 1 {
				t.Fatalf("%d result.json in --out, want 1\n%s", len(results), o.text)
			}
			b, err := os.ReadFile(results[0])
			if err != nil {
				t.Fatal(err)
			}
			var r api.Run
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatalf("result.json: %v", err)
			}
			t.Logf("%s in %s (task run %s): %s; timings %v; llm %+v", r.Status, runTimeOf(r), o.took.Round(time.Millisecond),
				r.Reason, r.Timings, r.LLM)
			if r.Status != api.RunSucceeded || r.Task != ex.task || r.Agent != ex.agent || r.Model != "replay-"+ex.task+"-"+ex.agent {
				t.Errorf("run %s of %s with %s, model %s: %s %q\n%s", r.ID, r.Task, r.Agent, r.Model, r.Status, r.Reason,
					strings.Join(r.OutputTail, "\n"))
			}
			if !strings.Contains(r.Reason, "the check passed") || r.ExitCode == nil || *r.ExitCode != 0 {
				t.Errorf("reason %q, exit code %v: want the agent exited 0 and the check passed", r.Reason, r.ExitCode)
			}
			if r.StartedAt == nil || r.EndedAt == nil {
				t.Errorf("started %v, ended %v", r.StartedAt, r.EndedAt)
			}
			for _, phase := range []string{api.PhaseCreate, api.PhaseInputs, api.PhaseSetup, api.PhaseAgent, api.PhaseCheck, api.PhaseArtifacts} {
				if _, ok := r.Timings[phase]; !ok {
					t.Errorf("no timing of phase %s: %v", phase, r.Timings)
				}
			}
			if r.LLM.Source == "proxy" && r.LLM.Requests < int64(ex.turns) {
				t.Errorf("the proxy counted %d model calls, want at least the script's %d turns", r.LLM.Requests, ex.turns)
			}
			log, err := os.ReadFile(filepath.Join(filepath.Dir(results[0]), "output.log"))
			if err != nil || len(log) == 0 {
				t.Errorf("output.log: %d bytes, %v", len(log), err)
			}
			if re := exampleOutput[ex.task]; re != nil && !re.Match(log) {
				t.Errorf("output.log does not match %s:\n%s", re, log)
			}
			// Read by the agent's parser, as the runner reads its output:
			// no tool call of the script failed.
			a, _ := all.Get(ex.agent)
			p := a.NewParser()
			var events []agents.Event
			for l := range bytes.Lines(log) {
				events = append(events, p.Line(bytes.TrimSuffix(l, []byte("\n")))...)
			}
			for _, e := range append(events, p.Close()...) {
				if e.Kind == agents.KindToolResult && e.IsError {
					t.Errorf("a tool call of the script failed: %s", e.Text)
				}
			}
			for _, a := range exampleArtifacts[ex.task] {
				b, err := os.ReadFile(filepath.Join(filepath.Dir(results[0]), "artifacts", a.path))
				if err != nil || !a.ok(b) {
					t.Errorf("artifact %s: %q (%v)", a.path, clipBytes(b), err)
				}
			}
			if r.SandboxID != "" {
				sandboxes = append(sandboxes, r.SandboxID)
			}
			if c := llmRequests(t, d, r.Model); c.ok < ex.turns || c.failed != 0 {
				t.Errorf("the proxy answered %d calls of %s with 200 and %d otherwise, want at least the script's %d turns and no failure",
					c.ok, r.Model, c.failed, ex.turns)
			}
		})
	}
	if c := llmRequests(t, d, ""); c.failed != 0 {
		t.Errorf("the proxy answered %d calls with an error", c.failed)
	}
	// Each run's sandbox goes once its end is recorded; the sessions
	// execute_code of the daemon's MCP server made (remote-mcp) outlive
	// the runs, and are deleted here.
	for _, id := range sandboxes {
		d.waitGone(id, 30*time.Second)
	}
	d.deleteAll()
	d.stop()
	d.assertNoLeaks()
}

// waitGone waits for sandbox id to be deleted.
func (d *daemon) waitGone(id string, within time.Duration) {
	d.t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(50 * time.Millisecond) {
		var sb api.Sandbox
		code := d.do("GET", "/api/v1/sandboxes/"+id, nil, &sb)
		if code == http.StatusNotFound {
			return
		}
		if time.Now().After(deadline) {
			d.t.Errorf("sandbox %s is still there after %s: %d %+v", id, within, code, sb)
			return
		}
	}
}

// clipBytes is b, or its start when it is long (a PNG), for a message.
func clipBytes(b []byte) []byte {
	if len(b) > 200 {
		return b[:200]
	}
	return b
}
