package claudecode

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/agents/agenttest"
)

// sample is a SAMPLE, written by hand from the stream-json shapes that
// docs/agent-clis.md records for claude 2.1.331 (system/init, assistant
// blocks one per line with the call's usage, user tool_result, result);
// it is not a recording of a run.
const sample = `{"type":"system","subtype":"init","cwd":"/workspace","session_id":"3f1c2a9e-0b7d-4c55-9d7e-5c1f0a2b3c4d","tools":["Bash","Edit","Read","Write"],"mcp_servers":[],"model":"test-model-7","permissionMode":"bypassPermissions","apiKeySource":"ANTHROPIC_API_KEY"}
{"type":"assistant","message":{"id":"msg_01","type":"message","role":"assistant","model":"test-model-7","content":[{"type":"text","text":"I'll create the file."}],"stop_reason":null,"usage":{"input_tokens":1843,"cache_creation_input_tokens":0,"cache_read_input_tokens":1200,"output_tokens":31}},"parent_tool_use_id":null,"session_id":"3f1c2a9e-0b7d-4c55-9d7e-5c1f0a2b3c4d"}
{"type":"assistant","message":{"id":"msg_01","type":"message","role":"assistant","model":"test-model-7","content":[{"type":"tool_use","id":"toolu_01","name":"Bash","input":{"command":"printf ok > agent_done.txt","description":"Create the file"}}],"stop_reason":null,"usage":{"input_tokens":1843,"cache_creation_input_tokens":0,"cache_read_input_tokens":1200,"output_tokens":31}},"parent_tool_use_id":null,"session_id":"3f1c2a9e-0b7d-4c55-9d7e-5c1f0a2b3c4d"}
{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_01","type":"tool_result","content":"","is_error":false}]},"parent_tool_use_id":null,"session_id":"3f1c2a9e-0b7d-4c55-9d7e-5c1f0a2b3c4d"}
{"type":"assistant","message":{"id":"msg_02","type":"message","role":"assistant","model":"test-model-7","content":[{"type":"text","text":"Done: agent_done.txt contains ok."}],"stop_reason":"end_turn","usage":{"input_tokens":1901,"cache_creation_input_tokens":0,"cache_read_input_tokens":1800,"output_tokens":12}},"parent_tool_use_id":null,"session_id":"3f1c2a9e-0b7d-4c55-9d7e-5c1f0a2b3c4d"}
{"type":"result","subtype":"success","is_error":false,"duration_ms":630,"duration_api_ms":410,"num_turns":2,"result":"Done: agent_done.txt contains ok.","session_id":"3f1c2a9e-0b7d-4c55-9d7e-5c1f0a2b3c4d","total_cost_usd":0.0123,"usage":{"input_tokens":3744,"cache_creation_input_tokens":0,"cache_read_input_tokens":3000,"output_tokens":43}}`

// sampleError is a SAMPLE of a run that ends in a model error, written
// from the documented exit 1 with "API Error: 400" (not recorded).
const sampleError = `{"type":"system","subtype":"init","session_id":"s2","model":"test-model-7"}
{"type":"result","subtype":"error_during_execution","is_error":true,"num_turns":0,"result":"API Error: 400 {\"error\":{\"message\":\"scripted failure\"}}","session_id":"s2"}`

func TestConformance(t *testing.T) {
	agenttest.Run(t, Adapter{},
		agenttest.Sample{Name: "recorded run", Stdout: agenttest.Recorded(t), Tools: []string{"Bash"}, Result: "Done: agent_done.txt contains ok.", LLMCalls: 2},
		agenttest.Sample{Name: "bash then answer", Stdout: sample, Tools: []string{"Bash"}, Result: "contains ok", LLMCalls: 2},
		agenttest.Sample{Name: "model error", Stdout: sampleError, Result: "API Error: 400", ResultError: true},
	)
}

func TestPlan(t *testing.T) {
	p, err := Adapter{}.Plan(agenttest.Input())
	if err != nil {
		t.Fatal(err)
	}
	wantCmd := []string{"claude", "-p", agenttest.Input().Goal, "--dangerously-skip-permissions",
		"--output-format", "stream-json", "--verbose", "--model", "test-model-7",
		"--mcp-config", "/home/sandbox/.agent2env/claude-mcp.json", "--strict-mcp-config"}
	if diff := cmp.Diff(wantCmd, p.Command); diff != "" {
		t.Errorf("command (-want +got):\n%s", diff)
	}
	for k, v := range map[string]string{
		"ANTHROPIC_BASE_URL": "http://127.0.0.1:47001/llm", "ANTHROPIC_API_KEY": "a2e-run-key-123",
		"ANTHROPIC_MODEL": "test-model-7", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
		"ENABLE_TOOL_SEARCH": "false", "IS_SANDBOX": "1",
	} {
		if p.Env[k] != v {
			t.Errorf("env %s = %q, want %q", k, p.Env[k], v)
		}
	}
	var got any
	if err := json.Unmarshal(p.Files[0].Content, &got); err != nil {
		t.Fatal(err)
	}
	var want any
	json.Unmarshal([]byte(`{"mcpServers": {
		"agent2env": {"type": "http", "url": "http://127.0.0.1:47002/mcp"},
		"docs": {"type": "http", "url": "https://mcp.example/mcp", "headers": {"X-Token": "t1"}},
		"db": {"type": "stdio", "command": "python3", "args": ["/workspace/mcp/sqlite_mcp.py", "/workspace/shop.db"], "env": {"DB_MODE": "ro"}}}}`), &want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mcp config (-want +got):\n%s", diff)
	}
}
