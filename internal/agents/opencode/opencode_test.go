package opencode

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/agents/agenttest"
)

// sample is a SAMPLE, written by hand from the `opencode run --format
// json` events docs/agent-clis.md records for opencode 1.18.33
// (step_start, tool_use with the call's state, step_finish with reason
// and tokens, text); not a recording. The title side call makes no event.
const sample = `{"type":"step_start","timestamp":1764000000000,"sessionID":"ses_5a1b2c3d4e","part":{"id":"prt_1","sessionID":"ses_5a1b2c3d4e","messageID":"msg_1","type":"step-start"}}
{"type":"tool_use","timestamp":1764000001000,"sessionID":"ses_5a1b2c3d4e","part":{"id":"prt_2","type":"tool","callID":"call_1","tool":"bash","state":{"status":"completed","input":{"command":"printf ok > agent_done.txt","description":"create the file"},"output":"","title":"printf ok > agent_done.txt","metadata":{"exit":0}}}}
{"type":"step_finish","timestamp":1764000001100,"sessionID":"ses_5a1b2c3d4e","part":{"id":"prt_3","type":"step-finish","reason":"tool-calls","cost":0,"tokens":{"input":3900,"output":40,"reasoning":0,"cache":{"read":0,"write":0}}}}
{"type":"step_start","timestamp":1764000001200,"sessionID":"ses_5a1b2c3d4e","part":{"id":"prt_4","type":"step-start"}}
{"type":"text","timestamp":1764000002000,"sessionID":"ses_5a1b2c3d4e","part":{"id":"prt_5","type":"text","text":"Created agent_done.txt containing ok."}}
{"type":"step_finish","timestamp":1764000002100,"sessionID":"ses_5a1b2c3d4e","part":{"id":"prt_6","type":"step-finish","reason":"stop","cost":0,"tokens":{"input":3990,"output":12,"reasoning":0,"cache":{"read":3800,"write":0}}}}`

// sampleToolError is a SAMPLE of a failed tool call, then the answer.
const sampleToolError = `{"type":"step_start","sessionID":"s2","part":{"type":"step-start"}}
{"type":"tool_use","sessionID":"s2","part":{"type":"tool","callID":"c1","tool":"write","state":{"status":"error","input":{"filePath":"/etc/x","content":"ok"},"error":"EACCES: permission denied"}}}
{"type":"step_finish","sessionID":"s2","part":{"type":"step-finish","reason":"tool-calls","tokens":{"input":10,"output":5,"reasoning":0,"cache":{"read":0}}}}
{"type":"text","sessionID":"s2","part":{"type":"text","text":"I could not write /etc/x."}}
{"type":"step_finish","sessionID":"s2","part":{"type":"step-finish","reason":"stop","tokens":{"input":20,"output":8,"reasoning":0,"cache":{"read":0}}}}`

func TestConformance(t *testing.T) {
	agenttest.Run(t, Adapter{},
		agenttest.Sample{Name: "recorded run", Stdout: agenttest.Recorded(t), Tools: []string{"bash"}, Result: "Done: agent_done.txt contains ok.", LLMCalls: 2},
		agenttest.Sample{Name: "bash then answer", Stdout: sample, Tools: []string{"bash"}, Result: "containing ok", LLMCalls: 2},
		agenttest.Sample{Name: "tool error", Stdout: sampleToolError, Tools: []string{"write"}, Result: "could not write", LLMCalls: 2},
	)
}

func TestPlan(t *testing.T) {
	p, err := Adapter{}.Plan(agenttest.Input())
	if err != nil {
		t.Fatal(err)
	}
	if p.Files[0].Path != "/home/sandbox/.config/opencode/opencode.json" {
		t.Errorf("config at %s", p.Files[0].Path)
	}
	var got, want any
	if err := json.Unmarshal(p.Files[0].Content, &got); err != nil {
		t.Fatal(err)
	}
	json.Unmarshal([]byte(`{
		"$schema": "https://opencode.ai/config.json",
		"model": "agent2env/test-model-7", "small_model": "agent2env/test-model-7",
		"autoupdate": false, "share": "disabled", "permission": "allow",
		"provider": {"agent2env": {"npm": "@ai-sdk/openai-compatible", "name": "agent2env",
			"options": {"baseURL": "http://127.0.0.1:47001/llm/v1", "apiKey": "a2e-run-key-123"},
			"models": {"test-model-7": {"name": "test-model-7", "tool_call": true}}}},
		"mcp": {
			"agent2env": {"type": "remote", "url": "http://127.0.0.1:47002/mcp", "enabled": true},
			"docs": {"type": "remote", "url": "https://mcp.example/mcp", "headers": {"X-Token": "t1"}, "enabled": true},
			"db": {"type": "local", "command": ["python3", "/workspace/mcp/sqlite_mcp.py", "/workspace/shop.db"], "environment": {"DB_MODE": "ro"}, "enabled": true}}}`), &want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("opencode.json (-want +got):\n%s", diff)
	}
	wantCmd := []string{"opencode", "run", "--format", "json", "-m", "agent2env/test-model-7", agenttest.Input().Goal}
	if diff := cmp.Diff(wantCmd, p.Command); diff != "" {
		t.Errorf("command (-want +got):\n%s", diff)
	}
}
