package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/manager"
)

// binaryOutput is output that is not UTF-8: every byte value, then
// invalid sequences (a lone continuation byte, a cut character, an
// overlong NUL, a surrogate, a byte past U+10FFFF), and a command that
// writes it to stdout and stderr.
func binaryOutput() (out string, command []string) {
	b := make([]byte, 0, 300)
	for i := range 256 {
		b = append(b, byte(i))
	}
	out = string(b) + "\x80 \xe2\x82 \xc0\x80 \xed\xa0\x80 \xf5\x80\x80\x80 \xe2\x82\xac"
	script := fmt.Sprintf("printf %%s %s | base64 -d > /tmp/out.$$; cat /tmp/out.$$; cat /tmp/out.$$ >&2; rm /tmp/out.$$",
		base64.StdEncoding.EncodeToString([]byte(out)))
	return out, []string{"sh", "-c", script}
}

// TestExecOutputEncoding runs a command whose output is not UTF-8 through
// exec, exec/stream and sessions/command: with "output_encoding":
// "base64" each gives its exact bytes, marked "encoding": "base64"; without
// it the wire is LiteBoxd's, valid UTF-8 and unmarked.
func TestExecOutputEncoding(t *testing.T) {
	out, command := binaryOutput()
	e := newEnv(t, envOptions{})
	id := e.createSandbox(t, `{"image":"alpine"}`).ID
	sessions, _ := newSessionHandler(t, manager.Config{})
	body := func(extra string) string {
		b, _ := json.Marshal(command)
		return `{"command":` + string(b) + extra + `}`
	}
	post := map[string]func(path, body string) response{
		"exec": func(path, body string) response { return e.postJSON(t, path, body) },
		"sessions/command": func(path, body string) response {
			req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			sessions.ServeHTTP(rec, req)
			return response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
		},
	}
	paths := map[string]string{"exec": "/api/v1/sandboxes/" + id + "/exec", "sessions/command": "/api/v1/sessions/command"}
	for name, post := range post {
		t.Run(name, func(t *testing.T) {
			resp := post(paths[name], body(`,"output_encoding":"base64"`))
			var res api.ExecResponse
			if err := json.Unmarshal(resp.body, &res); err != nil || resp.status != http.StatusOK {
				t.Fatalf("base64: %d %s: %v", resp.status, resp.body, err)
			}
			if res.Encoding != api.OutputBase64 || res.ExitCode != 0 {
				t.Errorf("base64: encoding %q, exit code %d", res.Encoding, res.ExitCode)
			}
			for stream, got := range map[string]string{"stdout": res.Stdout, "stderr": res.Stderr} {
				if b, err := base64.StdEncoding.DecodeString(got); err != nil || string(b) != out {
					t.Errorf("base64 %s %q decodes to %q (%v), want %q", stream, got, b, err, out)
				}
			}

			for _, extra := range []string{"", `,"output_encoding":"utf-8"`} {
				resp = post(paths[name], body(extra))
				var text map[string]any
				if err := json.Unmarshal(resp.body, &text); err != nil || resp.status != http.StatusOK {
					t.Fatalf("text%s: %d %s: %v", extra, resp.status, resp.body, err)
				}
				if _, ok := text["encoding"]; ok {
					t.Errorf("text%s: marked %v", extra, text["encoding"])
				}
				if s, _ := text["stdout"].(string); !utf8.ValidString(s) || !strings.Contains(s, "\uFFFD") ||
					!strings.HasSuffix(s, "\u20ac") {
					t.Errorf("text%s stdout %q: want UTF-8 with replacements", extra, s)
				}
			}

			resp = post(paths[name], body(`,"output_encoding":"binary"`))
			if resp.status != http.StatusBadRequest || !strings.Contains(string(resp.body), "output_encoding") {
				t.Errorf("unknown encoding: %d %s", resp.status, resp.body)
			}
		})
	}

	t.Run("exec/stream", func(t *testing.T) {
		for _, encoding := range []string{api.OutputBase64, ""} {
			resp := e.postJSON(t, "/api/v1/sandboxes/"+id+"/exec/stream", body(`,"output_encoding":"`+encoding+`"`))
			if resp.status != http.StatusOK {
				t.Fatalf("stream %q: %d %s", encoding, resp.status, resp.body)
			}
			events := readEvents(t, resp.body)
			output := map[string]string{}
			for _, ev := range events {
				if ev.name == "exit" {
					checkKeys(t, "exit event", []byte(ev.data), "type", "duration_ms")
					continue
				}
				var ee api.ExecEvent
				if err := json.Unmarshal([]byte(ev.data), &ee); err != nil {
					t.Fatalf("event %s %s: %v", ev.name, ev.data, err)
				}
				if encoding == "" {
					checkKeys(t, ev.name+" event", []byte(ev.data), "type", "data")
					output[ev.name] += ee.Data
					continue
				}
				checkKeys(t, ev.name+" event", []byte(ev.data), "type", "data", "encoding")
				b, err := base64.StdEncoding.DecodeString(ee.Data)
				if err != nil || ee.Encoding != api.OutputBase64 {
					t.Errorf("event %s: encoding %q: %v", ev.data, ee.Encoding, err)
				}
				output[ev.name] += string(b)
			}
			for _, stream := range []string{"stdout", "stderr"} {
				got := output[stream]
				if encoding != "" && got != out {
					t.Errorf("base64 %s: %q, want %q", stream, got, out)
				}
				if encoding == "" && (!utf8.ValidString(got) || !strings.Contains(got, "\uFFFD")) {
					t.Errorf("text %s %q: want UTF-8 with replacements", stream, got)
				}
			}
		}
	})
}
