package redact

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestURL: every sensitive parameter's value goes, however the query is
// written, and everything else is kept byte for byte.
func TestURL(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		// Issue 31: a malformed escape elsewhere made the whole query unparseable.
		{"/v1beta/models/m:generateContent?key=S3&x=%zz", "/v1beta/models/m:generateContent?key=[redacted]&x=%zz"},
		{"/v1/chat/completions", "/v1/chat/completions"},
		{"/v1/messages?beta=true", "/v1/messages?beta=true"},
		{"/v1beta/models/m:streamGenerateContent?alt=sse&key=S3", "/v1beta/models/m:streamGenerateContent?alt=sse&key=[redacted]"},
		{"?KEY=S3", "?KEY=[redacted]"},
		{"?x=1&Api_Key=S3&alt=sse", "?x=1&Api_Key=[redacted]&alt=sse"},
		{"?api-key=S3", "?api-key=[redacted]"},
		{"?apiKey=S3", "?apiKey=[redacted]"},
		{"?apikEY=S3", "?apikEY=[redacted]"},
		{"?access_token=S3&token=S4&id_token=S5", "?access_token=[redacted]&token=[redacted]&id_token=[redacted]"},
		{"?tOKEN=S3", "?tOKEN=[redacted]"},
		{"?Authorization=Bearer%20S3", "?Authorization=[redacted]"},
		{"?x-api-key=S3&X-Goog-Api-Key=S4", "?x-api-key=[redacted]&X-Goog-Api-Key=[redacted]"},
		{"?client_secret=S3&password=S4&passwd=S5&pwd=S6&pass=S7", "?client_secret=[redacted]&password=[redacted]&passwd=[redacted]&pwd=[redacted]&pass=[redacted]"},
		{"?sig=S3&X-Amz-Signature=S4&X-Amz-Security-Token=S5", "?sig=[redacted]&X-Amz-Signature=[redacted]&X-Amz-Security-Token=[redacted]"},
		// Names percent-encoded, once or more, '+' for a space, folded letters.
		{"?k%65y=S3", "?k%65y=[redacted]"},
		{"?%6B%45%59=S3", "?%6B%45%59=[redacted]"},
		{"?k%2565y=S3", "?k%2565y=[redacted]"},
		{"?api+key=S3", "?api+key=[redacted]"},
		{"?%E2%84%AAey=S3", "?%E2%84%AAey=[redacted]"},   // the Kelvin sign
		{"?ke%E2%80%8By=S3", "?ke%E2%80%8By=[redacted]"}, // a zero-width space
		{"?%20key%20=S3", "?%20key%20=[redacted]"},
		// Undecodable names are taken for sensitive ones; a bad value is kept.
		{"?ke%zzy=S3&x=%zz", "?ke%zzy=[redacted]&x=%zz"},
		{"?%=S3", "?%=[redacted]"},
		{"?k%25%25%25%25%25ey=S3", "?[redacted]"}, // it may hide an =: the pair goes whole
		// Separators: ';', a second '?', a fragment; a value runs to the next '&'.
		{"?alt=sse;key=S3", "?alt=sse;key=[redacted]"},
		{"?key=S3;alt=sse&x=1", "?key=[redacted]&x=1"},
		{"?x=1?key=S3", "?x=1?key=[redacted]"},
		{"?x=1#access_token=S3&state=z", "?x=1#access_token=[redacted]&state=z"},
		{"?key=S3#frag", "?key=[redacted]"},
		{"?key=a=b=S3&x", "?key=[redacted]&x"},
		// Repeated parameters.
		{"?key=S3&key=S4&key", "?key=[redacted]&key=[redacted]&key"},
		{"?key=&key=S4", "?key=[redacted]&key=[redacted]"},
		// key%3DS3: one decoding away from a pair.
		{"?key%3DS3&x=1", "?[redacted]&x=1"},
		{"?key%253DS3", "?[redacted]"},
		{"?x%3D1", "?x%3D1"},
		{"?a%3D1%26key%3DS3", "?[redacted]"},
		// Userinfo.
		{"https://user:S3@host/v1?x=1", "https://[redacted]@host/v1?x=1"},
		{"https://S3@host", "https://[redacted]@host"},
		{"https://a@S3@host/", "https://[redacted]@host/"},
		{"https://host/p@q?x=a@b", "https://host/p@q?x=a@b"},
		{"https://key=S3@host/?x=1", "https://key=[redacted]"}, // more than needed, never less
		{"?key=https://u:S3@h/p&x=1", "?key=[redacted]&x=1"},   // a URL in a sensitive value goes whole
		// Names that are not sensitive, and values that are not names.
		{"?max_tokens=5&x-ratelimit-remaining-tokens=6&beta=true&passthrough=1", "?max_tokens=5&x-ratelimit-remaining-tokens=6&beta=true&passthrough=1"},
		{"?x=key&y=token", "?x=key&y=token"},
		{"?key=[redacted]", "?key=[redacted]"},
		// Names in brackets; every '=' starts a value, and a value one
		// decoding away from pairs goes whole; a name that is one goes with
		// its value.
		{"?key[]=S3&key[0]=S4&data[api_key]=S5", "?key[]=[redacted]&key[0]=[redacted]&data[api_key]=[redacted]"},
		{"?x=1%26key=S3&y=2", "?x=1%26key=[redacted]&y=2"},
		{"?x=1%26key%3DS3&y=2", "?x=[redacted]&y=2"},
		{"?x=a=token=S3", "?x=a=token=[redacted]"},
		{"?key%3DS3=S4&y=2", "?[redacted]&y=2"},
		{"?x=a%3Db", "?x=a%3Db"},
		// A token's name that only starts like the rate limits' tokens.
		{"?token_sign=S3&api_token_s=S4&x-token-store=S5", "?token_sign=[redacted]&api_token_s=[redacted]&x-token-store=[redacted]"},
		// A network-path reference's userinfo.
		{"//user:S3@host/p?x=1", "//[redacted]@host/p?x=1"},
	} {
		if got := URL(tt.in); got != tt.want {
			t.Errorf("URL(%q)\n = %q\nwant %q", tt.in, got, tt.want)
		}
		if got := URL(URL(tt.in)); got != tt.want {
			t.Errorf("URL(URL(%q))\n = %q, want the same", tt.in, got)
		}
	}
}

