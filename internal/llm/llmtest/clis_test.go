package llmtest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/anthropic"
	"github.com/agent2env/agent2env/internal/llm/gemini"
	"github.com/agent2env/agent2env/internal/llm/openai"
	"github.com/agent2env/agent2env/internal/llm/responses"
)

// shape is what a translation must keep of a conversation.
type shape struct {
	Assistant, ToolCalls, ToolResults int
	Calls                             []string
	// MCPTool: the daemon's execute_code is offered, under this name.
	MCPTool string
}

func shapeOf(req *llm.Request) shape {
	var s shape
	for _, tool := range req.Tools {
		if n := llm.QualifiedName(tool.Namespace, tool.Name); strings.HasSuffix(n, "execute_code") {
			s.MCPTool = n
		}
	}
	for _, m := range req.Messages {
		if m.Role == llm.RoleAssistant {
			s.Assistant++
		}
		for _, p := range m.Parts {
			switch p.Type {
			case llm.PartToolCall:
				s.ToolCalls++
				s.Calls = append(s.Calls, llm.QualifiedName(p.Namespace, p.Name))
			case llm.PartToolResult:
				s.ToolResults++
			}
		}
	}
	return s
}

// TestCLIRequests decodes the last request each of the five agent CLIs
// sent on the fix-failing-test task (captured through the proxy from the
// real CLIs of agent2env/agent, long strings trimmed): claude-code's
// beta fields and mid-conversation system message, codex's namespace and
// web_search tools, gemini-cli's and the Chat Completions clients' own
// shapes. Each decodes with its codec, and translates into each of the
// four formats and back keeping the conversation's shape: its three
// assistant turns with their tool calls and results, and the daemon's MCP
// tool execute_code offered under the name the CLI gave it.
func TestCLIRequests(t *testing.T) {
	codecs := []llm.Codec{openai.Codec{}, responses.Codec{}, anthropic.Codec{}, gemini.Codec{}}
	want := map[string]shape{
		"claude-code": {3, 3, 3, []string{"Read", "Edit", "Bash"}, "mcp__agent2env__execute_code"},
		"codex":       {3, 3, 3, []string{"exec_command", "exec_command", "exec_command"}, "mcp__agent2env__execute_code"},
		"gemini-cli":  {3, 3, 3, []string{"read_file", "replace", "run_shell_command"}, "mcp_agent2env_execute_code"},
		"opencode":    {3, 3, 3, []string{"read", "edit", "bash"}, "agent2env_execute_code"},
		"qwen-code":   {3, 3, 3, []string{"read_file", "edit", "run_shell_command"}, "mcp__agent2env__execute_code"},
	}
	for _, tt := range []struct {
		cli string
		in  llm.Codec
	}{
		{"claude-code", anthropic.Codec{}},
		{"codex", responses.Codec{}},
		{"gemini-cli", gemini.Codec{}},
		{"opencode", openai.Codec{}},
		{"qwen-code", openai.Codec{}},
	} {
		t.Run(tt.cli, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata", "clis", tt.cli+".json"))
			if err != nil {
				t.Fatal(err)
			}
			req, err := tt.in.DecodeRequest(body)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if d := cmp.Diff(want[tt.cli], shapeOf(req)); d != "" {
				t.Errorf("decoded (-want +got):\n%s", d)
			}
			if len(req.Tools) == 0 {
				t.Errorf("no tools decoded")
			}
			for _, out := range codecs {
				enc, err := out.EncodeRequest(req)
				if err != nil {
					t.Errorf("encode for %s: %v", out.Format(), err)
					continue
				}
				back, err := out.DecodeRequest(enc)
				if err != nil {
					t.Errorf("decode what was encoded for %s: %v", out.Format(), err)
					continue
				}
				if d := cmp.Diff(want[tt.cli], shapeOf(back)); d != "" {
					t.Errorf("through %s (-want +got):\n%s", out.Format(), d)
				}
			}
		})
	}
}
