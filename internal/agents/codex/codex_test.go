package codex

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pelletier/go-toml/v2"

	"github.com/agent2env/agent2env/internal/agents/agenttest"
)

// sample is a SAMPLE, written by hand from the `codex exec --json` events
// docs/agent-clis.md records for codex 0.169.0 (thread.started,
// turn.started, item.started/completed for command_execution and
// agent_message, turn.completed with usage); not a recording.
const sample = `Reading additional input from stdin...
{"type":"thread.started","thread_id":"0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"}
{"type":"turn.started"}
{"type":"item.started","item":{"id":"item_0","type":"command_execution","command":"bash -lc 'printf ok > agent_done.txt'","aggregated_output":"","exit_code":null,"status":"in_progress"}}
{"type":"item.completed","item":{"id":"item_0","type":"command_execution","command":"bash -lc 'printf ok > agent_done.txt'","aggregated_output":"","exit_code":0,"status":"completed"}}
{"type":"item.started","item":{"id":"item_1","type":"mcp_tool_call","server":"db","tool":"query","arguments":{"sql":"SELECT 1"},"status":"in_progress"}}
{"type":"item.completed","item":{"id":"item_1","type":"mcp_tool_call","server":"db","tool":"query","arguments":{"sql":"SELECT 1"},"result":{"content":[{"type":"text","text":"[{\"1\": 1}]"}]},"status":"completed"}}
{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"Created agent_done.txt with ok."}}
{"type":"turn.completed","usage":{"input_tokens":5210,"cached_input_tokens":4096,"output_tokens":58}}`

// sampleFailed is a SAMPLE of a turn that fails on a model 400 (written,
// not recorded).
const sampleFailed = `{"type":"thread.started","thread_id":"t2"}
{"type":"turn.started"}
{"type":"error","message":"unexpected status 400 Bad Request: scripted failure"}
{"type":"turn.failed","error":{"message":"unexpected status 400 Bad Request: scripted failure"}}`

func TestConformance(t *testing.T) {
	agenttest.Run(t, Adapter{},
		agenttest.Sample{Name: "recorded run", Stdout: agenttest.Recorded(t), Tools: []string{"exec_command"}, Result: "Done: agent_done.txt contains ok.", LLMCalls: 1},
		agenttest.Sample{Name: "command then answer", Stdout: sample, Tools: []string{"exec_command", "mcp__db__query"}, Result: "Created agent_done.txt", LLMCalls: 1},
		agenttest.Sample{Name: "model error", Stdout: sampleFailed, Result: "400", ResultError: true},
	)
}

func TestPlan(t *testing.T) {
	p, err := Adapter{}.Plan(agenttest.Input())
	if err != nil {
		t.Fatal(err)
	}
	if p.Files[0].Path != "/home/sandbox/.codex/config.toml" {
		t.Errorf("config at %s", p.Files[0].Path)
	}
	var got map[string]any
	if err := toml.Unmarshal(p.Files[0].Content, &got); err != nil {
		t.Fatalf("config.toml: %v\n%s", err, p.Files[0].Content)
	}
	want := map[string]any{
		"model":                       "test-model-7",
		"model_provider":              "agent2env",
		"check_for_update_on_startup": false,
		"model_providers": map[string]any{"agent2env": map[string]any{
			"name": "agent2env", "base_url": "http://127.0.0.1:47001/llm/v1", "env_key": "AGENT2ENV_API_KEY", "wire_api": "responses",
		}},
		"analytics": map[string]any{"enabled": false},
		"feedback":  map[string]any{"enabled": false},
		"features":  map[string]any{"plugins": false},
		"mcp_servers": map[string]any{
			"agent2env": map[string]any{"url": "http://127.0.0.1:47002/mcp"},
			"docs":      map[string]any{"url": "https://mcp.example/mcp", "http_headers": map[string]any{"X-Token": "t1"}},
			"db":        map[string]any{"command": "python3", "args": []any{"/workspace/mcp/sqlite_mcp.py", "/workspace/shop.db"}, "env": map[string]any{"DB_MODE": "ro"}},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("config.toml (-want +got):\n%s\n%s", diff, p.Files[0].Content)
	}
	if p.Env["AGENT2ENV_API_KEY"] != "a2e-run-key-123" {
		t.Errorf("env key not set")
	}
	wantCmd := []string{"codex", "exec", "--json", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check", "-m", "test-model-7", agenttest.Input().Goal}
	if diff := cmp.Diff(wantCmd, p.Command); diff != "" {
		t.Errorf("command (-want +got):\n%s", diff)
	}
}
