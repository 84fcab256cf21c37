package task

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/testenv"
)

// goodFiles are task files both the loader and the schema accept.
var goodFiles = []struct{ name, file string }{
	{"issue example", issueExample},
	{"minimal", "name: t\nagent: codex\nmodel: m\ngoal: g\n"},
	{"custom", "name: t\nagent: custom\ngoal: g\nentrypoint: ./run.sh\n"},
	{"custom with model", "name: t\nagent: custom\nmodel: m\ngoal: g\nentrypoint: ./run.sh\n"},
	{"json", `{"name": "t", "agent": "gemini-cli", "model": "m", "goal": "g", "repeats": 3, "end": {"timeout": "1h"}}`},
	{"json float integer", `{"name": "t", "agent": "opencode", "model": "m", "goal": "g", "repeats": 3.0, "end": {"timeout": 60.0}}`},
	{"every field", head + `description: anything
image: docker.io/library/python:3.12
resources: {cpu: 500m, memory: 1.5Gi, disk: 10G}
entrypoint: ./start.sh
workdir: /workspace/repo
env: {A: "1", B: 2, C: true, _D: ""}
inputs: [{source: repo, destination: /workspace/repo}, {source: data/x.csv, destination: /workspace/x.csv}]
setup: [pip install -e ., make]
mcp:
  - name: agent2env
  - {name: docs, url: "https://mcp.example/mcp", headers: {Authorization: Bearer x}}
  - {name: db, command: [python3, server.py, ""], env: {DB: /workspace/app.db}}
end: {timeout: 1h30m, exit_code: 0, success_file: /workspace/DONE, check: pytest -q}
liveness: {idle: 300, heartbeat: 15s}
artifacts: ["/workspace/**/*.py", /workspace/report.md]
repeats: 1000
x-note: free
`},
	{"numeric resources", head + "resources: {cpu: 2, memory: 536870912, disk: 1073741824.5}\n"},
	{"dots that are not ..", head + "inputs: [{source: ./a..b/.c, destination: /w/..x/y..}]\nartifacts: [/w/...]\n"},
	{"fractional durations", head + "end: {timeout: 1.5h}\nliveness: {idle: 2m30s, heartbeat: 500ms}\n"},
}

func compileSchema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(api.TaskSchema))
	if err != nil {
		t.Fatalf("api/task.schema.json: %v", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("task.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("task.schema.json")
	if err != nil {
		t.Fatalf("compile api/task.schema.json: %v", err)
	}
	return s
}

// schemaValidate validates a YAML or JSON document against the schema.
func schemaValidate(t testing.TB, s *jsonschema.Schema, file string) error {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(file), &v); err != nil {
		return err
	}
	js, err := json.Marshal(v)
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	return s.Validate(inst)
}

// TestSchemaAgrees checks that the Go loader and api/task.schema.json
// accept and refuse the same files.
func TestSchemaAgrees(t *testing.T) {
	s := compileSchema(t)
	for _, tt := range goodFiles {
		t.Run("good/"+tt.name, func(t *testing.T) {
			if _, err := Load("t.yaml", []byte(tt.file)); err != nil {
				t.Errorf("Load: %v", err)
			}
			if err := schemaValidate(t, s, tt.file); err != nil {
				t.Errorf("schema: %v", err)
			}
		})
	}
	for _, tt := range badFiles {
		if tt.goOnly != "" {
			continue
		}
		t.Run("bad/"+tt.name, func(t *testing.T) {
			if err := schemaValidate(t, s, tt.file); err == nil {
				t.Errorf("the schema accepts what Load refuses (%q)", tt.want)
			}
		})
	}
}

// TestSchemaPatterns checks that the schema's patterns are the loader's.
func TestSchemaPatterns(t *testing.T) {
	var schema map[string]any
	if err := json.Unmarshal(api.TaskSchema, &schema); err != nil {
		t.Fatal(err)
	}
	defs := schema["$defs"].(map[string]any)
	tests := []struct {
		def  string
		want []*regexp.Regexp
	}{
		{"name", []*regexp.Regexp{namePattern}},
		{"model", []*regexp.Regexp{modelPattern}},
		{"envName", []*regexp.Regexp{envNamePattern}},
		{"duration", []*regexp.Regexp{durationPattern}},
		{"cpu", []*regexp.Regexp{cpuPattern}},
		{"bytes", []*regexp.Regexp{bytesPattern}},
		{"sandboxPath", []*regexp.Regexp{absPathPattern, dotDotPattern}},
		{"relPath", []*regexp.Regexp{absPathPattern, dotDotPattern}},
		{"mcpServer", []*regexp.Regexp{mcpNamePattern, httpURLPattern}},
	}
	for _, tt := range tests {
		got := map[string]bool{}
		collectPatterns(defs[tt.def], got)
		for _, re := range tt.want {
			if !got[re.String()] {
				t.Errorf("$defs/%s has no pattern %q (has %v)", tt.def, re, got)
			}
		}
	}
	var agents []string
	for _, a := range schema["properties"].(map[string]any)["agent"].(map[string]any)["enum"].([]any) {
		agents = append(agents, a.(string))
	}
	if strings.Join(agents, ",") != strings.Join(Agents, ",") {
		t.Errorf("schema agents %v, loader %v", agents, Agents)
	}
}

func collectPatterns(v any, into map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && k == "pattern" {
				into[s] = true
			}
			collectPatterns(x, into)
		}
	case []any:
		for _, x := range v {
			collectPatterns(x, into)
		}
	}
}

