package proxy

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/llm"
)

// TestUsageMember: the codec reads from a whole answer's usage member
// alone the usage it reads from the whole answer, in every format.
func TestUsageMember(t *testing.T) {
	want := llm.Usage{InputTokens: 120, OutputTokens: 30, CachedTokens: 100, ReasoningTokens: 7}
	for f, c := range Codecs {
		t.Run(string(f), func(t *testing.T) {
			body, err := c.EncodeResponse(&llm.Request{Model: "m"}, &llm.Response{ID: "r", Model: "m",
				Content: []llm.Part{{Type: llm.PartText, Text: "hello"}}, Usage: want})
			if err != nil {
				t.Fatal(err)
			}
			whole, err := c.DecodeResponse(body)
			if err != nil {
				t.Fatal(err)
			}
			if whole.Usage.InputTokens == 0 {
				t.Fatalf("the codec reads no usage from %s", body)
			}
			small := usageMember(body)
			if small == nil {
				t.Fatalf("no usage member in %s", body)
			}
			part, err := c.DecodeResponse(small)
			if err != nil {
				t.Fatalf("decode %s: %v", small, err)
			}
			if d := cmp.Diff(whole.Usage, part.Usage); d != "" {
				t.Errorf("usage (-whole +from the member):\n%s", d)
			}
			if d := cmp.Diff(whole.Usage, usageOf(c, body)); d != "" {
				t.Errorf("usageOf (-whole +got):\n%s", d)
			}
		})
	}
}

// TestUsageOfOpenAI: a Chat Completions answer's usage read from its usage
// member alone is what decoding the whole answer reads, whatever the
// member holds.
func TestUsageOfOpenAI(t *testing.T) {
	c := Codecs[llm.FormatOpenAI]
	if _, ok := c.(llm.UsageDecoder); !ok {
		t.Fatal("the Chat Completions codec reads no usage member by itself")
	}
	for _, u := range []string{
		`{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30}`,
		`{"prompt_tokens":10,"completion_tokens":20,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":3}}`,
		`{"prompt_tokens":10,"completion_tokens":2,"prompt_cache_hit_tokens":6}`,
		`null`,
		`{}`,
		`{"prompt_tokens":1},"usage":{"prompt_tokens":2}`, // twice: the last counts
	} {
		body := []byte(`{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":` + u + `}`)
		whole, err := c.DecodeResponse(body)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if d := cmp.Diff(whole.Usage, usageOf(c, body)); d != "" {
			t.Errorf("%s: usage (-whole +usageOf):\n%s", u, d)
		}
	}
}

// BenchmarkUsageOf: reading a whole Chat Completions answer's usage.
func BenchmarkUsageOf(b *testing.B) {
	c := Codecs[llm.FormatOpenAI]
	body := []byte(`{"id":"c","object":"chat.completion","created":0,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"word word word word word word word word word word "},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30}}`)
	for b.Loop() {
		usageOf(c, body)
	}
}
