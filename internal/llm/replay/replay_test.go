package replay

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/llm"
)

const script = `
turns:
  - thinking: "List first."
    text: "Listing."
    tool_calls:
      - name: exec_command
        arguments: {cmd: ls, opts: [-l, 1]}
      - name: mcp__h__http_ping
  - text: "Done."
    stop: max_tokens
    usage: {input_tokens: 9, output_tokens: 2}
`

func TestAnswerPicksTheTurnFromTheHistory(t *testing.T) {
	s, err := Parse([]byte(script))
	if err != nil {
		t.Fatal(err)
	}
	req := &llm.Request{Model: "m", Tools: []llm.Tool{{Namespace: "mcp__h", Name: "http_ping"}},
		Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.Text("go")}}}}
	r1, err := s.Answer(req)
	if err != nil {
		t.Fatal(err)
	}
	want := []llm.Part{
		{Type: llm.PartThinking, Text: "List first."},
		llm.Text("Listing."),
		{Type: llm.PartToolCall, ID: "call_1_1", Name: "exec_command", Arguments: `{"cmd":"ls","opts":["-l",1]}`},
		{Type: llm.PartToolCall, ID: "call_1_2", Namespace: "mcp__h", Name: "http_ping", Arguments: `{}`},
	}
	if d := cmp.Diff(want, r1.Content); d != "" {
		t.Errorf("turn 1 (-want +got):\n%s", d)
	}
	if r1.StopReason != llm.StopToolUse || r1.Usage.InputTokens == 0 || r1.Usage.OutputTokens == 0 {
		t.Errorf("turn 1: stop %s, usage %+v", r1.StopReason, r1.Usage)
	}
	again, _ := s.Answer(req)
	if d := cmp.Diff(r1, again); d != "" {
		t.Errorf("the same request answered differently (-first +second):\n%s", d)
	}
	req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Parts: r1.Content},
		llm.Message{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartToolResult, ID: "call_1_1"}}})
	r2, err := s.Answer(req)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Content[0].Text != "Done." || r2.StopReason != llm.StopMaxTokens || r2.Usage != (llm.Usage{InputTokens: 9, OutputTokens: 2}) {
		t.Errorf("turn 2: %+v", r2)
	}
	req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Parts: r2.Content})
	if _, err := s.Answer(req); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("past the script: %v, want an invalid-argument error", err)
	}
	s.Repeat = true
	if r, err := s.Answer(req); err != nil || r.Content[0].Text != "Done." {
		t.Errorf("past the script with repeat: %v %v", r, err)
	}
}

func TestParseRejects(t *testing.T) {
	for _, bad := range []string{"", "turns: []", "turns: [{tool_calls: [{arguments: {}}]}]", "turns: {", "- 1"} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q) accepted it", bad)
		}
	}
}
