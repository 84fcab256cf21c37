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
