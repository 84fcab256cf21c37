package proxy_test

// The official SDKs against the proxy: every client format (openai-go for
// Chat Completions and Responses, anthropic-sdk-go, google.golang.org/genai)
// against every upstream format (fake upstreams of the four formats) and
// the replay provider, plain and streaming, each a two-turn tool-call round
// trip. The SDKs' own decoding and stream accumulators must produce the
// expected message: text, tool calls with complete JSON arguments, stop
// reason and usage.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
	"google.golang.org/genai"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/llmtest"
	"github.com/agent2env/agent2env/internal/llm/proxy"
	"github.com/agent2env/agent2env/internal/llm/replay"
	"github.com/agent2env/agent2env/internal/testenv"
)

const (
	sandboxKey  = "sandbox-placeholder-key"
	upstreamKey = "upstream-secret-key"
	question    = "Weather in Paris and in Tokyo?"
)

// The conversation every test has: the model calls get_weather twice, then
// answers from the results.
const script = `
turns:
  - text: "Let me look."
    tool_calls:
      - name: get_weather
        arguments: {city: Paris, units: {temp: C, days: [1, 2]}}
      - name: get_weather
        arguments: {city: Tokyo}
    usage: {input_tokens: 40, output_tokens: 30}
  - text: "Paris 18C, Tokyo 22C."
    usage: {input_tokens: 80, output_tokens: 10}
`

var results = map[string]string{"Paris": "18C", "Tokyo": "22C"}

// view is what a client made of an answer.
type view struct {
	Text    string
	Calls   []callView
	Stop    llm.StopReason
	In, Out int
}

type callView struct {
	ID   string
	Name string
	Args map[string]any
}

func (v view) diffable() view {
	for i := range v.Calls {
		if v.Calls[i].ID != "" {
			v.Calls[i].ID = "<set>"
		}
	}
	return v
}

var (
	wantTurn1 = view{Text: "Let me look.", Stop: llm.StopToolUse, In: 40, Out: 30, Calls: []callView{
		{ID: "<set>", Name: "get_weather", Args: map[string]any{"city": "Paris", "units": map[string]any{"temp": "C", "days": []any{1.0, 2.0}}}},
		{ID: "<set>", Name: "get_weather", Args: map[string]any{"city": "Tokyo"}},
	}}
	wantTurn2 = view{Text: "Paris 18C, Tokyo 22C.", Stop: llm.StopEndTurn, In: 80, Out: 10}
)

func parseArgs(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("tool call arguments %q are not complete JSON: %v", s, err)
	}
	return m
}

// resultFor is the tool result a client sends for a call.
func resultFor(t *testing.T, c callView) string {
	r, ok := results[fmt.Sprint(c.Args["city"])]
	if !ok {
		t.Fatalf("call %+v asks for no known city", c)
	}
	return r
}

// checkUpstream is the fake upstreams' and the replay's answer: it checks
// that the conversation arrived whole (question, calls, results), then
// answers from the script.
func checkUpstream(t *testing.T, s *replay.Script) func(*llm.Request) (*llm.Response, *llm.Error) {
	return func(req *llm.Request) (*llm.Response, *llm.Error) {
		var texts []string
		calls := map[string]string{} // id → city
		answered := 0
		for _, m := range req.Messages {
			for _, p := range m.Parts {
				switch p.Type {
				case llm.PartText:
					texts = append(texts, p.Text)
				case llm.PartToolCall:
					var a map[string]any
					if err := json.Unmarshal([]byte(p.Arguments), &a); err != nil {
						t.Errorf("upstream got call arguments %q: %v", p.Arguments, err)
					}
					calls[p.ID] = fmt.Sprint(a["city"])
				case llm.PartToolResult:
					var text string
					for _, c := range p.Content {
						text += c.Text
					}
					if want := results[calls[p.ID]]; text != want {
						t.Errorf("upstream got result %q for call %s (%s), want %q", text, p.ID, calls[p.ID], want)
					}
					answered++
				}
			}
		}
		if len(texts) == 0 || texts[0] != question {
			t.Errorf("upstream got texts %q, want the question first", texts)
		}
		if answered != len(calls) {
			t.Errorf("upstream got %d results for %d calls", answered, len(calls))
		}
		if len(req.Tools) != 1 || req.Tools[0].Name != "get_weather" {
			t.Errorf("upstream got tools %+v", req.Tools)
		}
		r, err := s.Answer(req)
		if err != nil {
			return nil, llm.AsError(err)
		}
		return r, nil
	}
}

