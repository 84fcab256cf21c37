package archive

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/llm/internal/redact"
	"github.com/agent2env/agent2env/internal/store"
)

// TestAppendHTTPMeta: the hand-written meta of a request or response
// reads back as the one encoding/json writes, credentials redacted.
func TestAppendHTTPMeta(t *testing.T) {
	for _, m := range []httpMeta{
		{},
		{Status: 200},
		{Method: "POST", URL: "http://up/v1/messages?beta=true"},
		{Method: "POST", URL: "/x", Status: 429, Header: http.Header{
			"Content-Type": {"application/json"}, "X-Api-Key": {"sk-secret"}, "authorization": {"Bearer k"},
			"X-Odd": {"quote \" back\\slash \n <tag> & \x01 \xff é \u2028"}, "X-Many": {"a", "b"}, "X-None": {}, "X-Nil": nil,
		}},
	} {
		got := appendHTTPMeta(nil, m.Method, m.URL, m.Status, m.Header)
		var back, want httpMeta
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%s: %v", got, err)
		}
		if err := json.Unmarshal(marshal(httpMeta{Method: m.Method, URL: m.URL, Status: m.Status, Header: redact.Header(m.Header)}), &want); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, back); d != "" {
			t.Errorf("%s (-encoding/json +ours):\n%s", got, d)
		}
	}
}

// TestExMetaRoundTrip: what the log keeps of an index record (and recovery
// reads back) is all of it but what the store or the indexer sets.
func TestExMetaRoundTrip(t *testing.T) {
	x := &store.LLMExchange{
		ID: "llx_1", SandboxID: "sb", RunID: "run", KeyID: "key", Tenant: "tenant-a", Inbound: "openai", Method: "POST",
		Path: "/v1/chat/completions", Model: "m", Provider: "p", UpstreamModel: "um", Stream: true, Passthrough: true,
		Status: 200, State: store.LLMComplete, Error: "e", InputTokens: 1, OutputTokens: 2, CachedTokens: 3,
		ReasoningTokens: 4, Attempts: 5, FirstByte: time.Millisecond, Duration: time.Second,
		CreatedAt: time.UnixMicro(1_700_000_000_000_000).UTC(), RequestBytes: 6, ResponseBytes: 7, StoredBytes: 8,
	}
	var m exMeta
	if err := json.Unmarshal(marshal(toMeta(x)), &m); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(x, m.exchange()); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// TestAppendExMeta: the hand-written meta of Begin and End records reads
// back as the one encoding/json writes (which escapes <, > and & too).
func TestAppendExMeta(t *testing.T) {
	full := store.LLMExchange{
		ID: "llx_1", SandboxID: "sb", RunID: "run", KeyID: "key", Tenant: "tenant-a", Inbound: "openai", Method: "POST",
		Path: "/v1beta/models/m:streamGenerateContent?alt=sse&key=[redacted]", Model: "m <&>", Provider: "p",
		UpstreamModel: "up \"quoted\" \u2028", Stream: true, Passthrough: true, Status: 200, State: store.LLMComplete,
		Error: "read: \x01 \xff é", InputTokens: 1, OutputTokens: 2, CachedTokens: 3, ReasoningTokens: 4, Attempts: 5,
		FirstByte: 1500 * time.Microsecond, Duration: -time.Second, CreatedAt: time.UnixMicro(1_700_000_000_123_456),
		RequestBytes: 6, ResponseBytes: 7, StoredBytes: 8,
	}
	for _, x := range []store.LLMExchange{{}, {ID: "llx_0", State: store.LLMInProgress}, full} {
		var back, want exMeta
		got := appendExMeta(nil, &x)
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%s: %v", got, err)
		}
		if err := json.Unmarshal(marshal(toMeta(&x)), &want); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, back); d != "" {
			t.Errorf("%s (-want +ours):\n%s", got, d)
		}
		for _, h := range []http.Header{nil, {}, {"Content-Type": {"application/json"}, "Authorization": {"Bearer k"}}} {
			var back, want beginMeta
			got := appendBeginMeta(nil, &x, h)
			if err := json.Unmarshal(got, &back); err != nil {
				t.Fatalf("%s: %v", got, err)
			}
			if err := json.Unmarshal(marshal(beginMeta{Exchange: toMeta(&x), Header: redact.Header(h)}), &want); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want, back); d != "" {
				t.Errorf("%s (-encoding/json +ours):\n%s", got, d)
			}
		}
	}
}
