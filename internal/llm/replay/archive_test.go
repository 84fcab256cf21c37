package replay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/archive"
	"github.com/agent2env/agent2env/internal/llm/llmtest"
	"github.com/agent2env/agent2env/internal/llm/proxy"
	"github.com/agent2env/agent2env/internal/llm/replay"
	"github.com/agent2env/agent2env/internal/service"
	"github.com/agent2env/agent2env/internal/store/sqlite"
)

// model is the recorded model: it thinks, says something and calls two
// tools at once (arguments with spaces, as models write them), then
// answers the tool results.
func model(req *llm.Request) (*llm.Response, *llm.Error) {
	turn := 0
	for _, m := range req.Messages {
		if m.Role == llm.RoleAssistant {
			turn++
		}
	}
	switch turn {
	case 0:
		return &llm.Response{ID: "msg_rec1", Model: "real", StopReason: llm.StopToolUse, Usage: llm.Usage{InputTokens: 40, OutputTokens: 21},
			Content: []llm.Part{
				{Type: llm.PartThinking, Text: "Look around first.", Signature: "sig"},
				llm.Text("Let me look."),
				{Type: llm.PartToolCall, ID: "toolu_01A", Name: "bash", Arguments: `{"command": "ls -la", "timeout": 30}`},
				{Type: llm.PartToolCall, ID: "toolu_01B", Name: "read_file", Arguments: `{"path": "README.md"}`},
			}}, nil
	case 1:
		return &llm.Response{ID: "msg_rec2", Model: "real", StopReason: llm.StopEndTurn, Usage: llm.Usage{InputTokens: 90, OutputTokens: 4},
			Content: []llm.Part{llm.Text("Two files; the README says hi.")}}, nil
	}
	return nil, &llm.Error{Kind: llm.ErrorInvalidRequest, Message: "no third turn"}
}

// converse runs the agent's side of the conversation against a proxy in
// format f, streaming: it sends the task, runs the tools the model calls
// (with fixed results) and returns each answer it got.
func converse(t *testing.T, base string, f llm.Format) []*llm.Response {
	t.Helper()
	c := proxy.Codecs[f]
	req := &llm.Request{Model: "agent-model", MaxTokens: 1000, Stream: true, StreamUsage: true,
		Tools: []llm.Tool{
			{Name: "bash", Parameters: json.RawMessage(`{"type":"object"}`)},
			{Name: "read_file", Parameters: json.RawMessage(`{"type":"object"}`)},
		},
		Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.Text("what is in this directory?")}}}}
	var answers []*llm.Response
	for turn := 0; turn < 2; turn++ {
		body, err := c.EncodeRequest(req)
		if err != nil {
			t.Fatal(err)
		}
		path := c.Upstream("agent-model", true).Path
		if f == llm.FormatOpenAI || f == llm.FormatResponses { // their SDKs' base URL ends in /v1
			path = "/v1" + path
		}
		hreq, _ := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(body))
		hreq.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(hreq)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("turn %d: %d %s", turn+1, resp.StatusCode, got)
		}
		evs, err := llmtest.DecodeStream(c, bytes.NewReader(got))
		if err != nil {
			t.Fatalf("turn %d: %v", turn+1, err)
		}
		var acc llm.Accumulator
		for i := range evs {
			acc.Add(&evs[i])
		}
		r := acc.Response()
		answers = append(answers, r)
		req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Parts: r.Content})
		var results []llm.Part
		for _, p := range r.Content {
			if p.Type == llm.PartToolCall {
				results = append(results, llm.Part{Type: llm.PartToolResult, ID: p.ID, Name: p.Name,
					Content: []llm.Part{llm.Text("result of " + p.Name)}})
			}
		}
		if len(results) == 0 {
			break
		}
		req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Parts: results})
	}
	return answers
}

func serveProxy(t *testing.T, cfg proxy.Config, opts ...proxy.Option) string {
	t.Helper()
	p, err := proxy.New(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestReplayArchive records a streaming tool-call conversation through
// the proxy into the archive, exports it, and re-runs it against the
// replay provider made from the export: the agent gets exactly the
// answers it got from the model (text, thinking, tool call ids, names
// and argument bytes, stop reasons, usage), in its own format and in
// another.
func TestReplayArchive(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	arc, err := archive.Open(context.Background(), archive.Config{Dir: t.TempDir(), Log: slog.New(slog.DiscardHandler)}, st)
	if err != nil {
		t.Fatal(err)
	}
	defer arc.Close()
	up := llmtest.NewFakeUpstream(t, proxy.Codecs[llm.FormatAnthropic], "", model)
	recorded := converse(t, serveProxy(t, proxy.Config{
		Providers: []proxy.Provider{{Name: "up", Type: "anthropic", BaseURL: up.URL}},
		Models:    []proxy.Model{{Name: "agent-model", Provider: "up", Model: "real"}},
	}, proxy.WithRecorder(arc)), llm.FormatAnthropic)
	if len(recorded) != 2 || len(recorded[0].Content) != 4 {
		t.Fatalf("recorded %d answers: %+v", len(recorded), recorded)
	}
	if err := arc.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	var export bytes.Buffer
	enc := json.NewEncoder(&export)
	if err := service.NewLLMExchanges(arc).Export(context.Background(), service.LLMFilter{}, func(x *api.LLMExchangeDetail) error {
		return enc.Encode(x)
	}); err != nil {
		t.Fatal(err)
	}
	// A request that failed and another conversation's exchange are in
	// the export too; neither disturbs the replay.
	export.WriteString(`{"id":"llx_x","format":"anthropic","method":"POST","path":"/v1/messages","status":400,"state":"complete","request":{"body":"{}"},"response":{"body":"{}"}}` + "\n")

	script, err := replay.Load(export.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	cfg := proxy.Config{
		Providers: []proxy.Provider{{Name: "replay", Type: proxy.TypeReplay, Script: script}},
		Models:    []proxy.Model{{Name: "agent-model", Provider: "replay", Model: "real"}},
	}
	// Signatures are the provider's: a replay has none to give.
	ignore := cmp.Options{cmpopts.IgnoreFields(llm.Part{}, "Signature", "Origin"), cmpopts.EquateEmpty()}
	for _, f := range []llm.Format{llm.FormatAnthropic, llm.FormatOpenAI} {
		t.Run(string(f), func(t *testing.T) {
			replayed := converse(t, serveProxy(t, cfg), f)
			want := recorded
			if f != llm.FormatAnthropic { // what the other format carries of the same answers
				want = converse(t, serveProxy(t, proxy.Config{
					Providers: []proxy.Provider{{Name: "up", Type: "anthropic", BaseURL: up.URL}},
					Models:    []proxy.Model{{Name: "agent-model", Provider: "up", Model: "real"}},
				}), f)
			}
			if diff := cmp.Diff(want, replayed, ignore); diff != "" {
				t.Errorf("replayed answers (-recorded +replayed):\n%s", diff)
			}
			for _, r := range replayed {
				for _, p := range r.Content {
					if p.Type == llm.PartToolCall && !strings.HasPrefix(p.ID, "toolu_01") {
						t.Errorf("tool call id %q is not the recorded one", p.ID)
					}
				}
			}
		})
	}
	// A script file still loads as a script.
	if s, err := replay.Load([]byte("turns:\n  - text: hi\n")); err != nil || s.Turns[0].Text != "hi" {
		t.Errorf("script: %+v, %v", s, err)
	}
	if _, err := replay.ParseArchive(strings.NewReader(fmt.Sprintln(`{"format":"anthropic","request":{"body":"{}"}}`))); err == nil {
		t.Error("an archive with no generation made a script")
	}
}