// setup is a proxy with a model per upstream format (m-<format>) and a
// replay model (m-replay).
func setup(t *testing.T) string {
	s, err := replay.Parse([]byte(script))
	if err != nil {
		t.Fatal(err)
	}
	cfg := proxy.Config{Providers: []proxy.Provider{{Name: "replay", Type: proxy.TypeReplay, Script: s}},
		Models: []proxy.Model{{Name: "m-replay", Provider: "replay"}}}
	for f, c := range proxy.Codecs {
		up := llmtest.NewFakeUpstream(t, c, upstreamKey, checkUpstream(t, s))
		cfg.Providers = append(cfg.Providers, proxy.Provider{Name: "up-" + string(f), Type: string(f), BaseURL: up.URL, APIKey: upstreamKey})
		cfg.Models = append(cfg.Models, proxy.Model{Name: "m-" + string(f), Provider: "up-" + string(f), Model: "upstream-" + string(f)})
	}
	p, err := proxy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(stripLLM(p))
	t.Cleanup(srv.Close)
	return srv.URL + "/llm"
}

// client runs the two turns with one SDK and returns what it made of them.
type client func(t *testing.T, base, model string, stream bool) (turn1, turn2 view)

func TestSDKs(t *testing.T) {
	base := setup(t)
	clients := map[string]client{
		"openai-chat":      openaiChat,
		"openai-responses": openaiResponses,
		"anthropic":        anthropicMessages,
		"gemini":           geminiGenerate,
	}
	upstreams := []string{"openai", "openai-responses", "anthropic", "gemini", "replay"}
	for name, run := range clients {
		for _, up := range upstreams {
			for _, stream := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/to-%s/stream=%v", name, up, stream), func(t *testing.T) {
					turn1, turn2 := run(t, base, "m-"+up, stream)
					if d := cmp.Diff(wantTurn1, turn1.diffable()); d != "" {
						t.Errorf("turn 1 (-want +got):\n%s", d)
					}
					if d := cmp.Diff(wantTurn2, turn2.diffable()); d != "" {
						t.Errorf("turn 2 (-want +got):\n%s", d)
					}
				})
			}
		}
	}
}

var weatherSchema = map[string]any{
	"type":       "object",
	"properties": map[string]any{"city": map[string]any{"type": "string"}, "units": map[string]any{"type": "object"}},
	"required":   []any{"city"},
}

func openaiChat(t *testing.T, base, model string, stream bool) (view, view) {
	ctx := context.Background()
	c := openai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey(sandboxKey), option.WithMaxRetries(0))
	params := openai.ChatCompletionNewParams{
		Model:    model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(question)},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "get_weather", Parameters: shared.FunctionParameters(weatherSchema),
		})},
	}
	if stream {
		params.StreamOptions.IncludeUsage = openai.Bool(true)
	}
	ask := func() (openai.ChatCompletion, view) {
		var cc openai.ChatCompletion
		if stream {
			s := c.Chat.Completions.NewStreaming(ctx, params)
			var acc openai.ChatCompletionAccumulator
			for s.Next() {
				if !acc.AddChunk(s.Current()) {
					t.Fatalf("accumulator refused chunk %s", s.Current().RawJSON())
				}
			}
			if err := s.Err(); err != nil {
				t.Fatalf("stream: %v", err)
			}
			cc = acc.ChatCompletion
		} else {
			r, err := c.Chat.Completions.New(ctx, params)
			if err != nil {
				t.Fatalf("chat completion: %v", err)
			}
			cc = *r
		}
		if len(cc.Choices) != 1 {
			t.Fatalf("%d choices", len(cc.Choices))
		}
		ch := cc.Choices[0]
		v := view{Text: ch.Message.Content, In: int(cc.Usage.PromptTokens), Out: int(cc.Usage.CompletionTokens)}
		switch ch.FinishReason {
		case "tool_calls":
			v.Stop = llm.StopToolUse
		case "stop":
			v.Stop = llm.StopEndTurn
		default:
			v.Stop = llm.StopReason(ch.FinishReason)
		}
		for _, tc := range ch.Message.ToolCalls {
			v.Calls = append(v.Calls, callView{ID: tc.ID, Name: tc.Function.Name, Args: parseArgs(t, tc.Function.Arguments)})
		}
		return cc, v
	}
	cc, turn1 := ask()
	params.Messages = append(params.Messages, cc.Choices[0].Message.ToParam())
	for _, call := range turn1.Calls {
		params.Messages = append(params.Messages, openai.ToolMessage(resultFor(t, call), call.ID))
	}
	_, turn2 := ask()
	return turn1, turn2
}

