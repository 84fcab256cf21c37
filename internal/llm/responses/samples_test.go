package responses_test

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/anthropic"
	"github.com/agent2env/agent2env/internal/llm/llmtest"
	"github.com/agent2env/agent2env/internal/llm/responses"
)

// TestCodexRequest decodes what codex sends: namespace and web_search
// tools, reasoning items with encrypted content, outputs as strings and as
// parts, and its stateless-mode fields.
func TestCodexRequest(t *testing.T) {
	body, err := os.ReadFile("testdata/codex-request.json")
	if err != nil {
		t.Fatal(err)
	}
	c := responses.Codec{}
	req, err := c.DecodeRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range req.Tools {
		if tool.Raw != nil {
			names = append(names, "raw:"+string(tool.Raw))
		} else {
			names = append(names, llm.QualifiedName(tool.Namespace, tool.Name))
		}
	}
	if d := cmp.Diff([]string{"exec_command", "mcp__h__http_ping", `raw:{"type": "web_search"}`}, names); d != "" {
		t.Errorf("tools (-want +got):\n%s", d)
	}
	var extra []string
	for _, f := range req.Extra.Fields {
		extra = append(extra, f.Name)
	}
	if d := cmp.Diff([]string{"store", "include", "prompt_cache_key", "text"}, extra); d != "" {
		t.Errorf("extra fields (-want +got):\n%s", d)
	}
	if len(req.System) != 2 || req.System[1].Text != "<permissions>workspace-write</permissions>" {
		t.Errorf("system %+v: the leading developer message belongs to it", req.System)
	}
	if r := req.Reasoning; r == nil || r.Effort != "medium" || r.Summary != "auto" {
		t.Errorf("reasoning %+v", r)
	}

	// Back to a Responses upstream: every item and tool is there.
	out, err := c.EncodeRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`"namespace":"mcp__h"`, `{"type": "web_search"}`, `"encrypted_content":"gAAAAABo-enc"`, `"store":false`, `"prompt_cache_key"`} {
		if !bytes.Contains(out, []byte(s)) {
			t.Errorf("re-encoded request lacks %s:\n%s", s, out)
		}
	}

	// To Anthropic: namespaced tools flattened, web_search and the
	// encrypted reasoning dropped, still a valid request.
	out, err = anthropic.Codec{}.EncodeRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"web_search", "gAAAAABo-enc", "prompt_cache_key", `"namespace"`} {
		if bytes.Contains(out, []byte(s)) {
			t.Errorf("request for Anthropic carries %s:\n%s", s, out)
		}
	}
	if !bytes.Contains(out, []byte(`"name":"mcp__h__http_ping"`)) || !json.Valid(out) {
		t.Errorf("request for Anthropic:\n%s", out)
	}
}

// TestUpstreamStream decodes a stream as OpenAI sends it: a reasoning item
// with two summary parts and encrypted content, calls whose arguments come
// in pieces or only at the end, a namespaced call, a built-in tool item.
func TestUpstreamStream(t *testing.T) {
	data, err := os.ReadFile("testdata/upstream-stream.txt")
	if err != nil {
		t.Fatal(err)
	}
	evs, err := llmtest.DecodeStream(responses.Codec{}, bytes.NewReader(data))
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
		ID: "resp_68a", Model: "gpt-5.1-codex",
		Content: []llm.Part{
			{Type: llm.PartThinking, ID: "rs_1", Text: "**Listing**\n\nThen ping.", Signature: "gAAAAAB-enc2", Origin: llm.FormatResponses},
			{Type: llm.PartToolCall, ID: "call_X", Name: "exec_command", Arguments: `{"cmd":"ls"}`},
			{Type: llm.PartToolCall, ID: "call_Y", Namespace: "mcp__h", Name: "http_ping", Arguments: `{}`},
			{Type: llm.PartOpaque, Origin: llm.FormatResponses, Raw: json.RawMessage(`{"id":"ws_1","type":"web_search_call","status":"completed","action":{"type":"search","query":"weather"}}`)},
		},
		StopReason: llm.StopToolUse,
		Usage:      llm.Usage{InputTokens: 5000, OutputTokens: 120, CachedTokens: 4096, ReasoningTokens: 64},
	}
	if d := cmp.Diff(want, acc.Response(), llmtest.CmpOpts...); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}