// TestExamples loads every task file in the repository's tasks/ directory
// and validates it against the schema.
func TestExamples(t *testing.T) {
	s := compileSchema(t)
	var files []string
	for _, pat := range []string{"*.yaml", "*.yml", "*.json"} {
		m, err := filepath.Glob(filepath.Join("..", "..", "tasks", pat))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 5 {
		t.Fatalf("found %d task files in tasks/, want the 5 examples at least", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			task, err := LoadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := schemaValidate(t, s, string(data)); err != nil {
				t.Errorf("schema: %v", err)
			}
			for i, in := range task.Inputs {
				if _, err := os.Stat(filepath.Join(task.Dir, in.Source)); err != nil {
					t.Errorf("inputs[%d]: %v", i, err)
				}
			}
			if name := strings.TrimSuffix(filepath.Base(f), filepath.Ext(f)); task.Name != name {
				t.Errorf("name %q, file %s", task.Name, filepath.Base(f))
			}
		})
	}
}

// FuzzLoad feeds Load arbitrary bytes: it must not panic, and a task it
// accepts must come back the same from its JSON and pass Validate.
func FuzzLoad(f *testing.F) {
	for _, g := range goodFiles {
		f.Add([]byte(g.file))
	}
	for _, b := range badFiles {
		f.Add([]byte(b.file))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		task, err := Load("fuzz.yaml", data)
		if err != nil {
			return
		}
		if err := task.Validate(); err != nil {
			t.Fatalf("loaded task does not validate: %v", err)
		}
		js, err := task.JSON()
		if err != nil {
			t.Fatal(err)
		}
		again, err := Load("fuzz.json", js)
		if err != nil {
			t.Fatalf("JSON of a loaded task does not load: %v\n%s", err, js)
		}
		if a, b := mustJSON(t, task), mustJSON(t, again); a != b {
			t.Fatalf("round trip changed the task:\n%s\n%s", a, b)
		}
	})
}

func mustJSON(t *testing.T, task *Task) string {
	js, err := task.JSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(js)
}

// TestLocalMCPExample speaks MCP to the local-mcp example's server: the
// task's answer must come out of it, and it must refuse writes.
func TestLocalMCPExample(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		testenv.Missing(t, "python3 is not installed (scripts/test-peers.sh installs it)")
	}
	dir := filepath.Join("..", "..", "tasks", "local-mcp")
	db := filepath.Join(t.TempDir(), "shop.db")
	if out, err := exec.Command(py, filepath.Join(dir, "make_db.py"), db).CombinedOutput(); err != nil {
		t.Fatalf("make_db.py: %v\n%s", err, out)
	}
	requests := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"query","arguments":{"sql":"SELECT sum(o.total) AS total FROM orders o JOIN customers c ON c.id = o.customer_id WHERE c.city = 'Lisbon' AND o.status = 'shipped'"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"query","arguments":{"sql":"DELETE FROM orders"}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"no/such"}`,
	}
	cmd := exec.Command(py, filepath.Join(dir, "sqlite_mcp.py"), db)
	cmd.Stdin = strings.NewReader(strings.Join(requests, "\n") + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sqlite_mcp.py: %v", err)
	}
	var replies []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("reply %q: %v", line, err)
		}
		replies = append(replies, r)
	}
	if len(replies) != 5 {
		t.Fatalf("%d replies, want 5 (the notification has none):\n%s", len(replies), out)
	}
	text := func(r map[string]any) string {
		res, _ := r["result"].(map[string]any)
		content, _ := res["content"].([]any)
		if len(content) == 0 {
			return ""
		}
		return content[0].(map[string]any)["text"].(string)
	}
	if v := replies[0]["result"].(map[string]any)["protocolVersion"]; v != "2025-06-18" {
		t.Errorf("protocolVersion %v", v)
	}
	if got := text(replies[2]); got != `[{"total": 360}]` {
		t.Errorf("query = %s, want the answer the task checks for (360)", got)
	}
	if got := text(replies[3]); !strings.Contains(got, "readonly") {
		t.Errorf("DELETE = %s, want a refusal", got)
	}
	if e, _ := replies[4]["error"].(map[string]any); e == nil || e["code"] != -32601.0 {
		t.Errorf("unknown method: %v", replies[4])
	}
}
