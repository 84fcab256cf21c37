package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/internal/wire"
	"github.com/agent2env/agent2env/internal/llm/llmtest"
	"github.com/agent2env/agent2env/internal/llm/proxy"
)

func stripLLM(h http.Handler) http.Handler { return http.StripPrefix("/llm", h) }

func answer(text string) func(*llm.Request) (*llm.Response, *llm.Error) {
	return func(*llm.Request) (*llm.Response, *llm.Error) {
		return &llm.Response{ID: "r1", Model: "real-model", Content: []llm.Part{llm.Text(text)}, StopReason: llm.StopEndTurn,
			Usage: llm.Usage{InputTokens: 7, OutputTokens: 3}}, nil
	}
}

func failing(e *llm.Error) func(*llm.Request) (*llm.Response, *llm.Error) {
	return func(*llm.Request) (*llm.Response, *llm.Error) { return nil, e }
}

// exchanges collects what the observer is told.
type exchanges struct {
	mu  sync.Mutex
	all []proxy.Exchange
}

func (x *exchanges) observe(e *proxy.Exchange) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.all = append(x.all, *e)
}

func (x *exchanges) last(t *testing.T) proxy.Exchange {
	t.Helper()
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.all) == 0 {
		t.Fatal("no exchange observed")
	}
	return x.all[len(x.all)-1]
}

// wait is the last exchange, once there is one (an exchange whose client
// left ends after the client saw its end).
func (x *exchanges) wait(t *testing.T) proxy.Exchange {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		x.mu.Lock()
		n := len(x.all)
		x.mu.Unlock()
		if n > 0 {
			break
		}
	}
	return x.last(t)
}

func serve(t *testing.T, cfg proxy.Config) (string, *exchanges) {
	t.Helper()
	x := &exchanges{}
	p, err := proxy.New(cfg, proxy.WithObserver(x.observe))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(stripLLM(p))
	t.Cleanup(srv.Close)
	return srv.URL + "/llm", x
}

// inbound is how a client of each format calls the proxy.
type inbound struct {
	path   string // with {model} for Gemini
	stream string // Gemini: the streaming path
	auth   func(h http.Header)
	body   string // with %s for the model and %t for stream (not Gemini)
}

var inbounds = map[llm.Format]inbound{
	llm.FormatOpenAI: {
		path: "/v1/chat/completions", auth: func(h http.Header) { h.Set("Authorization", "Bearer "+sandboxKey) },
		body: `{"model" : "%s",  "messages":[{"role":"user","content":"hi"}], "stream": %t, "x_vendor": {"a": [1, 2]}, "stream_options": {"include_usage": true}}`,
	},
	llm.FormatResponses: {
		path: "/v1/responses", auth: func(h http.Header) { h.Set("Authorization", "Bearer "+sandboxKey) },
		body: `{"model":"%s","input":"hi","stream":%t,"store":false,"include":["reasoning.encrypted_content"],` +
			`"tools":[{"type":"web_search"},{"type":"namespace","name":"mcp__h","description":"","tools":[{"type":"function","name":"ping","parameters":{"type":"object"}}]}]}`,
	},
	llm.FormatAnthropic: {
		path: "/v1/messages?beta=true", auth: func(h http.Header) {
			h.Set("x-api-key", sandboxKey)
			h.Set("anthropic-beta", "context-management-2025-06-27")
		},
		body: `{"model":"%s","max_tokens":2048,"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}],` +
			`"stream":%t,"thinking":{"type":"enabled","budget_tokens":1024},"context_management":{"edits":[{"type":"clear_tool_uses_20250919"}]}}`,
	},
	llm.FormatGemini: {
		path: "/v1beta/models/%s:generateContent", stream: "/v1beta/models/%s:streamGenerateContent?alt=sse&key=" + sandboxKey,
		auth: func(h http.Header) { h.Set("x-goog-api-key", sandboxKey) },
		body: `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"thinkingConfig":{"includeThoughts":true}},"safetySettings":[]}`,
	},
}

