package proxy_test

import (
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

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/llmtest"
	"github.com/agent2env/agent2env/internal/llm/proxy"
)

// openAIStream is what OpenAI streams for a Chat Completions call: with
// stream_options.include_usage, "usage": null in every chunk and a last
// chunk of usage alone; without, neither.
func openAIStream(usage bool) string {
	null := ""
	if usage {
		null = `,"usage":null`
	}
	var b strings.Builder
	for _, p := range []struct{ text, finish string }{{"hel", "null"}, {"lo", "null"}, {"", `"stop"`}} {
		fmt.Fprintf(&b, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"real","choices":[{"index":0,"delta":{"content":"%s"},"finish_reason":%s}]%s}`+"\n\n", p.text, p.finish, null)
	}
	if usage {
		b.WriteString(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"real","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}` + "\n\n")
	}
	b.WriteString("data: [DONE]\n\n")
	return b.String()
}

// TestChatStreamUsage: a Chat Completions stream passed through is always
// asked for its usage, and charged it; the client sees the stream it asked
// for, with the usage chunk and the "usage": null members only if it asked.
func TestChatStreamUsage(t *testing.T) {
	var mu sync.Mutex
	var sent []byte // the last request the upstream got
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		sent = body
		mu.Unlock()
		var req struct {
			StreamOptions *struct {
				IncludeUsage bool `json:"include_usage"`
			} `json:"stream_options"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, openAIStream(req.StreamOptions != nil && req.StreamOptions.IncludeUsage))
	}))
	defer up.Close()
	base, x := serve(t, proxy.Config{
		Providers: []proxy.Provider{{Name: "up", Type: "openai", BaseURL: up.URL}},
		Models:    []proxy.Model{{Name: "m", Provider: "up", Model: "real"}},
	})
	tests := []struct {
		name, options string // the client's stream_options member
		asked         bool
		upstream      string // what the upstream is sent
	}{
		{"none", ``, false, `{"model":"real","stream":true,"stream_options":{"include_usage":true}}`},
		{"null", `,"stream_options":null`, false, `{"model":"real","stream":true,"stream_options":{"include_usage":true}}`},
		{"false", `,"stream_options":{"include_usage":false,"x":1}`, false, `{"model":"real","stream":true,"stream_options":{"include_usage":true,"x":1}}`},
		{"asked", `,"stream_options":{"include_usage":true}`, true, `{"model":"real","stream":true,"stream_options":{"include_usage":true}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(base+"/v1/chat/completions", "application/json",
				strings.NewReader(`{"model":"m","stream":true`+tc.options+`}`))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if want := openAIStream(tc.asked); string(got) != want {
				t.Errorf("client got\n%s\nwant\n%s", got, want)
			}
			mu.Lock()
			defer mu.Unlock()
			if string(sent) != tc.upstream {
				t.Errorf("upstream got %s, want %s", sent, tc.upstream)
			}
			if ex := x.last(t); ex.Usage != (llm.Usage{InputTokens: 7, OutputTokens: 3}) || ex.UsageEstimated {
				t.Errorf("charged %+v (estimated: %v), want the upstream's count", ex.Usage, ex.UsageEstimated)
			}
		})
	}
}

// TestUsageEstimated: an upstream that counts nothing (an OpenAI-compatible
// server, a count of zeros), in any format, streaming or not, passed
// through or translated, has its calls charged an estimate: the request's
// text and the answer's, four bytes a token.
func TestUsageEstimated(t *testing.T) {
	uncounted := func(*llm.Request) (*llm.Response, *llm.Error) {
		return &llm.Response{ID: "r1", Model: "real-model", Content: []llm.Part{llm.Text("twelve bytes")}, StopReason: llm.StopEndTurn}, nil
	}
	for f, c := range proxy.Codecs {
		other := llm.FormatOpenAI
		if f == llm.FormatOpenAI {
			other = llm.FormatGemini
		}
		for _, client := range []llm.Format{f, other} {
			for _, stream := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/client-%s/stream=%v", f, client, stream), func(t *testing.T) {
					up := llmtest.NewFakeUpstream(t, c, upstreamKey, uncounted)
					base, x := serve(t, proxy.Config{
						Providers: []proxy.Provider{{Name: "up", Type: string(f), BaseURL: up.URL, APIKey: upstreamKey}},
						Models:    []proxy.Model{{Name: "alias", Provider: "up", Model: "real-model"}},
					})
					if resp, _, got := post(t, base, client, "alias", stream); resp.StatusCode != http.StatusOK {
						t.Fatalf("status %d: %s", resp.StatusCode, got)
					}
					ex := x.last(t)
					if !ex.UsageEstimated || ex.Usage.InputTokens <= 0 || ex.Usage.OutputTokens != 3 {
						t.Errorf("charged %+v (estimated: %v), want an estimate: the input's, and 3 output tokens", ex.Usage, ex.UsageEstimated)
					}
				})
			}
		}
	}
}

