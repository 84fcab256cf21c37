package gemini_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/gemini"
	"github.com/agent2env/agent2env/internal/llm/llmtest"
)

// TestUpstreamStream decodes a stream as Gemini sends it: thoughts, text,
// whole function calls without ids (one with a thought signature), usage
// repeated in every chunk, and no end event but the end of the body.
func TestUpstreamStream(t *testing.T) {
	data, err := os.ReadFile("testdata/upstream-stream.txt")
	if err != nil {
		t.Fatal(err)
	}
	evs, err := llmtest.DecodeStream(gemini.Codec{}, bytes.NewReader(data))
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
	got := acc.Response()
	for i := range got.Content {
		if p := &got.Content[i]; p.Type == llm.PartToolCall {
			if p.ID == "" {
				t.Errorf("call %d has no id", i)
			}
			p.ID = "<set>"
		}
	}
	want := &llm.Response{
		ID: "resp-g1", Model: "gemini-2.5-flash",
		Content: []llm.Part{
			{Type: llm.PartThinking, Text: "**Planning** the call", Origin: llm.FormatGemini},
			llm.Text("I'll check."),
			{Type: llm.PartToolCall, ID: "<set>", Name: "get_weather", Arguments: `{"city": "Paris"}`, Signature: "CiQB0e2Kb", Origin: llm.FormatGemini},
			{Type: llm.PartToolCall, ID: "<set>", Name: "get_weather", Arguments: `{"city": "Tokyo"}`},
		},
		StopReason: llm.StopToolUse,
		Usage:      llm.Usage{InputTokens: 120, OutputTokens: 50, CachedTokens: 64, ReasoningTokens: 20},
	}
	if d := cmp.Diff(want, got, llmtest.CmpOpts...); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// TestGeminiCLIRequest decodes what gemini-cli sends: calls and responses
// without ids get matching ids; parametersJsonSchema and OpenAPI-style
// parameters both become JSON Schema; thinking settings and unknown
// members are kept.
func TestGeminiCLIRequest(t *testing.T) {
	body := `{"contents":[
		{"role":"user","parts":[{"text":"Ping twice."}]},
		{"role":"model","parts":[{"functionCall":{"name":"mcp_h_http_ping","args":{}},"thoughtSignature":"sig1"},{"functionCall":{"name":"mcp_h_http_ping","args":{"n":2}}}]},
		{"role":"user","parts":[{"functionResponse":{"name":"mcp_h_http_ping","response":{"output":"pong"}}},{"functionResponse":{"name":"mcp_h_http_ping","response":{"error":"timeout"}}}]}],
		"systemInstruction":{"role":"user","parts":[{"text":"You are Gemini CLI."}]},
		"tools":[{"functionDeclarations":[
			{"name":"mcp_h_http_ping","description":"Ping.","parametersJsonSchema":{"type":"object","properties":{"n":{"type":"integer"}}}},
			{"name":"old_style","parameters":{"type":"OBJECT","properties":{"q":{"type":"STRING"}}}}]},
			{"googleSearch":{}}],
		"generationConfig":{"temperature":0,"topP":1,"topK":40,"thinkingConfig":{"includeThoughts":true,"thinkingBudget":8192}},
		"labels":{"x":"y"}}`
	req, err := gemini.Codec{}.DecodeRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	zero, one, forty := 0.0, 1.0, 40
	want := &llm.Request{
		StreamUsage: true, Temperature: &zero, TopP: &one, TopK: &forty,
		Reasoning: &llm.Reasoning{BudgetTokens: 8192},
		System:    []llm.Part{llm.Text("You are Gemini CLI.")},
		Messages: []llm.Message{
			{Role: llm.RoleUser, Parts: []llm.Part{llm.Text("Ping twice.")}},
			{Role: llm.RoleAssistant, Parts: []llm.Part{
				{Type: llm.PartToolCall, ID: "call_1_0", Name: "mcp_h_http_ping", Arguments: "{}", Signature: "sig1", Origin: llm.FormatGemini},
				{Type: llm.PartToolCall, ID: "call_1_1", Name: "mcp_h_http_ping", Arguments: `{"n":2}`},
			}},
			{Role: llm.RoleUser, Parts: []llm.Part{
				{Type: llm.PartToolResult, ID: "call_1_0", Name: "mcp_h_http_ping", Content: []llm.Part{llm.Text("pong")}},
				{Type: llm.PartToolResult, ID: "call_1_1", Name: "mcp_h_http_ping", Content: []llm.Part{llm.Text("timeout")}, IsError: true},
			}},
		},
		Tools: []llm.Tool{
			{Name: "mcp_h_http_ping", Description: "Ping.", Parameters: []byte(`{"type":"object","properties":{"n":{"type":"integer"}}}`)},
			{Name: "old_style", Parameters: []byte(`{"properties":{"q":{"type":"string"}},"type":"object"}`)},
			{Raw: []byte(`{"googleSearch":{}}`), Origin: llm.FormatGemini},
		},
		Extra: llm.Extra{Format: llm.FormatGemini, Fields: []llm.Field{{Name: "labels", Value: []byte(`{"x":"y"}`)}}},
	}
	if d := cmp.Diff(want, req, llmtest.CmpOpts...); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// TestOddParts: parts the model has no place for are carried opaque, as
// they came; an empty text part is dropped.
func TestOddParts(t *testing.T) {
	body := `{"contents":[{"role":"model","parts":[
		{"executableCode":{"language":"PYTHON","code":"print(1)"}},
		{"inlineData":{"mimeType":"application/pdf","data":"JVBERi0="}},
		{"text":""},
		{"text":"ok"}]}]}`
	req, err := gemini.Codec{}.DecodeRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want := []llm.Part{
		{Type: llm.PartOpaque, Origin: llm.FormatGemini, Raw: []byte(`{"executableCode":{"language":"PYTHON","code":"print(1)"}}`)},
		{Type: llm.PartOpaque, Origin: llm.FormatGemini, Raw: []byte(`{"inlineData":{"mimeType":"application/pdf","data":"JVBERi0="}}`)},
		llm.Text("ok"),
	}
	if d := cmp.Diff(want, req.Messages[0].Parts, llmtest.CmpOpts...); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}