// post sends a client's raw request and returns the answer.
func post(t *testing.T, base string, f llm.Format, model string, stream bool) (*http.Response, []byte, []byte) {
	t.Helper()
	in := inbounds[f]
	path, body := in.path, in.body
	if f == llm.FormatGemini {
		if stream {
			path = in.stream
		}
		path = fmt.Sprintf(path, model)
	} else {
		body = fmt.Sprintf(body, model, stream)
	}
	req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	in.auth(req.Header)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	return resp, []byte(body), got
}

// textOf is the text of an answer in format f.
func textOf(t *testing.T, f llm.Format, body []byte, stream bool) string {
	t.Helper()
	c := proxy.Codecs[f]
	r, err := c.DecodeResponse(body)
	if stream {
		var evs []llm.Event
		evs, err = llmtest.DecodeStream(c, bytes.NewReader(body))
		var acc llm.Accumulator
		for i := range evs {
			acc.Add(&evs[i])
		}
		r = acc.Response()
	}
	if err != nil {
		t.Fatalf("decode %s answer: %v\n%s", f, err, body)
	}
	var text string
	for _, p := range r.Content {
		text += p.Text
	}
	return text
}

func TestPassthroughIsByteIdentical(t *testing.T) {
	for f, c := range proxy.Codecs {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", f, stream), func(t *testing.T) {
				up := llmtest.NewFakeUpstream(t, c, upstreamKey, answer("hello from upstream"))
				base, x := serve(t, proxy.Config{
					Providers: []proxy.Provider{{Name: "up", Type: string(f), BaseURL: up.URL, APIKey: upstreamKey}},
					Models:    []proxy.Model{{Name: "alias", Provider: "up", Model: "real-model"}},
				})
				resp, sent, got := post(t, base, f, "alias", stream)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d: %s", resp.StatusCode, got)
				}
				calls := up.Calls()
				if len(calls) != 1 {
					t.Fatalf("%d upstream calls", len(calls))
				}
				call := calls[0]
				want := sent
				if f == llm.FormatGemini {
					if !strings.Contains(call.Path, "/models/real-model:") {
						t.Errorf("upstream path %s does not name the real model", call.Path)
					}
				} else {
					want, _ = wire.ReplaceModel(sent, "real-model")
				}
				if !bytes.Equal(call.Body, want) {
					t.Errorf("upstream got\n%s\nwant\n%s", call.Body, want)
				}
				if !bytes.Equal(got, call.Sent) {
					t.Errorf("client got\n%s\nupstream sent\n%s", got, call.Sent)
				}
				for k, vs := range call.Header {
					for _, v := range vs {
						if strings.Contains(v, sandboxKey) {
							t.Errorf("upstream saw the client's key in %s", k)
						}
					}
				}
				if strings.Contains(call.Query, sandboxKey) {
					t.Errorf("upstream saw the client's key in the query %q", call.Query)
				}
				switch f {
				case llm.FormatAnthropic:
					if call.Query != "beta=true" || call.Header.Get("anthropic-beta") == "" {
						t.Errorf("query %q, anthropic-beta %q: the client's were not kept", call.Query, call.Header.Get("anthropic-beta"))
					}
				case llm.FormatGemini:
					if stream && call.Query != "alt=sse" {
						t.Errorf("query %q, want alt=sse", call.Query)
					}
				}
				ex := x.last(t)
				if !ex.Passthrough || ex.Usage.InputTokens != 7 || ex.Usage.OutputTokens != 3 || ex.Status != 200 {
					t.Errorf("exchange %+v", ex)
				}
			})
		}
	}
}

