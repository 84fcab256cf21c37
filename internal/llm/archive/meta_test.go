package archive

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
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
		if err := json.Unmarshal(marshal(httpMeta{Method: m.Method, URL: m.URL, Status: m.Status, Header: redact(m.Header)}), &want); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, back); d != "" {
			t.Errorf("%s (-encoding/json +ours):\n%s", got, d)
		}
	}
}