// TestText: in an error's message a URL's sensitive values go too, up to
// the next space, and a message already redacted is left as it is.
func TestText(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`call provider up: Post "https://h/p?key=S3&x=%zz": dial tcp: lookup h: no such host`,
			`call provider up: Post "https://h/p?key=[redacted]&x=%zz": dial tcp: lookup h: no such host`},
		{`call provider up: Post "https://h/p?x=1&api_key=S3": dial tcp: refused`,
			`call provider up: Post "https://h/p?x=1&api_key=[redacted] dial tcp: refused`},
		{`call provider up: Post "https://h/p?key=[redacted]": EOF`, `call provider up: Post "https://h/p?key=[redacted]": EOF`},
		{`Post "https://u:S3@h/p": EOF`, `Post "https://[redacted]@h/p": EOF`},
		{`bad token=S3 and (password=S4), secret=S5`, `bad token=[redacted] and (password=[redacted] secret=[redacted]`},
		{`want x=1, got token=[redacted]S3`, `want x=1, got token=[redacted]`},
		{`model "m": no upstream answered within 1m0s`, `model "m": no upstream answered within 1m0s`},
		{`content-type: application/json; charset=utf-8`, `content-type: application/json; charset=utf-8`},
		// Brackets and quotes within names, and a value holding pairs.
		{`Post "https://h/p?key[]=S3&data[api_key]=S4": EOF`, `Post "https://h/p?key[]=[redacted]&data[api_key]=[redacted] EOF`},
		{`url="key=S3", "token"=S4, {'secret'}=S5`, `url="key=[redacted] "token"=[redacted] {'secret'}=[redacted]`},
		{`Post "https://h/p?x=1%26key=S3": EOF`, `Post "https://h/p?x=1%26key=[redacted] EOF`},
		{`ref //u:S3@h/p`, `ref //[redacted]@h/p`},
	} {
		if got := Text(tt.in); got != tt.want {
			t.Errorf("Text(%q)\n = %q\nwant %q", tt.in, got, tt.want)
		}
		if got := Text(Text(tt.in)); got != tt.want {
			t.Errorf("Text(Text(%q))\n = %q, want the same", tt.in, got)
		}
	}
}

