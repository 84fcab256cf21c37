package archive

import (
	"slices"
	"testing"

	"github.com/agent2env/agent2env/internal/llm"
)

// TestHashesFollowConversations: a follow-up request's prefixes include
// the earlier request's hash, though the client moved its cache markers
// and wrote the same text as a string one turn and as a block the next;
// another conversation's does not.
func TestHashesFollowConversations(t *testing.T) {
	for _, tt := range []struct {
		f                    llm.Format
		first, follow, other string
	}{
		{llm.FormatAnthropic,
			`{"model":"m","max_tokens":9,"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]}`,
			`{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"bash","input":{"c":"ls"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"a b","cache_control":{"type":"ephemeral"}}]}]}`,
			`{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"hello"},{"role":"assistant","content":"x"},{"role":"user","content":"y"}]}`},
		{llm.FormatOpenAI,
			`{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]}`,
			`{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi"}]},{"role":"assistant","content":"yes"},{"role":"user","content":"more"}]}`,
			`{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"bye"},{"role":"assistant","content":"yes"}]}`},
		{llm.FormatResponses,
			`{"model":"m","input":[{"role":"user","content":"hi"}]}`,
			`{"model":"m","input":[{"role":"user","content":"hi"},{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"ok"}]}`,
			`{"model":"m","input":"hi"}`},
		{llm.FormatGemini,
			`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`,
			`{"contents":[{"role":"user","parts":[{"text":"hi"}]},{"role":"model","parts":[{"text":"yes"}]},{"role":"user","parts":[{"text":"more"}]}]}`,
			`{"contents":[{"role":"user","parts":[{"text":"hey"}]},{"role":"model","parts":[{"text":"yes"}]}]}`},
	} {
		t.Run(string(tt.f), func(t *testing.T) {
			h := newHasher()
			first, _, n := h.hashes(tt.f, []byte(tt.first))
			if first == "" || n == 0 {
				t.Fatalf("no hash of %s", tt.first)
			}
			for _, fresh := range []*hasher{h, newHasher()} { // remembered or not, the same
				_, prefixes, _ := fresh.hashes(tt.f, []byte(tt.follow))
				if !slices.Contains(prefixes, first) {
					t.Errorf("the follow-up's prefixes %v lack the first request's %s", prefixes, first)
				}
				_, others, _ := fresh.hashes(tt.f, []byte(tt.other))
				if slices.Contains(others, first) {
					t.Errorf("another conversation's prefixes hold the first request's hash")
				}
			}
		})
	}
	if h, p, n := newHasher().hashes(llm.FormatOpenAI, []byte(`{"model":"m"}`)); h != "" || p != nil || n != 0 {
		t.Errorf("a request without messages hashed: %q %v %d", h, p, n)
	}
}