// TestTranslatedBetaFields sends what claude-code and codex send to an
// upstream of another format: the fields that do not translate are dropped,
// and the request still succeeds.
func TestTranslatedBetaFields(t *testing.T) {
	up := llmtest.NewFakeUpstream(t, proxy.Codecs[llm.FormatOpenAI], upstreamKey, answer("ok"))
	base, _ := serve(t, proxy.Config{
		Providers: []proxy.Provider{{Name: "up", Type: "openai", BaseURL: up.URL, APIKey: upstreamKey}},
		Models:    []proxy.Model{{Name: "m", Provider: "up"}},
	})
	for _, f := range []llm.Format{llm.FormatAnthropic, llm.FormatResponses, llm.FormatGemini} {
		for _, stream := range []bool{false, true} {
			resp, _, got := post(t, base, f, "m", stream)
			if resp.StatusCode != 200 || textOf(t, f, got, stream) != "ok" {
				t.Errorf("%s stream=%v: %d %s", f, stream, resp.StatusCode, got)
			}
		}
	}
	for _, c := range up.Calls() {
		for _, s := range []string{"context_management", "cache_control", "web_search", "namespace", `"include"`, "safetySettings", sandboxKey} {
			if bytes.Contains(c.Body, []byte(s)) {
				t.Errorf("translated request carries %q: %s", s, c.Body)
			}
		}
		if c.Header.Get("anthropic-beta") != "" {
			t.Errorf("anthropic-beta sent to an OpenAI upstream")
		}
	}
}

func TestFallback(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	limited := llmtest.NewFakeUpstream(t, proxy.Codecs[llm.FormatGemini], "", failing(&llm.Error{Kind: llm.ErrorRateLimit, Message: "quota"}))
	broken := llmtest.NewFakeUpstream(t, proxy.Codecs[llm.FormatAnthropic], "", failing(&llm.Error{Kind: llm.ErrorOverloaded, Message: "overloaded"}))
	good := llmtest.NewFakeUpstream(t, proxy.Codecs[llm.FormatResponses], "", answer("from the fallback"))
	bad := llmtest.NewFakeUpstream(t, proxy.Codecs[llm.FormatOpenAI], "", failing(&llm.Error{Kind: llm.ErrorInvalidRequest, Message: "your prompt is bad"}))
	base, x := serve(t, proxy.Config{
		Providers: []proxy.Provider{
			{Name: "down", Type: "openai", BaseURL: closed.URL + "/v1"},
			{Name: "limited", Type: "gemini", BaseURL: limited.URL},
			{Name: "broken", Type: "anthropic", BaseURL: broken.URL},
			{Name: "good", Type: "openai-responses", BaseURL: good.URL},
			{Name: "bad", Type: "openai", BaseURL: bad.URL},
		},
		Models: []proxy.Model{
			{Name: "m", Provider: "down", Fallbacks: []string{"m-limited", "m-broken", "m-good"}},
			{Name: "m-limited", Provider: "limited"}, {Name: "m-broken", Provider: "broken"}, {Name: "m-good", Provider: "good"},
			{Name: "m-bad", Provider: "bad", Fallbacks: []string{"m-good"}},
			{Name: "m-only-limited", Provider: "limited"},
		},
	})
	for _, stream := range []bool{false, true} {
		resp, _, got := post(t, base, llm.FormatAnthropic, "m", stream)
		if resp.StatusCode != 200 || textOf(t, llm.FormatAnthropic, got, stream) != "from the fallback" {
			t.Fatalf("stream=%v: %d %s", stream, resp.StatusCode, got)
		}
		if ex := x.last(t); ex.Attempts != 4 || ex.Provider != "good" {
			t.Errorf("exchange: %d attempts, provider %s", ex.Attempts, ex.Provider)
		}
	}
	// A bad request is the client's: no fallback, its error in its format.
	resp, _, got := post(t, base, llm.FormatAnthropic, "m-bad", false)
	var ae struct {
		Type  string `json:"type"`
		Error struct{ Type, Message string }
	}
	if err := json.Unmarshal(got, &ae); err != nil || resp.StatusCode != 400 || ae.Type != "error" ||
		ae.Error.Type != "invalid_request_error" || ae.Error.Message != "your prompt is bad" {
		t.Errorf("bad request: %d %s", resp.StatusCode, got)
	}
	if len(good.Calls()) != 2 {
		t.Errorf("the good upstream got %d calls, want 2 (no fallback on a bad request)", len(good.Calls()))
	}
}