// TestBackgroundResponsesRefused: a background response runs upstream
// after its call returned, out of the proxy's sight: passed through it
// would cost what no budget counts. Translated, it is an ordinary call.
func TestBackgroundResponsesRefused(t *testing.T) {
	body := `{"model":"m","input":"hi","background":true}`
	for _, f := range []llm.Format{llm.FormatResponses, llm.FormatOpenAI} {
		up := llmtest.NewFakeUpstream(t, proxy.Codecs[f], "", answer("hi"))
		base, _ := serve(t, proxy.Config{
			Providers: []proxy.Provider{{Name: "up", Type: string(f), BaseURL: up.URL}},
			Models:    []proxy.Model{{Name: "m", Provider: "up"}},
		})
		resp, err := http.Post(base+"/v1/responses", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want, calls := http.StatusBadRequest, 0
		if f != llm.FormatResponses {
			want, calls = http.StatusOK, 1
		}
		if resp.StatusCode != want || len(up.Calls()) != calls {
			t.Errorf("upstream %s: %d %s, %d upstream calls; want %d, %d", f, resp.StatusCode, got, len(up.Calls()), want, calls)
		}
	}
}

// TestOneExchangePerCall: a call an attempt failed is observed once (it
// was twice: by the failure, and by the end of the attempts).
func TestOneExchangePerCall(t *testing.T) {
	up := llmtest.NewFakeUpstream(t, proxy.Codecs[llm.FormatAnthropic], "", answer("hi"))
	base, x := serve(t, proxy.Config{
		Providers: []proxy.Provider{{Name: "up", Type: "anthropic", BaseURL: up.URL}},
		Models:    []proxy.Model{{Name: "m", Provider: "up"}},
	})
	resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","messages":7}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	x.mu.Lock()
	defer x.mu.Unlock()
	if resp.StatusCode != http.StatusBadRequest || len(x.all) != 1 {
		t.Errorf("status %d, %d exchanges observed; want 400, 1", resp.StatusCode, len(x.all))
	}
}

// TestClientLeavesWholeCall: an upstream answers, and bills, a whole call
// it was sent even if its client left: the proxy reads the answer to its
// end and charges it (it canceled the call, and charged nothing).
func TestClientLeavesWholeCall(t *testing.T) {
	for _, f := range []llm.Format{llm.FormatOpenAI, llm.FormatAnthropic} { // pass-through, then translated
		t.Run(string(f), func(t *testing.T) {
			up := llmtest.NewFakeUpstream(t, proxy.Codecs[llm.FormatOpenAI], "", func(r *llm.Request) (*llm.Response, *llm.Error) {
				time.Sleep(300 * time.Millisecond)
				return answer("late")(r)
			})
			base, x := serve(t, proxy.Config{
				Providers: []proxy.Provider{{Name: "up", Type: "openai", BaseURL: up.URL}},
				Models:    []proxy.Model{{Name: "m", Provider: "up"}},
			})
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			in := inbounds[f]
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+in.path, strings.NewReader(fmt.Sprintf(in.body, "m", false)))
			in.auth(req.Header)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
				t.Fatalf("the client got an answer (%d) before it left", resp.StatusCode)
			}
			if ex := x.wait(t); !ex.ClientGone || ex.Usage != (llm.Usage{InputTokens: 7, OutputTokens: 3}) || ex.UsageEstimated {
				t.Errorf("exchange %+v: want the client gone and the upstream's count charged", ex)
			}
		})
	}
}

