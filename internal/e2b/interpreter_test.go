package e2b

import (
	"strings"
	"testing"

	"github.com/agent2env/agent2env/internal/service"
)

// TestExecuteRefused: an /execute body that is not one execution request
// with its code (which the code interpreter's server requires) is a 4xx
// in plain text, and runs nothing, nor makes the default context.
func TestExecuteRefused(t *testing.T) {
	huge := `{"code":"` + strings.Repeat("a", service.MaxCodeBytes+maxBody) + `"}`
	tests := []struct {
		name, body, contentType string
		want                    int
		text                    string
	}{
		{"no code", `{"language":"python"}`, "application/json", 400, "code is required"},
		{"empty object", `{}`, "application/json", 400, "code is required"},
		{"empty body", "", "", 400, "code is required"},
		{"null code", `{"code":null}`, "application/json", 400, "code is required"},
		{"code of the wrong type", `{"code":1}`, "application/json", 400, "not valid JSON"},
		{"stray brace", `{"code":"x"}}`, "application/json", 400, "more than one JSON value"},
		{"two values", `{"code":"x"}{"code":"y"}`, "application/json", 400, "more than one JSON value"},
		{"not JSON", `code=x`, "application/x-www-form-urlencoded", 400, "application/json"},
		{"too big", huge, "application/json", 413, "too large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, running("sba", nil))
			headers := []string{HeaderSandboxID, "sba", HeaderSandboxPort, "49999", HeaderAccessToken, token}
			if tt.contentType != "" {
				headers = append(headers, "Content-Type", tt.contentType)
			}
			code, hdr, body := e.do(t, "POST", "/execute", tt.body, headers...)
			if code != tt.want || !strings.Contains(body, tt.text) || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") {
				t.Errorf("%d %s %s, want %d with %q in plain text", code, hdr.Get("Content-Type"), body, tt.want, tt.text)
			}
			if len(e.ctx.streams) != 0 || e.ctx.creates != 0 {
				t.Errorf("ran %v and made %d contexts, want nothing", e.ctx.streams, e.ctx.creates)
			}
		})
	}
}
