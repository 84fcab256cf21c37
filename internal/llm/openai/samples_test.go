package openai_test

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/llmtest"
	"github.com/agent2env/agent2env/internal/llm/openai"
)

// TestUpstreamStream decodes a stream as vLLM sends it: reasoning_content,
// text, one call in pieces and one whole, finish_reason, then usage in a
// chunk without choices.
func TestUpstreamStream(t *testing.T) {
	data, err := os.ReadFile("testdata/upstream-stream.txt")
	if err != nil {
		t.Fatal(err)
	}
	evs, err := llmtest.DecodeStream(openai.Codec{}, bytes.NewReader(data))
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
		ID: "chatcmpl-1", Model: "Qwen/Qwen3-8B",
		Content: []llm.Part{
			{Type: llm.PartThinking, Text: "The user wants two cities.", Origin: llm.FormatOpenAI},
			llm.Text("\n\n"),
			{Type: llm.PartToolCall, ID: "chatcmpl-tool-a", Name: "get_weather", Arguments: `{"city": "Paris"}`},
			{Type: llm.PartToolCall, ID: "chatcmpl-tool-b", Name: "get_weather", Arguments: `{"city": "Tokyo"}`},
		},
		StopReason: llm.StopToolUse,
		Usage:      llm.Usage{InputTokens: 300, OutputTokens: 60},
	}
	if d := cmp.Diff(want, acc.Response(), llmtest.CmpOpts...); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// TestClientRequests decodes what the OpenAI-speaking CLIs send (opencode,
// qwen-code): system and developer messages, content parts, tool messages,
// max_completion_tokens, stop as a string, stream_options.
func TestClientRequests(t *testing.T) {
	body := `{"model":"coder","messages":[
		{"role":"system","content":"Be brief."},
		{"role":"developer","content":[{"type":"text","text":"Use tools."}]},
		{"role":"user","content":[{"type":"text","text":"Look:"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA","detail":"high"}}]},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"read","arguments":"{\"p\":1}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"one"},
		{"role":"user","content":"thanks"}],
		"tools":[{"type":"function","function":{"name":"read","parameters":{"type":"object"}}}],
		"tool_choice":{"type":"function","function":{"name":"read"}},
		"max_completion_tokens":512,"stop":"END","stream":true,"stream_options":{"include_usage":true},
		"reasoning_effort":"high","seed":7,"top_k":20}`
	req, err := openai.Codec{}.DecodeRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want := &llm.Request{
		Model: "coder", MaxTokens: 512, Stop: []string{"END"}, Stream: true, StreamUsage: true,
		System:     []llm.Part{llm.Text("Be brief."), llm.Text("Use tools.")},
		Reasoning:  &llm.Reasoning{Effort: "high"},
		Tools:      []llm.Tool{{Name: "read", Parameters: []byte(`{"type":"object"}`)}},
		ToolChoice: &llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: "read"},
		Messages: []llm.Message{
			{Role: llm.RoleUser, Parts: []llm.Part{llm.Text("Look:"), {Type: llm.PartImage, MediaType: "image/png", Data: "AAAA"}}},
			{Role: llm.RoleAssistant, Parts: []llm.Part{{Type: llm.PartToolCall, ID: "c1", Name: "read", Arguments: `{"p":1}`}}},
			{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartToolResult, ID: "c1", Content: []llm.Part{llm.Text("one")}}}},
			{Role: llm.RoleUser, Parts: []llm.Part{llm.Text("thanks")}},
		},
		Extra: llm.Extra{Format: llm.FormatOpenAI, Fields: []llm.Field{{Name: "seed", Value: []byte("7")}, {Name: "top_k", Value: []byte("20")}}},
	}
	if d := cmp.Diff(want, req, llmtest.CmpOpts...); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	out, _ := openai.Codec{}.EncodeRequest(req)
	if !strings.Contains(string(out), `"seed":7`) || !strings.Contains(string(out), `"top_k":20`) {
		t.Errorf("unknown fields not written back for an OpenAI upstream: %s", out)
	}
}