// TestStreamNotBoolean: a stream that is no JSON boolean ("true", 1) is
// refused with a 400 in the client's format, never sent on: an upstream
// that reads it as true would stream what the proxy took for a whole
// answer, and could not meter.
func TestStreamNotBoolean(t *testing.T) {
	for _, f := range []llm.Format{llm.FormatOpenAI, llm.FormatResponses, llm.FormatAnthropic} {
		up := llmtest.NewFakeUpstream(t, proxy.Codecs[f], "", answer("hi"))
		base, _ := serve(t, proxy.Config{
			Providers: []proxy.Provider{{Name: "up", Type: string(f), BaseURL: up.URL}},
			Models:    []proxy.Model{{Name: "m", Provider: "up"}},
		})
		for _, stream := range []string{`"true"`, `1`, `{}`} {
			t.Run(fmt.Sprintf("%s/%s", f, stream), func(t *testing.T) {
				body := strings.Replace(fmt.Sprintf(inbounds[f].body, "m", false), `"stream":false`, `"stream":`+stream, 1)
				body = strings.Replace(body, `"stream": false`, `"stream":`+stream, 1)
				resp, err := http.Post(base+strings.TrimSuffix(inbounds[f].path, "?beta=true"), "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				e := proxy.Codecs[f].DecodeError(resp.StatusCode, got)
				if resp.StatusCode != http.StatusBadRequest || !strings.Contains(e.Message, "stream must be true or false") {
					t.Errorf("answer %d %s; want a 400 in the client's format about stream", resp.StatusCode, got)
				}
			})
		}
		if n := len(up.Calls()); n != 0 {
			t.Errorf("%s: %d calls went upstream", f, n)
		}
	}
}

// TestUndecodableAnswerEstimated: a whole answer of which nothing decodes
// (an upstream that streamed it, and counted nothing the proxy can read)
// is charged its bytes as output, four a token, as a body only the
// upstream reads is charged as input.
func TestUndecodableAnswerEstimated(t *testing.T) {
	const size = 4000
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, strings.Repeat("x", size))
	}))
	t.Cleanup(up.Close)
	base, x := serve(t, proxy.Config{
		Providers: []proxy.Provider{{Name: "up", Type: "openai", BaseURL: up.URL + "/v1"}},
		Models:    []proxy.Model{{Name: "m", Provider: "up"}},
	})
	if resp, _, got := post(t, base, llm.FormatOpenAI, "m", false); resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, got)
	}
	if ex := x.last(t); ex.Usage.OutputTokens != size/llm.BytesPerToken || !ex.UsageEstimated {
		t.Errorf("charged %+v (estimated %v), want %d output tokens, estimated", ex.Usage, ex.UsageEstimated, size/llm.BytesPerToken)
	}
}

// TestEstimateReadsEveryNumber: the output a call asks for at most counts
// in its estimate whichever way JSON writes the number (100, 100.0, 1e2),
// in every format's member for it; one that sets none, or no positive
// number, is estimated at DefaultOutputEstimate. (100.0 was estimated at
// the default, so a client asking for more than it passed its budget.)
func TestEstimateReadsEveryNumber(t *testing.T) {
	const body = `{"model":"m","messages":[{"role":"user","content":"hi"}]`
	in := func(b string) int64 { return int64(len(b)+llm.BytesPerToken-1) / llm.BytesPerToken }
	for _, tc := range []struct {
		name, path, body string
		out              int64
	}{
		{"integer", "/v1/chat/completions", body + `,"max_tokens":100000}`, 100000},
		{"float", "/v1/chat/completions", body + `,"max_tokens":100000.0}`, 100000},
		{"exponent", "/v1/chat/completions", body + `,"max_completion_tokens":1e5}`, 100000},
		{"fraction", "/v1/chat/completions", body + `,"max_tokens":99999.5}`, 100000},
		{"none", "/v1/chat/completions", body + `}`, proxy.DefaultOutputEstimate},
		{"negative", "/v1/chat/completions", body + `,"max_tokens":-5}`, proxy.DefaultOutputEstimate},
		{"a string", "/v1/chat/completions", body + `,"max_tokens":"100000"}`, proxy.DefaultOutputEstimate},
		{"anthropic float", "/v1/messages", body + `,"max_tokens":2048.0}`, 2048},
		{"gemini float", "/v1beta/models/m:generateContent", `{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":3e3}}`, 3000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got int64 = -1
			p, err := proxy.New(proxy.Config{
				Providers: []proxy.Provider{{Name: "up", Type: "openai", BaseURL: "http://127.0.0.1:1"}},
				Models:    []proxy.Model{{Name: "m", Provider: "up"}},
			}, proxy.WithAdmitter(func(_ context.Context, _ *proxy.Exchange, estimate int64) *llm.Error {
				got = estimate
				return llm.Invalid("refused by the test")
			}))
			if err != nil {
				t.Fatal(err)
			}
			w := httptest.NewRecorder()
			p.ServeHTTP(w, httptest.NewRequest(http.MethodPost, tc.path, strings.NewReader(tc.body)))
			if want := in(tc.body) + tc.out; got != want {
				t.Errorf("estimate %d, want %d (answer %d %s)", got, want, w.Code, w.Body)
			}
		})
	}
}
