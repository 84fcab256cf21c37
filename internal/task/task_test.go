package task

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// issueExample is the task file of the issue that asked for task files.
const issueExample = `name: fix-the-bug
template: agent            # or image: <ref>; plus resources: {cpu, memory, disk}
agent: claude-code         # claude-code | codex | gemini-cli | opencode | qwen-code | custom
model: coder               # a model name of the LLM proxy configuration
goal: |                    # the instruction given to the agent
  The tests in /workspace/repo fail. Fix the code so that they pass.
entrypoint: ./run.sh       # optional: a start script; required for agent: custom
workdir: /workspace/repo
env: {KEY: value}
inputs:                    # copied in before the agent starts (paths relative to the task file)
  - {source: ./repo, destination: /workspace/repo}
setup: ["pip install -e ."] # commands run before the agent
mcp:
  - {name: agent2env}                          # the daemon's own shared server (remote)
  - {name: docs, url: https://mcp.example/mcp}  # another remote server (goes through egress rules)
  - {name: db, command: [python3, -m, mcp_sqlite, /workspace/app.db]}  # local, inside the sandbox
end:
  timeout: 30m
  success_file: /workspace/DONE   # optional
  check: "cd /workspace/repo && python3 -m pytest -q"   # optional; exit 0 = success
liveness:
  idle: 5m                 # no progress on any signal this long → the run fails as hung
artifacts: ["/workspace/repo/**/*.py", "/workspace/report.md"]
repeats: 1                 # default k
`

func TestLoadIssueExample(t *testing.T) {
	got, err := Load("fix-the-bug.yaml", []byte(issueExample))
	if err != nil {
		t.Fatal(err)
	}
	want := &Task{
		Name:       "fix-the-bug",
		Template:   "agent",
		Agent:      AgentClaudeCode,
		Model:      "coder",
		Goal:       "The tests in /workspace/repo fail. Fix the code so that they pass.\n",
		Entrypoint: "./run.sh",
		Workdir:    "/workspace/repo",
		Env:        map[string]string{"KEY": "value"},
		Inputs:     []Input{{Source: "./repo", Destination: "/workspace/repo"}},
		Setup:      []string{"pip install -e ."},
		MCP: []MCPServer{
			{Name: "agent2env"},
			{Name: "docs", URL: "https://mcp.example/mcp"},
			{Name: "db", Command: []string{"python3", "-m", "mcp_sqlite", "/workspace/app.db"}},
		},
		End: End{
			Timeout:     Duration(30 * time.Minute),
			SuccessFile: "/workspace/DONE",
			Check:       "cd /workspace/repo && python3 -m pytest -q",
		},
		Liveness:  Liveness{Idle: Duration(5 * time.Minute), Heartbeat: DefaultHeartbeat},
		Artifacts: []string{"/workspace/repo/**/*.py", "/workspace/report.md"},
		Repeats:   1,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("task (-want +got):\n%s", diff)
	}
	if !got.MCP[0].Own() || got.MCP[1].Own() {
		t.Errorf("Own() wrong: %v %v", got.MCP[0].Own(), got.MCP[1].Own())
	}
}

