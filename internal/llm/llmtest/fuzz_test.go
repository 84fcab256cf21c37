package llmtest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/anthropic"
	"github.com/agent2env/agent2env/internal/llm/gemini"
	"github.com/agent2env/agent2env/internal/llm/llmtest"
	"github.com/agent2env/agent2env/internal/llm/openai"
	"github.com/agent2env/agent2env/internal/llm/responses"
)

var codecs = []llm.Codec{openai.Codec{}, responses.Codec{}, anthropic.Codec{}, gemini.Codec{}}

// seedRequests adds every case encoded by c, the codec's samples and the
// known bad bodies.
func seedRequests(f *testing.F, c llm.Codec) {
	for _, tc := range llmtest.Cases() {
		req := llmtest.CloneRequest(tc.Request)
		llmtest.PrepareRequest(c.Format(), req)
		b, _ := c.EncodeRequest(req)
		f.Add(b)
	}
	files, _ := filepath.Glob(filepath.Join("..", string(pkgDir(c)), "testdata", "*.json"))
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	for _, b := range llmtest.BadRequests {
		f.Add([]byte(b))
	}
}

func pkgDir(c llm.Codec) string {
	if c.Format() == llm.FormatResponses {
		return "responses"
	}
	return string(c.Format())
}

// fuzzRequest: a client's body never panics a decoder; bad ones are 4xx
// errors in the client's format; good ones can be written for every
// upstream format as valid JSON (the translators), and read back by their
// own format.
func fuzzRequest(f *testing.F, c llm.Codec) {
	seedRequests(f, c)
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := c.DecodeRequest(body)
		if err != nil {
			llmtest.CheckClientError(t, c, string(body), err)
			return
		}
		if req.Model == "" {
			req.Model = "m"
		}
		for _, out := range codecs {
			b, err := out.EncodeRequest(req)
			if err != nil {
				t.Fatalf("%s encode: %v", out.Format(), err)
			}
			if !json.Valid(b) {
				t.Fatalf("%s wrote invalid JSON for %q:\n%s", out.Format(), body, b)
			}
			if _, err := out.DecodeRequest(b); err != nil {
				t.Fatalf("%s cannot read its own request %s (from %q): %v", out.Format(), b, body, err)
			}
		}
		if tc, ok := c.(llm.TokenCounter); ok {
			if _, err := tc.DecodeCountRequest(body); err != nil {
				llmtest.CheckClientError(t, c, string(body), err)
			}
		}
	})
}

func FuzzOpenAIRequest(f *testing.F)    { fuzzRequest(f, openai.Codec{}) }
func FuzzResponsesRequest(f *testing.F) { fuzzRequest(f, responses.Codec{}) }
func FuzzAnthropicRequest(f *testing.F) { fuzzRequest(f, anthropic.Codec{}) }
func FuzzGeminiRequest(f *testing.F)    { fuzzRequest(f, gemini.Codec{}) }

// fuzzStream: an upstream's stream never panics a decoder; it ends in an
// upstream error or in events that every client format can be sent, each
// SSE event carrying JSON.
func fuzzStream(f *testing.F, c llm.Codec) {
	for _, tc := range llmtest.Cases() {
		req := llmtest.CloneRequest(tc.Request)
		req.StreamUsage = true
		resp := llmtest.CloneResponse(tc.Response)
		llmtest.Prepare(c.Format(), resp.Content)
		f.Add(llmtest.EncodeStream(f, c, req, llm.ResponseEvents(resp, 4)))
	}
	if b, err := os.ReadFile(filepath.Join("..", pkgDir(c), "testdata", "upstream-stream.txt")); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		evs, err := llmtest.DecodeStream(c, bytes.NewReader(stream))
		if err != nil {
			var e *llm.Error
			if !errors.As(err, &e) || e.Kind != llm.ErrorUpstream {
				t.Fatalf("decode error %v is not an upstream *llm.Error", err)
			}
		}
		for _, out := range codecs {
			var buf bytes.Buffer
			enc := out.NewStreamEncoder(llm.NewSSEWriter(&buf), &llm.Request{StreamUsage: true})
			_, _ = llm.Pump(&llm.SliceDecoder{Events: evs}, enc, nil)
			src := llm.NewSSEReader(&buf)
			for {
				ev, err := src.Next()
				if err != nil {
					break
				}
				if len(ev.Data) > 0 && string(ev.Data) != "[DONE]" && !json.Valid(ev.Data) {
					t.Fatalf("%s wrote an event that is not JSON: %s", out.Format(), ev.Data)
				}
			}
		}
	})
}

func FuzzOpenAIStream(f *testing.F)    { fuzzStream(f, openai.Codec{}) }
func FuzzResponsesStream(f *testing.F) { fuzzStream(f, responses.Codec{}) }
func FuzzAnthropicStream(f *testing.F) { fuzzStream(f, anthropic.Codec{}) }
func FuzzGeminiStream(f *testing.F)    { fuzzStream(f, gemini.Codec{}) }