// TestName: the names credentials go by, and names like them that carry
// none.
func TestName(t *testing.T) {
	for _, n := range []string{
		"key", "KEY", "api_key", "api-key", "apiKey", "x-api-key", "X-Goog-Api-Key", "Api-Key", "token", "access_token",
		"X-Auth-Token", "Authorization", "Proxy-Authorization", "secret", "Client-Secret", "password", "Passwd", "pwd", "pass",
		"pw", "sig", "X-Amz-Signature", "Cookie", "Set-Cookie", "k%65y", "k%2565y", "%zz", "tokenizer", "bearer", "jwt",
		"api+key", "\u212aey", "ke\u200by", "token_sign", "api_token_s", "x-token-store", "to-kens", "key[]", "data[api_key]",
	} {
		if !Name(n) {
			t.Errorf("Name(%q) = false, want true", n)
		}
	}
	for _, n := range []string{
		"", "alt", "beta", "Content-Type", "User-Agent", "Anthropic-Version", "Anthropic-Beta", "X-Ratelimit-Remaining-Tokens",
		"anthropic-ratelimit-input-tokens-limit", "max_tokens", "X-Request-Id", "Openai-Organization", "X-Goog-Api-Client",
		"Passthrough", "bypass", "signal", "x%3D1", "tokens", "max_tokens", "maxTokens", "tokens_used", "x-ratelimit-remaining-tokens[0]",
	} {
		if Name(n) {
			t.Errorf("Name(%q) = true, want false", n)
		}
	}
}

// TestHeader: sensitive headers and headers that are not headers lose
// their values; the others lose what Text takes.
func TestHeader(t *testing.T) {
	h := http.Header{
		"Content-Type":                 {"application/json; charset=utf-8"},
		"Authorization":                {"Bearer S3"},
		"Api-Key":                      {"S3"}, // Azure OpenAI's
		"X-Auth-Token":                 {"S3", "S4"},
		"Referer":                      {"https://h/p?key=S3"},
		"Origin":                       {"https://h/p?key[]=S3&x=%zz"},
		"X-Custom":                     {"a", "token=S3", "b"},
		"Bad Name":                     {"S3"},
		"X-Empty":                      {},
		"X-Nil":                        nil,
		"X-Ratelimit-Remaining-Tokens": {"100"},
	}
	want := http.Header{
		"Content-Type":                 {"application/json; charset=utf-8"},
		"Authorization":                {Redacted},
		"Api-Key":                      {Redacted},
		"X-Auth-Token":                 {Redacted},
		"Referer":                      {"https://h/p?key=[redacted]"},
		"Origin":                       {"https://h/p?key[]=[redacted]&x=%zz"},
		"X-Custom":                     {"a", "token=[redacted]", "b"},
		"Bad Name":                     {Redacted},
		"X-Empty":                      {},
		"X-Nil":                        nil,
		"X-Ratelimit-Remaining-Tokens": {"100"},
	}
	if d := cmp.Diff(want, Header(h)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if h.Get("Authorization") != "Bearer S3" || h["X-Custom"][1] != "token=S3" {
		t.Errorf("Header changed its argument: %v", h)
	}
}

// TestNoAllocs: what has nothing to redact costs no allocation.
func TestNoAllocs(t *testing.T) {
	vs := []string{"application/json; charset=utf-8"}
	if n := testing.AllocsPerRun(100, func() {
		_ = URL("/v1beta/models/m:streamGenerateContent?alt=sse")
		_ = Text("read: connection reset by peer")
		_ = Values("Content-Type", vs)
		_ = Values("X-Ratelimit-Remaining-Tokens", vs)
	}); n != 0 {
		t.Errorf("%v allocations, want 0", n)
	}
}

// BenchmarkHeader is the cost per request of an agent's usual header set
// and request URI, as the archive redacts them on the request's goroutine.
func BenchmarkHeader(b *testing.B) {
	h := http.Header{
		"Content-Type": {"application/json"}, "X-Api-Key": {"sk-placeholder"}, "Anthropic-Version": {"2023-06-01"},
		"Anthropic-Beta": {"claude-code-20250219,oauth-2025-04-20"}, "User-Agent": {"claude-cli/1.0.0 (external, cli)"},
		"X-Stainless-Lang": {"js"}, "X-Stainless-Retry-Count": {"0"}, "Accept": {"application/json"},
		"X-App": {"cli"}, "Anthropic-Dangerous-Direct-Browser-Access": {"true"},
	}
	b.ReportAllocs()
	for range b.N {
		for k, vs := range h {
			_ = Values(k, vs)
		}
		_ = URL("/v1/messages?beta=true")
	}
}