func openaiResponses(t *testing.T, base, model string, stream bool) (view, view) {
	ctx := context.Background()
	c := openai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey(sandboxKey), option.WithMaxRetries(0))
	input := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage(question, responses.EasyInputMessageRoleUser)}
	params := responses.ResponseNewParams{
		Model: model,
		Tools: []responses.ToolUnionParam{responses.ToolParamOfFunction("get_weather", weatherSchema, false)},
	}
	ask := func() view {
		params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: input}
		var r responses.Response
		if stream {
			s := c.Responses.NewStreaming(ctx, params)
			deltas := map[string]string{}
			text := ""
			for s.Next() {
				ev := s.Current()
				switch ev.Type {
				case "response.function_call_arguments.delta":
					deltas[ev.ItemID] += ev.Delta
				case "response.output_text.delta":
					text += ev.Delta
				case "response.completed":
					r = ev.Response
				}
			}
			if err := s.Err(); err != nil {
				t.Fatalf("stream: %v", err)
			}
			for _, it := range r.Output {
				if it.Type == "function_call" && deltas[it.ID] != it.Arguments.OfString {
					t.Errorf("argument deltas of %s add up to %q, the item says %q", it.ID, deltas[it.ID], it.Arguments.OfString)
				}
			}
			if text != r.OutputText() {
				t.Errorf("text deltas add up to %q, the response says %q", text, r.OutputText())
			}
		} else {
			resp, err := c.Responses.New(ctx, params)
			if err != nil {
				t.Fatalf("response: %v", err)
			}
			r = *resp
		}
		v := view{Text: r.OutputText(), In: int(r.Usage.InputTokens), Out: int(r.Usage.OutputTokens), Stop: llm.StopEndTurn}
		if r.Status != "completed" {
			t.Errorf("status %q", r.Status)
		}
		for _, it := range r.Output {
			switch it.Type {
			case "function_call":
				v.Calls = append(v.Calls, callView{ID: it.CallID, Name: it.Name, Args: parseArgs(t, it.Arguments.OfString)})
				v.Stop = llm.StopToolUse
				input = append(input, responses.ResponseInputItemParamOfFunctionCall(it.Arguments.OfString, it.CallID, it.Name))
			case "message":
				input = append(input, responses.ResponseInputItemParamOfMessage(it.Content[0].Text, responses.EasyInputMessageRoleAssistant))
			}
		}
		return v
	}
	turn1 := ask()
	for _, call := range turn1.Calls {
		out := responses.ResponseInputItemParamOfFunctionCallOutput(resultFor(t, call))
		out.OfFunctionCallOutput.CallID = openai.String(call.ID)
		input = append(input, out)
	}
	return turn1, ask()
}

func anthropicMessages(t *testing.T, base, model string, stream bool) (view, view) {
	ctx := context.Background()
	c := anthropic.NewClient(aoption.WithBaseURL(base), aoption.WithAPIKey(sandboxKey), aoption.WithMaxRetries(0))
	params := anthropic.MessageNewParams{
		Model: anthropic.Model(model), MaxTokens: 1024,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(question))},
		Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather", InputSchema: anthropic.ToolInputSchemaParam{
			Properties: weatherSchema["properties"], Required: []string{"city"},
		}}}},
	}
	ask := func() (anthropic.Message, view) {
		var msg anthropic.Message
		if stream {
			s := c.Messages.NewStreaming(ctx, params)
			for s.Next() {
				if err := msg.Accumulate(s.Current()); err != nil {
					t.Fatalf("accumulate: %v", err)
				}
			}
			if err := s.Err(); err != nil {
				t.Fatalf("stream: %v", err)
			}
		} else {
			r, err := c.Messages.New(ctx, params)
			if err != nil {
				t.Fatalf("message: %v", err)
			}
			msg = *r
		}
		v := view{Stop: llm.StopReason(msg.StopReason), In: int(msg.Usage.InputTokens), Out: int(msg.Usage.OutputTokens)}
		for _, b := range msg.Content {
			switch b := b.AsAny().(type) {
			case anthropic.TextBlock:
				v.Text += b.Text
			case anthropic.ToolUseBlock:
				v.Calls = append(v.Calls, callView{ID: b.ID, Name: b.Name, Args: parseArgs(t, string(b.Input))})
			}
		}
		return msg, v
	}
	msg, turn1 := ask()
	var blocks []anthropic.ContentBlockParamUnion
	for _, call := range turn1.Calls {
		blocks = append(blocks, anthropic.NewToolResultBlock(call.ID, resultFor(t, call), false))
	}
	params.Messages = append(params.Messages, msg.ToParam(), anthropic.NewUserMessage(blocks...))
	_, turn2 := ask()
	return turn1, turn2
}

