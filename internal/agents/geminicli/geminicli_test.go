package geminicli

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/agents"
	"github.com/agent2env/agent2env/internal/agents/agenttest"
)

// sample is a SAMPLE, written by hand from the `gemini -o stream-json`
// lines docs/agent-clis.md records for gemini 0.61.0 (init, message with
// deltas, tool_use, tool_result, result with stats) plus the stderr noise
// it prints; not a recording.
const sample = `{"type":"init","timestamp":"2026-11-24T10:00:00.000Z","session_id":"c0ffee00-1111-2222-3333-444455556666","model":"test-model-7"}
{"type":"message","timestamp":"2026-11-24T10:00:00.010Z","role":"user","content":"Create the file agent_done.txt containing ok."}
{"type":"tool_use","timestamp":"2026-11-24T10:00:01.000Z","tool_name":"run_shell_command","tool_id":"run_shell_command-1-abc","parameters":{"command":"printf ok > agent_done.txt","description":"create the file"}}
{"type":"tool_result","timestamp":"2026-11-24T10:00:01.200Z","tool_id":"run_shell_command-1-abc","status":"success","output":""}
{"type":"message","timestamp":"2026-11-24T10:00:02.000Z","role":"assistant","content":"Created ","delta":true}
{"type":"message","timestamp":"2026-11-24T10:00:02.010Z","role":"assistant","content":"agent_done.txt.","delta":true}
{"type":"result","timestamp":"2026-11-24T10:00:02.100Z","status":"success","stats":{"total_tokens":4100,"input_tokens":4020,"output_tokens":80,"cached":0,"duration_ms":2130,"tool_calls":1}}`

const sampleError = `256-color support not detected
{"type":"init","session_id":"s2","model":"test-model-7"}
{"type":"error","severity":"error","message":"An unexpected critical error occurred"}
{"type":"result","status":"error","error":{"type":"Error","message":"[API Error: 400 scripted failure]"},"stats":{"total_tokens":0,"input_tokens":0,"output_tokens":0}}`

func TestConformance(t *testing.T) {
	agenttest.Run(t, Adapter{},
		agenttest.Sample{Name: "recorded run", Stdout: agenttest.Recorded(t), Tools: []string{"run_shell_command"}, Result: "Done: agent_done.txt contains ok.", LLMCalls: 0},
		agenttest.Sample{Name: "shell then answer", Stdout: sample, Tools: []string{"run_shell_command"}, Result: "Created agent_done.txt."},
		agenttest.Sample{Name: "model error", Stdout: sampleError, Result: "400", ResultError: true},
	)
}

// TestDeltas checks that the assistant's deltas come out as one message.
func TestDeltas(t *testing.T) {
	p := Adapter{}.NewParser()
	var msgs []string
	for _, l := range []string{
		`{"type":"message","role":"assistant","content":"Created ","delta":true}`,
		`{"type":"message","role":"assistant","content":"agent_done.txt.","delta":true}`,
		`{"type":"result","status":"success"}`,
	} {
		for _, e := range p.Line([]byte(l)) {
			if e.Kind == agents.KindMessage {
				msgs = append(msgs, e.Text)
			}
		}
	}
	if diff := cmp.Diff([]string{"Created agent_done.txt."}, msgs); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
}

func TestPlan(t *testing.T) {
	p, err := Adapter{}.Plan(agenttest.Input())
	if err != nil {
		t.Fatal(err)
	}
	if p.Files[0].Path != "/home/sandbox/.gemini/settings.json" {
		t.Errorf("settings at %s", p.Files[0].Path)
	}
	var got, want any
	if err := json.Unmarshal(p.Files[0].Content, &got); err != nil {
		t.Fatal(err)
	}
	json.Unmarshal([]byte(`{
		"security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": false}},
		"general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
		"privacy": {"usageStatisticsEnabled": false}, "telemetry": {"enabled": false},
		"mcpServers": {
			"agent2env": {"httpUrl": "http://127.0.0.1:47002/mcp"},
			"docs": {"httpUrl": "https://mcp.example/mcp", "headers": {"X-Token": "t1"}},
			"db": {"command": "python3", "args": ["/workspace/mcp/sqlite_mcp.py", "/workspace/shop.db"], "env": {"DB_MODE": "ro"}}}}`), &want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("settings (-want +got):\n%s", diff)
	}
	for k, v := range map[string]string{"GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:47001/llm", "GEMINI_API_KEY": "a2e-run-key-123", "GEMINI_MODEL": "test-model-7"} {
		if p.Env[k] != v {
			t.Errorf("env %s = %q, want %q", k, p.Env[k], v)
		}
	}
	wantCmd := []string{"gemini", "-p", agenttest.Input().Goal, "--yolo", "--skip-trust", "-o", "stream-json", "-m", "test-model-7"}
	if diff := cmp.Diff(wantCmd, p.Command); diff != "" {
		t.Errorf("command (-want +got):\n%s", diff)
	}
}