// TestErrorsInClientFormat: each client gets its own error shape and the
// right status, for an unknown model, a rate limit upstream and bad JSON.
func TestErrorsInClientFormat(t *testing.T) {
	limited := llmtest.NewFakeUpstream(t, proxy.Codecs[llm.FormatOpenAI], "", failing(&llm.Error{Kind: llm.ErrorRateLimit, Message: "slow down"}))
	base, _ := serve(t, proxy.Config{
		Providers: []proxy.Provider{{Name: "limited", Type: "openai", BaseURL: limited.URL}},
		Models:    []proxy.Model{{Name: "m", Provider: "limited"}},
	})
	type shape struct {
		status  int
		message string
	}
	read := map[llm.Format]func([]byte) string{
		llm.FormatOpenAI: func(b []byte) string {
			var e struct {
				Error struct{ Message, Type string }
			}
			_ = json.Unmarshal(b, &e)
			return e.Error.Message
		},
		llm.FormatAnthropic: func(b []byte) string {
			var e struct {
				Type  string
				Error struct{ Message, Type string }
			}
			if json.Unmarshal(b, &e) != nil || e.Type != "error" {
				return ""
			}
			return e.Error.Message
		},
		llm.FormatGemini: func(b []byte) string {
			var e struct {
				Error struct {
					Code            int
					Message, Status string
				}
			}
			_ = json.Unmarshal(b, &e)
			return e.Error.Message
		},
	}
	read[llm.FormatResponses] = read[llm.FormatOpenAI]
	for f := range inbounds {
		for model, want := range map[string]shape{
			"nope": {404, `model "nope" is not configured in the LLM proxy`},
			"m":    {429, "slow down"},
		} {
			resp, _, got := post(t, base, f, model, false)
			if resp.StatusCode != want.status || read[f](got) != want.message {
				t.Errorf("%s, model %s: %d %s, want %d %q", f, model, resp.StatusCode, got, want.status, want.message)
			}
		}
	}
	for _, path := range []string{"/v1/chat/completions", "/v1/responses", "/v1/messages", "/v1beta/models/m:generateContent"} {
		resp, err := http.Post(base+path, "application/json", strings.NewReader(`{"model": "m", "messages": [`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !bytes.Contains(body, []byte("error")) {
			t.Errorf("%s with bad JSON: %d %s", path, resp.StatusCode, body)
		}
	}
}

// TestCountTokens: counts in both formats, by upstreams that count and
// estimated for those that cannot, and never charged.
func TestCountTokens(t *testing.T) {
	cfg := proxy.Config{}
	for f, c := range proxy.Codecs {
		up := llmtest.NewFakeUpstream(t, c, "", answer("x"))
		cfg.Providers = append(cfg.Providers, proxy.Provider{Name: string(f), Type: string(f), BaseURL: up.URL})
		cfg.Models = append(cfg.Models, proxy.Model{Name: "m-" + string(f), Provider: string(f)})
	}
	base, x := serve(t, cfg)
	for f := range proxy.Codecs {
		want := 42 // what the fake upstreams count
		if f == llm.FormatOpenAI || f == llm.FormatResponses {
			want = 4 // an estimate (15 bytes): those formats cannot count
		}
		resp, err := http.Post(base+"/v1/messages/count_tokens", "application/json",
			strings.NewReader(`{"model":"m-`+string(f)+`","messages":[{"role":"user","content":"how many tokens"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		var ac struct {
			InputTokens int `json:"input_tokens"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&ac)
		resp.Body.Close()
		if resp.StatusCode != 200 || ac.InputTokens != want {
			t.Errorf("anthropic count via %s: %d, %d tokens, want %d", f, resp.StatusCode, ac.InputTokens, want)
		}
		resp, err = http.Post(base+"/v1beta/models/m-"+string(f)+":countTokens", "application/json",
			strings.NewReader(`{"contents":[{"role":"user","parts":[{"text":"how many tokens"}]}]}`))
		if err != nil {
			t.Fatal(err)
		}
		var gc struct{ TotalTokens int }
		_ = json.NewDecoder(resp.Body).Decode(&gc)
		resp.Body.Close()
		if resp.StatusCode != 200 || gc.TotalTokens != want {
			t.Errorf("gemini count via %s: %d, %d tokens, want %d", f, resp.StatusCode, gc.TotalTokens, want)
		}
	}
	// A count is charged nothing: upstreams do not bill it.
	for _, ex := range x.all {
		if ex.Usage != (llm.Usage{}) {
			t.Errorf("count %s %s charged %+v, want nothing", ex.Inbound, ex.Model, ex.Usage)
		}
	}
}

func TestModels(t *testing.T) {
	base, _ := serve(t, proxy.Config{
		Providers: []proxy.Provider{{Name: "up", Type: "openai", BaseURL: "http://127.0.0.1:1/v1"}},
		Models:    []proxy.Model{{Name: "coder", Provider: "up"}, {Name: "fast", Provider: "up"}},
	})
	get := func(path string, h map[string]string) string {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	for _, tc := range []struct {
		path string
		h    map[string]string
		want string
	}{
		{"/v1/models", nil, `{"object":"list","data":[{"id":"coder","object":"model","created":0,"owned_by":"agent2env"},{"id":"fast","object":"model","created":0,"owned_by":"agent2env"}]}`},
		{"/v1/models", map[string]string{"anthropic-version": "2023-06-01"}, `{"data":[{"type":"model","id":"coder","display_name":"coder","created_at":"1970-01-01T00:00:00Z"},{"type":"model","id":"fast","display_name":"fast","created_at":"1970-01-01T00:00:00Z"}],"has_more":false,"first_id":"coder","last_id":"fast"}`},
		{"/v1beta/models", nil, `{"models":[{"name":"models/coder","displayName":"coder","supportedGenerationMethods":["generateContent","streamGenerateContent","countTokens"]},{"name":"models/fast","displayName":"fast","supportedGenerationMethods":["generateContent","streamGenerateContent","countTokens"]}]}`},
	} {
		if d := cmp.Diff(tc.want, get(tc.path, tc.h)); d != "" {
			t.Errorf("GET %s %v (-want +got):\n%s", tc.path, tc.h, d)
		}
	}
}

// TestClientDisconnect: a client that leaves mid-stream cancels the
// upstream call, and the exchange is reported with its error, charged what
// it was sent (the stream's count never came).
func TestClientDisconnect(t *testing.T) {
	gone := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		sink := llm.NewSSEWriter(w)
		enc := proxy.Codecs[llm.FormatAnthropic].NewStreamEncoder(sink, &llm.Request{})
		_ = enc.Encode(&llm.Event{Type: llm.EventStart, ID: "m1", Model: "slow"})
		_ = enc.Encode(&llm.Event{Type: llm.EventBlockStart, Block: llm.Text("")})
		for i := 0; ; i++ {
			if err := enc.Encode(&llm.Event{Type: llm.EventDelta, Delta: llm.DeltaText, Text: fmt.Sprint(i, " ")}); err != nil {
				break
			}
			http.NewResponseController(w).Flush()
			select {
			case <-r.Context().Done():
				close(gone)
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}))
	defer slow.Close()
	for _, f := range []llm.Format{llm.FormatAnthropic, llm.FormatOpenAI} { // pass-through, then translated
		gone = make(chan struct{})
		base, x := serve(t, proxy.Config{
			Providers: []proxy.Provider{{Name: "slow", Type: "anthropic", BaseURL: slow.URL}},
			Models:    []proxy.Model{{Name: "m", Provider: "slow"}},
		})
		ctx, cancel := context.WithCancel(context.Background())
		in := inbounds[f]
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+in.path, strings.NewReader(fmt.Sprintf(in.body, "m", true)))
		in.auth(req.Header)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 512)
		if _, err := resp.Body.Read(buf); err != nil {
			t.Fatalf("%s: first bytes: %v", f, err)
		}
		cancel()
		resp.Body.Close()
		select {
		case <-gone:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the upstream call was not canceled", f)
		}
		if ex := x.wait(t); ex.Err == nil || ex.FirstByte <= 0 || ex.Usage.OutputTokens == 0 || !ex.UsageEstimated {
			t.Errorf("%s: exchange %+v, want an error, a first byte and the output sent charged", f, ex)
		}
	}
}

// TestGeminiAPIVersions: Gemini clients call v1beta (gemini-cli, the Go
// SDK) or v1 (the Python SDK); pass-through keeps the version, and a path
// that matches nothing is answered in Gemini's error format.
func TestGeminiAPIVersions(t *testing.T) {
	up := llmtest.NewFakeUpstream(t, proxy.Codecs[llm.FormatGemini], upstreamKey, answer("hi"))
	base, _ := serve(t, proxy.Config{
		Providers: []proxy.Provider{{Name: "up", Type: "gemini", BaseURL: up.URL, APIKey: upstreamKey}},
		Models:    []proxy.Model{{Name: "alias", Provider: "up", Model: "real-model"}},
	})
	body := `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`
	for _, version := range []string{"v1beta", "v1"} {
		resp, err := http.Post(base+"/"+version+"/models/alias:generateContent", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		calls := up.Calls()
		if resp.StatusCode != 200 || calls[len(calls)-1].Path != "/"+version+"/models/real-model:generateContent" {
			t.Errorf("%s: %d, upstream path %s", version, resp.StatusCode, calls[len(calls)-1].Path)
		}
	}
	resp, err := http.Post(base+"/v1beta/tunedModels/x:generateContent", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		Error struct {
			Code   int
			Status string
		}
	}
	_ = json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != 404 || e.Error.Code != 404 || e.Error.Status != "NOT_FOUND" {
		t.Errorf("unknown Gemini path: %d %+v", resp.StatusCode, e)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, cfg := range []proxy.Config{
		{Providers: []proxy.Provider{{Name: "a", Type: "cohere", BaseURL: "http://x"}}},
		{Providers: []proxy.Provider{{Name: "a", Type: "openai"}}},
		{Providers: []proxy.Provider{{Name: "a", Type: "replay"}}},
		{Providers: []proxy.Provider{{Name: "a", Type: "openai", BaseURL: "http://x", ForwardHeaders: []string{"X-Api-Key"}}}},
		{Providers: []proxy.Provider{{Name: "a", Type: "openai", BaseURL: "http://x"}, {Name: "a", Type: "openai", BaseURL: "http://x"}}},
		{Models: []proxy.Model{{Name: "m", Provider: "nobody"}}},
		{Providers: []proxy.Provider{{Name: "a", Type: "openai", BaseURL: "http://x"}}, Models: []proxy.Model{{Name: "m", Provider: "a", Fallbacks: []string{"ghost"}}}},
	} {
		if _, err := proxy.New(cfg); err == nil {
			t.Errorf("New(%+v) accepted a bad configuration", cfg)
		}
	}
}

// flushCounter is a ResponseWriter that keeps what was flushed and counts
// the flushes.
type flushCounter struct {
	mu      sync.Mutex
	header  http.Header
	buf     bytes.Buffer
	flushed string
	first   string // what the first flush sent
	flushes int
}

func (f *flushCounter) Header() http.Header { return f.header }
func (f *flushCounter) WriteHeader(int)     {}
func (f *flushCounter) Write(b []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.buf.Write(b)
}

func (f *flushCounter) Flush() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.flushed, f.flushes = f.buf.String(), f.flushes+1
	if f.flushes == 1 {
		f.first = f.flushed
	}
}

func (f *flushCounter) firstFlush() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.first
}

func (f *flushCounter) state() (string, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.flushed, f.flushes
}

// TestPassStreamFlushesPerBurst: stream events that come from the upstream
// together are flushed to the client together, the last of them without
// waiting for what comes next; the first event is flushed at once, with
// the header, whatever follows it.
func TestPassStreamFlushesPerBurst(t *testing.T) {
	ev := func(i int) string {
		return fmt.Sprintf(`data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"content":"w%d "}}]}`+"\n\n", i)
	}
	var burst strings.Builder
	for i := range 10 {
		burst.WriteString(ev(i))
	}
	more := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, burst.String())
		http.NewResponseController(w).Flush()
		<-more
		io.WriteString(w, ev(10)+"data: [DONE]\n\n")
	}))
	defer up.Close()
	p, err := proxy.New(proxy.Config{
		Providers: []proxy.Provider{{Name: "up", Type: "openai", BaseURL: up.URL}},
		Models:    []proxy.Model{{Name: "m", Provider: "up"}},
	}, proxy.WithObserver(func(*proxy.Exchange) {}))
	if err != nil {
		t.Fatal(err)
	}
	w := &flushCounter{header: http.Header{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`))
		p.ServeHTTP(w, req)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		flushed, n := w.state()
		if flushed == burst.String() {
			// The first event's flush, with the header, and the rest's: one
			// more where the burst came in pieces.
			if n > 3 {
				t.Errorf("%d flushes for the header and a burst of 10 events, want at most 3", n)
			}
			if first := w.firstFlush(); first != ev(0) {
				t.Errorf("first flush %q, want the first event alone (with the header)", first)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the burst was not flushed before the next event came; flushed %q", flushed)
		}
		time.Sleep(time.Millisecond)
	}
	close(more)
	<-done
	if flushed, _ := w.state(); flushed != burst.String()+ev(10)+"data: [DONE]\n\n" {
		t.Errorf("flushed %q", flushed)
	}
}

// TestAccountHeaders: the headers that choose the account, organisation or
// project of the operator's key pass from a client only where the
// provider's ForwardHeaders name them; feature headers pass as before, and
// a client's credentials never.
func TestAccountHeaders(t *testing.T) {
	sent := http.Header{
		"Openai-Organization": {"org-sandbox"}, "Openai-Project": {"proj-sandbox"}, "Chatgpt-Account-Id": {"acct-sandbox"},
		"X-Goog-User-Project": {"gcp-sandbox"}, "Openai-Beta": {"assistants=v2"}, "Anthropic-Beta": {"context-1m"},
		"Api-Key": {sandboxKey},
	}
	tests := []struct {
		format  llm.Format
		forward []string
		want    []string // of sent, the headers the upstream gets
	}{
		{llm.FormatOpenAI, nil, []string{"Openai-Beta", "Anthropic-Beta"}},
		{llm.FormatOpenAI, []string{"openai-organization"}, []string{"Openai-Organization", "Openai-Beta", "Anthropic-Beta"}},
		{llm.FormatResponses, []string{"ChatGPT-Account-ID", "OpenAI-Project"}, []string{"Chatgpt-Account-Id", "Openai-Project", "Openai-Beta", "Anthropic-Beta"}},
		{llm.FormatAnthropic, nil, []string{"Openai-Beta", "Anthropic-Beta"}},
		{llm.FormatGemini, nil, []string{"Openai-Beta", "Anthropic-Beta"}},
		{llm.FormatGemini, []string{"X-Goog-User-Project"}, []string{"X-Goog-User-Project", "Openai-Beta", "Anthropic-Beta"}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%v", tc.format, tc.forward), func(t *testing.T) {
			up := llmtest.NewFakeUpstream(t, proxy.Codecs[tc.format], upstreamKey, answer("hi"))
			p, err := proxy.New(proxy.Config{
				Providers: []proxy.Provider{{Name: "up", Type: string(tc.format), BaseURL: up.URL, APIKey: upstreamKey, ForwardHeaders: tc.forward}},
				Models:    []proxy.Model{{Name: "m", Provider: "up"}},
			})
			if err != nil {
				t.Fatal(err)
			}
			in := inbounds[tc.format]
			path, body := in.path, fmt.Sprintf(in.body, "m", false)
			if tc.format == llm.FormatGemini {
				path, body = fmt.Sprintf(in.path, "m"), in.body
			}
			r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
			for k, v := range sent {
				r.Header[k] = v
			}
			w := httptest.NewRecorder()
			p.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			var got []string
			for k := range sent {
				if v := up.Calls()[0].Header.Get(k); v != "" {
					if v != sent.Get(k) {
						t.Errorf("upstream got %s: %s, want %s", k, v, sent.Get(k))
					}
					got = append(got, k)
				}
			}
			if d := cmp.Diff(tc.want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); d != "" {
				t.Errorf("headers passed (-want +got):\n%s", d)
			}
		})
	}
}