func geminiGenerate(t *testing.T, base, model string, stream bool) (view, view) {
	ctx := context.Background()
	c, err := genai.NewClient(ctx, &genai.ClientConfig{
		APIKey: sandboxKey, Backend: genai.BackendGeminiAPI, HTTPOptions: genai.HTTPOptions{BaseURL: base + "/"},
	})
	if err != nil {
		t.Fatal(err)
	}
	contents := []*genai.Content{genai.NewContentFromText(question, genai.RoleUser)}
	config := &genai.GenerateContentConfig{Tools: []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{
		Name: "get_weather", Description: "Current weather for a city.", ParametersJsonSchema: weatherSchema,
	}}}}}
	ask := func() ([]*genai.Part, view) {
		var parts []*genai.Part
		var finish genai.FinishReason
		var usage *genai.GenerateContentResponseUsageMetadata
		collect := func(r *genai.GenerateContentResponse) {
			if len(r.Candidates) == 0 {
				t.Fatalf("no candidates")
			}
			if r.Candidates[0].Content != nil {
				parts = append(parts, r.Candidates[0].Content.Parts...)
			}
			if r.Candidates[0].FinishReason != "" {
				finish = r.Candidates[0].FinishReason
			}
			if r.UsageMetadata != nil {
				usage = r.UsageMetadata
			}
		}
		if stream {
			for r, err := range c.Models.GenerateContentStream(ctx, model, contents, config) {
				if err != nil {
					t.Fatalf("stream: %v", err)
				}
				collect(r)
			}
		} else {
			r, err := c.Models.GenerateContent(ctx, model, contents, config)
			if err != nil {
				t.Fatalf("generate: %v", err)
			}
			collect(r)
		}
		v := view{Stop: llm.StopEndTurn}
		if usage != nil {
			v.In, v.Out = int(usage.PromptTokenCount), int(usage.CandidatesTokenCount)
		}
		if finish != genai.FinishReasonStop {
			t.Errorf("finish reason %q", finish)
		}
		var b strings.Builder
		for _, p := range parts {
			switch {
			case p.FunctionCall != nil:
				args, _ := json.Marshal(p.FunctionCall.Args)
				v.Calls = append(v.Calls, callView{ID: p.FunctionCall.ID, Name: p.FunctionCall.Name, Args: parseArgs(t, string(args))})
				v.Stop = llm.StopToolUse
			case !p.Thought:
				b.WriteString(p.Text)
			}
		}
		v.Text = b.String()
		return parts, v
	}
	parts, turn1 := ask()
	var answers []*genai.Part
	for _, call := range turn1.Calls {
		answers = append(answers, &genai.Part{FunctionResponse: &genai.FunctionResponse{
			ID: call.ID, Name: call.Name, Response: map[string]any{"output": resultFor(t, call)},
		}})
	}
	contents = append(contents, &genai.Content{Role: genai.RoleModel, Parts: parts}, genai.NewContentFromParts(answers, genai.RoleUser))
	_, turn2 := ask()
	return turn1, turn2
}

// TestPythonSDKs runs testdata/test_python_sdks.py (pytest, with the
// openai, anthropic and google-genai packages from PyPI) against the same
// proxy and upstreams as TestSDKs. It needs an interpreter with those
// packages, named by AGENT2ENV_PYTHON (make test sets it to the one
// scripts/test-peers.sh makes); CI=true makes its absence a failure.
func TestPythonSDKs(t *testing.T) {
	python := os.Getenv("AGENT2ENV_PYTHON")
	if python == "" {
		testenv.Missing(t, "set AGENT2ENV_PYTHON to the python of scripts/test-peers.sh (make test does) to run the Python SDKs")
	}
	base := setup(t)
	cmd := exec.Command(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "testdata/test_python_sdks.py")
	cmd.Env = append(os.Environ(), "LLM_BASE="+base,
		"LLM_MODELS=m-openai,m-openai-responses,m-anthropic,m-gemini,m-replay")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pytest: %v\n%s", err, out)
	}
	t.Logf("pytest:\n%s", out)
}
