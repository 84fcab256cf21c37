package anthropic_test

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/anthropic"
	"github.com/agent2env/agent2env/internal/llm/llmtest"
)

// TestClaudeCodeRequest decodes what claude-code sends: its beta fields
// (thinking, context management, cache_control) are carried for an
// Anthropic upstream, never refused.
func TestClaudeCodeRequest(t *testing.T) {
	body, err := os.ReadFile("testdata/claude-code-request.json")
	if err != nil {
		t.Fatal(err)
	}
	c := anthropic.Codec{}
	req, err := c.DecodeRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	if req.Reasoning == nil || req.Reasoning.BudgetTokens != 31999 || !req.Stream || req.User != "user_abc_account__session_123" {
		t.Errorf("decoded %+v", req)
	}
	if len(req.Extra.Fields) != 1 || req.Extra.Fields[0].Name != "context_management" {
		t.Errorf("extra %+v, want context_management", req.Extra)
	}
	think := req.Messages[1].Parts[0]
	if think.Type != llm.PartThinking || think.Signature != "EqQBCkYIBxgCKkA" || think.Origin != llm.FormatAnthropic {
		t.Errorf("thinking part %+v", think)
	}
	out, err := c.EncodeRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	var in, back map[string]any
	_ = json.Unmarshal(body, &in)
	_ = json.Unmarshal(out, &back)
	// Re-encoded for an Anthropic upstream, everything comes back but
	// temperature, which thinking does not allow anyway, and a tool
	// result's lone text block, which becomes the equivalent string.
	delete(in, "temperature")
	result := in["messages"].([]any)[2].(map[string]any)["content"].([]any)[0].(map[string]any)
	result["content"] = "a.txt\nb.txt"
	if d := cmp.Diff(in, back); d != "" {
		t.Errorf("re-encoded request (-sent +re-encoded):\n%s", d)
	}
}

// TestUpstreamStream decodes a stream as Anthropic sends it: pings,
// thinking with a signature, an empty first argument piece, a tool without
// arguments, usage split between message_start and message_delta.
func TestUpstreamStream(t *testing.T) {
	data, err := os.ReadFile("testdata/upstream-stream.txt")
	if err != nil {
		t.Fatal(err)
	}
	evs, err := llmtest.DecodeStream(anthropic.Codec{}, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if err := llmtest.CheckStream(evs); err != nil {
		t.Fatal(err)
	}
	var acc llm.Accumulator
	for i := range evs {
		acc.Add(&evs[i])
	}
	want := &llm.Response{
		ID: "msg_01XFDUDYJgAACzvnptvVoYEL", Model: "claude-sonnet-4-5",
		Content: []llm.Part{
			{Type: llm.PartThinking, Text: "Let me check the weather.", Signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds", Origin: llm.FormatAnthropic},
			llm.Text("Okay, checking."),
			{Type: llm.PartToolCall, ID: "toolu_01T1x1fJ34qAmk2tNTrN7Up6", Name: "get_weather", Arguments: `{"location": "San Francisco, CA"}`},
			{Type: llm.PartToolCall, ID: "toolu_02", Name: "list_files", Arguments: `{}`},
		},
		StopReason: llm.StopToolUse,
		Usage:      llm.Usage{InputTokens: 1482, OutputTokens: 89, CachedTokens: 1000, CacheWriteTokens: 10},
	}
	if d := cmp.Diff(want, acc.Response(), llmtest.CmpOpts...); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// TestOddBlocks: blocks the model has no place for are carried opaque,
// including an image without a source the codec knows.
func TestOddBlocks(t *testing.T) {
	body := `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[
		{"type":"image"},
		{"type":"image","source":{"type":"file","file_id":"f1"}},
		{"type":"document","source":{"type":"text","media_type":"text/plain","data":"hi"}}]}]}`
	req, err := anthropic.Codec{}.DecodeRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range req.Messages[0].Parts {
		if p.Type != llm.PartOpaque || p.Origin != llm.FormatAnthropic {
			t.Errorf("part %d: %+v, want opaque", i, p)
		}
	}
}

// TestSystemMessage: claude-code sends messages of role system in the
// middle of the conversation; they are decoded as such, not refused, and
// re-encoded into the system prompt.
func TestSystemMessage(t *testing.T) {
	body := `{"model":"m","max_tokens":10,"system":[{"type":"text","text":"be brief"}],"messages":[
		{"role":"user","content":"hi"},
		{"role":"system","content":[{"type":"text","text":"the date is today"}]},
		{"role":"assistant","content":"hello"}]}`
	c := anthropic.Codec{}
	req, err := c.DecodeRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want := []llm.Message{
		{Role: llm.RoleUser, Parts: []llm.Part{llm.Text("hi")}},
		{Role: llm.RoleSystem, Parts: []llm.Part{llm.Text("the date is today")}},
		{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text("hello")}},
	}
	if d := cmp.Diff(want, req.Messages); d != "" {
		t.Errorf("messages (-want +got):\n%s", d)
	}
	out, err := c.EncodeRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		System   []struct{ Text string }
		Messages []struct{ Role string }
	}
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.System) != 2 || back.System[1].Text != "the date is today" || len(back.Messages) != 2 {
		t.Errorf("re-encoded: %s", out)
	}
}
