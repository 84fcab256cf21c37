package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
)

// writeJSONText writes exactly what writeJSON writes.
func TestWriteJSONText(t *testing.T) {
	// A character cut by every chunk boundary in turn, and text that
	// escaping makes six times longer.
	long := strings.Repeat("a", textChunk-1) + "é" + strings.Repeat("b", textChunk-2) + "🎉" + strings.Repeat("<&>", textChunk)
	texts := []string{
		"", "plain", "quote \" backslash \\ slash /", "\n\r\t\b\f\x00\x1f\x7f",
		"<script>&amp;</script>", "\u2028\u2029", "héllo 世界 🎉",
		"bad \xff utf-8 \xe2\x82 and \xc3", long, long[1:], long[2:], long[3:],
		strings.Repeat("\xff", textChunk+3),
	}
	for i, text := range texts {
		other := texts[len(texts)-1-i]
		resp := api.ExecResponse{ExitCode: 3, Stdout: text, Stderr: other, Truncated: true, DurationMS: 1.5,
			Reason: "tricky \"" + textHole + "0\""}
		want := httptest.NewRecorder()
		writeJSON(want, http.StatusOK, resp)
		got := httptest.NewRecorder()
		writeJSONText(got, http.StatusOK, &resp, &resp.Stdout, &resp.Stderr)
		if got.Body.String() != want.Body.String() {
			t.Errorf("text %d: bodies differ:\n%s", i, cmp.Diff(want.Body.String(), got.Body.String()))
		}
		if got.Code != want.Code || got.Header().Get("Content-Type") != "application/json" {
			t.Errorf("text %d: status %d, content type %q", i, got.Code, got.Header().Get("Content-Type"))
		}
		if resp.Stdout != text || resp.Stderr != other {
			t.Errorf("text %d: the response's fields were not restored", i)
		}
	}
}

// writeExecJSON writes what writeJSON writes of the response with its
// output encoded by api.EncodeOutput.
func TestWriteExecJSON(t *testing.T) {
	long := strings.Repeat("\xff\x00é", textChunk)
	for i, text := range []string{"", "a", "ab", "abc", "bad \xff utf-8", long, long[1:], long[2:]} {
		for _, enc := range []string{"", api.OutputText, api.OutputBase64} {
			other := strings.Repeat(text, 2)
			resp := api.ExecResponse{ExitCode: 1, Stdout: text, Stderr: other, DurationMS: 2}
			encoded := resp
			encoded.Stdout, encoded.Encoding = api.EncodeOutput(text, enc)
			encoded.Stderr, _ = api.EncodeOutput(other, enc)
			want := httptest.NewRecorder()
			writeJSON(want, http.StatusOK, encoded)
			got := httptest.NewRecorder()
			writeExecJSON(got, &resp, &resp, enc)
			if got.Body.String() != want.Body.String() {
				t.Errorf("text %d, encoding %q: bodies differ:\n%s", i, enc, cmp.Diff(want.Body.String(), got.Body.String()))
			}
		}
	}
}
