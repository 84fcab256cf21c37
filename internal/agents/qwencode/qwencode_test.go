package qwencode

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/agents/agenttest"
)

// sample is a SAMPLE, written by hand from the `qwen -o stream-json` lines
// docs/agent-clis.md records for qwen 0.24.4 (claude's shape:
// system/init, assistant, user tool_result, result); not a recording.
const sample = `{"type":"system","subtype":"init","uuid":"u1","session_id":"9e8d7c6b-5a4f-3e2d-1c0b-a9f8e7d6c5b4","cwd":"/workspace","tools":["run_shell_command","write_file","read_file"],"mcp_servers":[],"model":"test-model-7","permission_mode":"yolo","qwen_code_version":"0.24.4"}
{"type":"assistant","uuid":"u2","session_id":"9e8d7c6b-5a4f-3e2d-1c0b-a9f8e7d6c5b4","parent_tool_use_id":null,"message":{"id":"chatcmpl-1","type":"message","role":"assistant","model":"test-model-7","content":[{"type":"tool_use","id":"call_1","name":"run_shell_command","input":{"command":"printf ok > agent_done.txt"}}],"stop_reason":null,"usage":{"input_tokens":6100,"output_tokens":30,"cache_read_input_tokens":0}}}
{"type":"user","uuid":"u3","session_id":"9e8d7c6b-5a4f-3e2d-1c0b-a9f8e7d6c5b4","parent_tool_use_id":null,"message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","is_error":false,"content":"Command: printf ok > agent_done.txt\nOutput: (empty)\nExit Code: 0"}]}}
{"type":"assistant","uuid":"u4","session_id":"9e8d7c6b-5a4f-3e2d-1c0b-a9f8e7d6c5b4","parent_tool_use_id":null,"message":{"id":"chatcmpl-2","type":"message","role":"assistant","model":"test-model-7","content":[{"type":"text","text":"Created agent_done.txt."}],"stop_reason":"end_turn","usage":{"input_tokens":6200,"output_tokens":8,"cache_read_input_tokens":6000}}}
{"type":"result","subtype":"success","uuid":"u5","session_id":"9e8d7c6b-5a4f-3e2d-1c0b-a9f8e7d6c5b4","is_error":false,"duration_ms":2420,"duration_api_ms":1800,"num_turns":2,"result":"Created agent_done.txt.","usage":{"input_tokens":12300,"output_tokens":38,"cache_read_input_tokens":6000}}`

func TestConformance(t *testing.T) {
	agenttest.Run(t, Adapter{},
		agenttest.Sample{Name: "recorded run", Stdout: agenttest.Recorded(t), Tools: []string{"run_shell_command"}, Result: "Done: agent_done.txt contains ok.", LLMCalls: 2},
		agenttest.Sample{Name: "shell then answer", Stdout: sample, Tools: []string{"run_shell_command"}, Result: "Created agent_done.txt", LLMCalls: 2},
	)
}

func TestPlan(t *testing.T) {
	p, err := Adapter{}.Plan(agenttest.Input())
	if err != nil {
		t.Fatal(err)
	}
	if p.Files[0].Path != "/home/sandbox/.qwen/settings.json" {
		t.Errorf("settings at %s", p.Files[0].Path)
	}
	var got, want any
	if err := json.Unmarshal(p.Files[0].Content, &got); err != nil {
		t.Fatal(err)
	}
	json.Unmarshal([]byte(`{
		"security": {"auth": {"selectedType": "openai"}}, "model": {"name": "test-model-7"},
		"general": {"enableAutoUpdate": false}, "privacy": {"usageStatisticsEnabled": false},
		"telemetry": {"enabled": false}, "tools": {"toolSearch": {"enabled": false}},
		"mcpServers": {
			"agent2env": {"httpUrl": "http://127.0.0.1:47002/mcp"},
			"docs": {"httpUrl": "https://mcp.example/mcp", "headers": {"X-Token": "t1"}},
			"db": {"command": "python3", "args": ["/workspace/mcp/sqlite_mcp.py", "/workspace/shop.db"], "env": {"DB_MODE": "ro"}}}}`), &want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("settings (-want +got):\n%s", diff)
	}
	for k, v := range map[string]string{"OPENAI_BASE_URL": "http://127.0.0.1:47001/llm/v1", "OPENAI_API_KEY": "a2e-run-key-123", "OPENAI_MODEL": "test-model-7"} {
		if p.Env[k] != v {
			t.Errorf("env %s = %q, want %q", k, p.Env[k], v)
		}
	}
	wantCmd := []string{"qwen", agenttest.Input().Goal, "--yolo", "--auth-type", "openai", "-o", "stream-json", "-m", "test-model-7"}
	if diff := cmp.Diff(wantCmd, p.Command); diff != "" {
		t.Errorf("command (-want +got):\n%s", diff)
	}
}