func TestLoadDefaults(t *testing.T) {
	got, err := Load("t.json", []byte(`{"name": "t", "agent": "custom", "goal": "g", "entrypoint": "./run.sh"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := &Task{
		Name: "t", Agent: AgentCustom, Goal: "g", Entrypoint: "./run.sh",
		Image:    DefaultImage,
		Workdir:  DefaultWorkdir,
		End:      End{Timeout: DefaultTimeout},
		Liveness: Liveness{Idle: DefaultIdle, Heartbeat: DefaultHeartbeat},
		Repeats:  1,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

func TestLoadValues(t *testing.T) {
	got, err := Load("t.yaml", []byte(`name: t
agent: codex
model: m
goal: g
image: python:3.12
resources: {cpu: 1.5, memory: 1Gi, disk: 2e9}
env: {N: 1, B: true, S: "x", E: ""}
end: {timeout: 90, exit_code: 3}
liveness: {idle: 1h30m, heartbeat: 10s}
repeats: 5
x-editor: {anything: [1, 2]}
`))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&Resources{CPU: "1.5", Memory: "1Gi", Disk: "2000000000"}, got.Resources); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"N": "1", "B": "true", "S": "x", "E": ""}, got.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	if got.End.Timeout != Duration(90*time.Second) || got.End.ExitCode != 3 {
		t.Errorf("end = %+v", got.End)
	}
	if got.Liveness.Idle != Duration(90*time.Minute) || got.Liveness.Heartbeat != Duration(10*time.Second) {
		t.Errorf("liveness = %+v", got.Liveness)
	}
	if got.Repeats != 5 || got.Image != "python:3.12" || got.Template != "" {
		t.Errorf("repeats %d image %q template %q", got.Repeats, got.Image, got.Template)
	}
}

// badFiles are task files Load refuses, with the problems it reports.
// Those with an empty goOnly (which says why the schema cannot refuse
// them) are invalid against the JSON Schema too.
var badFiles = []struct {
	name, goOnly, file string
	want               []string // FieldError.String()s, in order
}{
	{"unknown agent", "", "name: t\nagent: claud\nmodel: m\ngoal: g\n",
		[]string{`line 2: agent: unknown agent "claud" (one of claude-code, codex, gemini-cli, opencode, qwen-code, custom)`}},
	// Every problem at once: type errors and the rules', but for what the
	// rules say of a field a type error left zero.
	{"type errors and rules", "", "name: x\nagent: foo\nend: {timeout: 1x}\nartifacts: 5\n",
		[]string{`line 3: end.timeout: "1x" is not a duration such as 90s, 30m or 1h30m`,
			"line 4: artifacts: must be a list, not the number 5",
			`line 2: agent: unknown agent "foo" (one of claude-code, codex, gemini-cli, opencode, qwen-code, custom)`,
			"line 1: model: is required for agent foo",
			"line 1: goal: is required"}},
	{"rules about a field of the wrong type", "", "name: x\nagent: codex\nmodel: [1]\ngoal: g\nimage: [x]\n",
		[]string{"line 3: model: must be a string, not a list", "line 5: image: must be a string, not a list"}},
	{"NUL characters", "", "name: t\nagent: custom\ngoal: \"fix\\0it\"\nentrypoint: \"run\\0\"\nsetup: [ok, \"a\\0b\"]\n" +
		"env: {B: \"\\0\", A: \"x\\0\"}\nmcp: [{name: m, command: [srv, \"-\\0\"]}]\n",
		[]string{"line 3: goal: contains a NUL character", "line 4: entrypoint: contains a NUL character",
			"line 6: env.A: contains a NUL character", "line 6: env.B: contains a NUL character",
			"line 5: setup[1]: contains a NUL character", "line 7: mcp[0].command[1]: contains a NUL character"}},
	{"missing goal", "", "name: t\nagent: codex\nmodel: m\n",
		[]string{"line 1: goal: is required"}},
	{"blank goal", "", "name: t\nagent: codex\nmodel: m\ngoal: \"  \"\n",
		[]string{"line 4: goal: is required"}},
	{"missing model", "", "name: t\nagent: codex\ngoal: g\n",
		[]string{"line 1: model: is required for agent codex"}},
	{"custom without entrypoint", "", "name: t\nagent: custom\ngoal: g\n",
		[]string{"line 1: entrypoint: is required for agent custom"}},
	{"bad duration", "", head + "end:\n  timeout: 30 minutes\n",
		[]string{`line 6: end.timeout: "30 minutes" is not a duration such as 90s, 30m or 1h30m`}},
	{"zero duration", "", head + "liveness: {idle: 0s}\n",
		[]string{"line 5: liveness.idle: must be longer than zero"}},
	{"negative seconds", "", head + "liveness: {idle: -5}\n",
		[]string{"line 5: liveness.idle: must be longer than zero"}},
	{"input source escapes", "", head + "inputs:\n  - source: ../secrets\n    destination: /workspace/s\n",
		[]string{`line 6: inputs[0].source: "../secrets" leaves the task file's directory`}},
	{"input source escapes inside", "", head + "inputs:\n  - {source: repo/../../x, destination: /workspace/s}\n",
		[]string{`line 6: inputs[0].source: "repo/../../x" leaves the task file's directory`}},
	{"absolute input source", "", head + "inputs:\n  - {source: /etc, destination: /workspace/s}\n",
		[]string{`line 6: inputs[0].source: "/etc" must be relative to the task file's directory`}},
	{"relative destination", "", head + "inputs:\n  - {source: a, destination: workspace/a}\n",
		[]string{`line 6: inputs[0].destination: "workspace/a" must be an absolute path in the sandbox`}},
	{"duplicate destination", "schema cannot compare items' fields", head + "inputs:\n  - {source: a, destination: /w/a}\n  - {source: b, destination: /w/a}\n",
		[]string{"line 7: inputs[1].destination: /w/a is the destination of an earlier input too"}},
	{"artifact escapes", "", head + "artifacts:\n  - /workspace/ok.txt\n  - /workspace/../etc/shadow\n",
		[]string{`line 7: artifacts[1]: "/workspace/../etc/shadow" must not contain '..'`}},
	{"relative artifact", "", head + "artifacts: [out/*.png]\n",
		[]string{`line 5: artifacts[0]: "out/*.png" must be an absolute path in the sandbox`}},
	{"unknown field", "", head + "entrypiont: ./run.sh\n",
		[]string{`line 5: entrypiont: unknown field (did you mean "entrypoint"?)`}},
	{"unknown nested field", "", head + "end:\n  timout: 5m\n",
		[]string{`line 6: end.timout: unknown field (did you mean "timeout"?)`}},
	{"duplicate key", "the YAML decoder of the schema test refuses it before the schema sees it", head + "goal: again\n",
		[]string{"line 5: goal: is given twice"}},
	{"string wanted", "", "name: t\nagent: [codex]\nmodel: m\ngoal: g\n",
		[]string{"line 2: agent: must be a string, not a list"}},
	{"number is not a string", "", head + "workdir: 5\n",
		[]string{"line 5: workdir: must be a string, not the number 5"}},
	{"null section", "", head + "end:\n",
		[]string{"line 5: end: must be a mapping, not null"}},
	{"template and image", "", head + "template: agent\nimage: python\n",
		[]string{"line 6: image: give template or image, not both"}},
	{"empty image", "", head + "image: \"\"\n",
		[]string{"line 5: image: is empty: leave it out or give a value"}},
	{"bad cpu", "", head + "resources: {cpu: 2 cores}\n",
		[]string{`line 5: resources.cpu: "2 cores" is not a CPU quantity such as 2 or 500m`}},
	{"zero memory", "", head + "resources: {memory: 0Mi}\n",
		[]string{`line 5: resources.memory: "0Mi" is not a size such as 512Mi or 2Gi`}},
	{"bad disk", "", head + "resources: {disk: 2 GB}\n",
		[]string{`line 5: resources.disk: "2 GB" is not a size such as 512Mi or 2Gi`}},
	{"small disk", "a pattern cannot bound a size", head + "resources: {cpu: 1, disk: 1Mi}\n",
		[]string{"line 5: resources.disk: 1Mi is below the 16Mi minimum"}},
	{"timeout too long", "a pattern cannot bound a duration", head + "end: {timeout: 25h}\n",
		[]string{"line 5: end.timeout: 25h0m0s is longer than a run may take, 24h0m0s"}},
	{"timeout in seconds too long", "a pattern cannot bound a duration", head + "end: {timeout: 9223372036}\n",
		[]string{"line 5: end.timeout: 2562047h47m16s is longer than a run may take, 24h0m0s"}},
	{"bad env name", "", head + "env: {\"A-B\": x}\n",
		[]string{`line 5: env.A-B: "A-B" is not an environment variable name`}},
	{"mcp without url or command", "", head + "mcp:\n  - {name: db}\n",
		[]string{"line 6: mcp[0]: needs url (a remote server) or command (a local one)"}},
	{"mcp with both", "", head + "mcp:\n  - {name: db, url: http://x/mcp, command: [a]}\n",
		[]string{"line 6: mcp[0]: give url (a remote server) or command (a local one), not both"}},
	{"mcp own server with url", "", head + "mcp:\n  - {name: agent2env, url: http://x/mcp}\n",
		[]string{`line 6: mcp[0]: "agent2env" is the daemon's own MCP server: give it no url, command, headers or env`}},
	{"mcp bad url", "", head + "mcp:\n  - {name: docs, url: ftp://x}\n",
		[]string{`line 6: mcp[0].url: "ftp://x" is not an http or https URL`}},
	{"mcp duplicate name", "schema cannot compare items' fields", head + "mcp:\n  - {name: agent2env}\n  - {name: agent2env}\n",
		[]string{`line 7: mcp[1].name: another MCP server is named "agent2env" too`}},
	{"repeats zero", "", head + "repeats: 0\n",
		[]string{"line 5: repeats: 0 is not between 1 and 1000"}},
	{"repeats too many", "", head + "repeats: 100000\n",
		[]string{"line 5: repeats: 100000 is not between 1 and 1000"}},
	{"bad name", "", "name: ../x\nagent: codex\nmodel: m\ngoal: g\n",
		[]string{`line 1: name: "../x" is not a name: use letters, digits, '.', '_' and '-' (up to 63)`}},
	{"several problems", "", "name: t\nagent: nope\ngoal: g\nworkdir: rel\n",
		[]string{
			`line 2: agent: unknown agent "nope" (one of claude-code, codex, gemini-cli, opencode, qwen-code, custom)`,
			"line 1: model: is required for agent nope",
			`line 4: workdir: "rel" must be an absolute path in the sandbox`,
		}},
	{"empty file", "nothing to validate", "", []string{"(task): the file is empty"}},
	{"comment only", "nothing to validate", "# nothing\n", []string{"(task): the file is empty"}},
	{"not a mapping", "", "- a\n- b\n", []string{"line 1: (task): must be a mapping, not a list"}},
	{"bad json", "not a document", `{"name": "t",`, nil},
	{"two documents", "the schema sees one document", head + "---\nname: u\n", []string{"(task): the file holds more than one YAML document"}},
}

const head = "name: t\nagent: claude-code\nmodel: m\ngoal: do it\n" // lines 1-4

// TestLoadErrors checks that each bad file fails with a message naming
// the field and the line it is on.
func TestLoadErrors(t *testing.T) {
	for _, tt := range badFiles {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load("t.yaml", []byte(tt.file))
			var te *Error
			if !errors.As(err, &te) {
				t.Fatalf("Load = %v, want a *task.Error", err)
			}
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("error is not ErrInvalidArgument")
			}
			if !strings.HasPrefix(err.Error(), "invalid task file t.yaml: ") {
				t.Errorf("message %q does not name the file", err)
			}
			if tt.want == nil {
				t.Logf("%v", err)
				return
			}
			var got []string
			for _, f := range te.Fields {
				got = append(got, f.String())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadModels(t *testing.T) {
	file := []byte("name: t\nagent: codex\nmodel: gpt\ngoal: g\n")
	if _, err := Load("t.yaml", file, WithModels("coder", "gpt")); err != nil {
		t.Errorf("known model: %v", err)
	}
	_, err := Load("t.yaml", file, WithModels("coder"))
	if err == nil || !strings.Contains(err.Error(), `line 3: model: unknown model "gpt" (the LLM proxy has coder)`) {
		t.Errorf("unknown model: %v", err)
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.yaml")
	if err := os.WriteFile(path, []byte("name: t\nagent: codex\nmodel: m\ngoal: g\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	task, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if task.Dir != dir {
		t.Errorf("Dir = %q, want %q", task.Dir, dir)
	}

	big := filepath.Join(dir, "big.yaml")
	data := []byte("name: t\nagent: codex\nmodel: m\ngoal: |\n" + strings.Repeat("  "+strings.Repeat("x", 100)+"\n", 10<<20/103+1))
	if len(data) <= MaxFileSize {
		t.Fatalf("test file is only %d bytes", len(data))
	}
	if err := os.WriteFile(big, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = LoadFile(big)
	if err == nil || !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "larger than the limit of 10 MiB") {
		t.Errorf("10 MB file: %v", err)
	}

	if _, err := LoadFile(filepath.Join(dir, "missing.yaml")); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("missing file: %v, want ErrNotFound", err)
	}
}

// TestAliasBomb checks that nested aliases, which expand exponentially,
// neither make Load walk the expansion nor list its every problem.
func TestAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("name: t\nagent: codex\nmodel: m\ngoal: g\nx-a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 9; i++ {
		fmt.Fprintf(&b, "x-a%d: &a%d [%s]\n", i, i, strings.Repeat(fmt.Sprintf("*a%d, ", i-1), 9)+fmt.Sprintf("*a%d", i-1))
	}
	b.WriteString("setup: *a8\ninputs: *a8\nartifacts: *a8\nmcp: *a8\n")
	start := time.Now()
	_, err := Load("bomb.yaml", []byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "and 20 more") {
		t.Errorf("Load = %v, want 40 problems, 20 listed", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Load took %s", d)
	}
}

// TestValidate checks overrides applied to a loaded task.
func TestValidate(t *testing.T) {
	task, err := Load("t.yaml", []byte("name: t\nagent: codex\nmodel: m\ngoal: g\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Validate(); err != nil {
		t.Errorf("Validate of a loaded task: %v", err)
	}
	task.Agent = AgentCustom
	err = task.Validate()
	if err == nil || !errors.Is(err, errdefs.ErrInvalidArgument) || err.Error() != "invalid task: entrypoint: is required for agent custom" {
		t.Errorf("Validate = %v", err)
	}
}

// TestJSONRoundTrip checks that a loaded task written as JSON loads back
// as the same task.
func TestJSONRoundTrip(t *testing.T) {
	task, err := Load("t.yaml", []byte(issueExample))
	if err != nil {
		t.Fatal(err)
	}
	js, err := task.JSON()
	if err != nil {
		t.Fatal(err)
	}
	again, err := Load("t.json", js)
	if err != nil {
		t.Fatalf("load %s: %v", js, err)
	}
	if diff := cmp.Diff(task, again); diff != "" {
		t.Errorf("round trip (-first +second):\n%s", diff)
	}
	// Plain JSON decoding reads it back too (a run's record keeps it).
	var decoded Task
	if err := json.Unmarshal(js, &decoded); err != nil {
		t.Fatalf("decode %s: %v", js, err)
	}
	decoded.Dir = task.Dir
	if diff := cmp.Diff(task, &decoded); diff != "" {
		t.Errorf("json round trip (-first +second):\n%s", diff)
	}
	var d Duration
	if err := json.Unmarshal([]byte(`"soon"`), &d); err == nil {
		t.Errorf("decoded a duration of %q", "soon")
	}
}
