package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
)

// evil is what a sandbox can put in any text the daemon passes on: window
// title (OSC 0), clipboard (OSC 52), erase line and return, CSI as a raw
// byte (not UTF-8) and as the C1 rune, a bidi override and isolate, DEL
// and backspace.
const evil = "pwned\x1b]0;title\x07 \x1b]52;c;aGk=\x07 \x1b[2K\r \x9b31m \u009b31m \u202eevil\u2066 \x7f\x08 a\tb\nc"

// evilJSON is evil as it comes out of JSON: the byte that is not UTF-8
// replaced.
var evilJSON = strings.ToValidUTF8(evil, "\ufffd")

// leaks returns what in out a terminal would act on rather than show.
func leaks(out string) []string {
	var found []string
	if !utf8.ValidString(out) {
		found = append(found, "bytes that are not UTF-8")
	}
	for _, c := range []string{"\x1b", "\x07", "\x08", "\x7f", "\u009b", "\u202e", "\u2066"} {
		if strings.Contains(out, c) {
			found = append(found, fmt.Sprintf("%+q", c))
		}
	}
	if strings.Contains(strings.ReplaceAll(out, "\r\n", ""), "\r") {
		found = append(found, `a CR without LF`)
	}
	return found
}

func TestAppendVisible(t *testing.T) {
	for _, tt := range []struct {
		in                  string
		text, field, quoted string
	}{
		{in: "plain text, üñí 世界 \\x1b", text: "plain text, üñí 世界 \\x1b", field: "plain text, üñí 世界 \\x1b", quoted: "plain text, üñí 世界 \\x1b"},
		{in: "\x1b]0;pwned\x07", text: `\x1b]0;pwned\a`, field: `\x1b]0;pwned\a`, quoted: `\u001b]0;pwned\u0007`},
		{in: "\x1b]52;c;aGk=\x07", text: `\x1b]52;c;aGk=\a`, field: `\x1b]52;c;aGk=\a`, quoted: `\u001b]52;c;aGk=\u0007`},
		{in: "\x1b[2K\r", text: `\x1b[2K\r`, field: `\x1b[2K\r`, quoted: `\u001b[2K\u000d`},
		{in: "a\r\nb\tc\n", text: "a\r\nb\tc\n", field: `a\r\nb\tc\n`, quoted: "a\r\nb\tc\n"},
		{in: "\x9b31m", text: `\x9b31m`, field: `\x9b31m`, quoted: `\ufffd31m`},
		{in: "\u009b31m \u0085", text: `\u009b31m \u0085`, field: `\u009b31m \u0085`, quoted: `\u009b31m \u0085`},
		{in: "\u202eevil\u202c \u2066x\u2069", text: `\u202eevil\u202c \u2066x\u2069`, field: `\u202eevil\u202c \u2066x\u2069`, quoted: `\u202eevil\u202c \u2066x\u2069`},
		{in: "\x7f\x08\x00\x0c", text: `\x7f\b\x00\f`, field: `\x7f\b\x00\f`, quoted: `\u007f\u0008\u0000\u000c`},
		{in: "cut \xe2\x82", text: `cut \xe2\x82`, field: `cut \xe2\x82`, quoted: `cut \ufffd\ufffd`},
	} {
		for _, m := range []struct {
			how  escaping
			want string
		}{{asText, tt.text}, {asField, tt.field}, {asQuoted, tt.quoted}} {
			if got := string(appendVisible(nil, []byte(tt.in), m.how)); got != m.want {
				t.Errorf("appendVisible(%+q, %d) = %+q, want %+q", tt.in, m.how, got, m.want)
			}
		}
	}
}

// A stream cut anywhere, even inside a rune or a CRLF, is written as the
// whole would be; the end of a stream ends what it left open.
func TestVisibleWriter(t *testing.T) {
	in := "ok \r\n世界 " + evil + " \xe4\xb8"
	want := visible(in)
	for _, size := range []int{1, 2, 3, 5, 7} {
		var b bytes.Buffer
		w := &visibleWriter{w: &b}
		for s := in; s != ""; {
			n := min(size, len(s))
			if n2, err := w.Write([]byte(s[:n])); n2 != n || err != nil {
				t.Fatalf("Write = %d, %v", n2, err)
			}
			s = s[n:]
		}
		w.Flush()
		if b.String() != want {
			t.Errorf("in writes of %d bytes: %+q, want %+q", size, b.String(), want)
		}
	}
	// What raw takes next comes after what was held back.
	var b bytes.Buffer
	w := &visibleWriter{w: &b}
	w.Write([]byte("a\r"))
	raw(w).Write([]byte("\x1b[J"))
	if b.String() != "a\\r\x1b[J" {
		t.Errorf("raw after a held CR: %+q", b.String())
	}
}

// poison sets every string v holds, through structs, pointers, slices,
// maps and interfaces, to evil, and every number to 1: whatever a command
// prints of it is the daemon's text.
func poison(v reflect.Value, depth int) {
	if depth > 8 {
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(evil)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(1)
	case reflect.Float64:
		v.SetFloat(1)
	case reflect.Interface:
		v.Set(reflect.ValueOf(evil))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		poison(v.Elem(), depth+1)
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() {
				poison(f, depth+1)
			}
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		poison(s.Index(0), depth+1)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		poison(k, depth+1)
		poison(e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	}
}

// poisoned returns a T with evil in every field; fix then sets what the
// command's logic needs (a final status, no next page).
func poisoned[T any](fix ...func(*T)) *T {
	var v T
	poison(reflect.ValueOf(&v).Elem(), 0)
	for _, f := range fix {
		f(&v)
	}
	return &v
}

// newEvilDaemon serves every read of the API with evil in every field of
// its answer, and the streams of output with evil in their bytes.
func newEvilDaemon(t *testing.T) {
	mux := http.NewServeMux()
	ok := func(path string, v func(r *http.Request) any) {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) { reply(w, http.StatusOK, v(r)) })
	}
	val := func(v any) func(*http.Request) any { return func(*http.Request) any { return v } }
	bytesOf := func(path string) {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(evil)) })
	}
	final := func(r *api.Run) { r.Status = api.RunSucceeded }
	noPage := func(l *api.LLMExchangeList) { l.NextCursor = "" }

	ok("GET /api/v1/sandboxes", val(poisoned[api.List[api.Sandbox]]()))
	ok("GET /api/v1/sandboxes/{id}", val(poisoned[api.Sandbox]()))
	mux.HandleFunc("POST /api/v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusCreated, poisoned[api.Sandbox]())
	})
	mux.HandleFunc("DELETE /api/v1/sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusNotFound, poisoned[api.Error]())
	})
	mux.HandleFunc("POST /api/v1/sandboxes/{id}/start", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusConflict, poisoned[api.Error]())
	})
	ok("GET /api/v1/sandboxes/{id}/logs", val(poisoned[api.LogsResponse]()))
	mux.HandleFunc("POST /api/v1/sandboxes/{id}/exec/stream", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		sse(w, "stdout", api.ExecEvent{Type: "stdout", Data: evil})
		sse(w, "stderr", api.ExecEvent{Type: "stderr", Data: evil})
		sse(w, "exit", api.ExecEvent{Type: "exit"})
	})
	bytesOf("GET /api/v1/sandboxes/{id}/files")

	ok("GET /api/v1/templates", val(poisoned[api.TemplateList]()))
	ok("GET /api/v1/templates/{name}", val(poisoned[api.Template]()))
	ok("GET /api/v1/templates/{name}/versions", val(poisoned[api.VersionList]()))
	ok("GET /api/v1/templates/{name}/versions/{v}", val(poisoned[api.TemplateVersion]()))
	ok("POST /api/v1/templates/{name}/rollback", val(poisoned[api.RollbackResponse]()))
	bytesOf("GET /api/v1/templates/{name}/export")
	ok("POST /api/v1/templates/import", val(poisoned[api.ImportResult]()))
	bytesOf("GET /api/v1/templates/export")

	ok("GET /api/v1/images", val(poisoned[api.List[api.Image]]()))
	mux.HandleFunc("POST /api/v1/images/pull", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		sse(w, "progress", poisoned[api.ImageProgress]())
		sse(w, "image", poisoned[api.Image]())
	})
	ok("GET /api/v1/images/prepull", val(poisoned[api.List[api.PrepullTask]]()))
	ok("GET /api/v1/images/prepull/{id}", val(poisoned[api.PrepullTask]()))

	ok("GET /api/v1/contexts", val(poisoned[api.ContextList]()))
	ok("POST /api/v1/contexts", val(poisoned[api.Context]()))
	ok("GET /api/v1/sessions", val(poisoned[api.SessionList]()))
	ok("GET /api/v1/sessions/{id}", val(poisoned[api.Session]()))
	ok("POST /api/v1/sessions/command", val(poisoned[api.SessionCommandResponse](func(r *api.SessionCommandResponse) {
		r.Stdout, r.Stderr, r.ExitCode, r.Encoding = evil, evil, 0, "" // text, as an older daemon's
	})))
	ok("POST /api/v1/sessions/execute", val(poisoned[api.SessionExecuteResponse](func(r *api.SessionExecuteResponse) {
		r.Success, r.Error, r.Results, r.Created = true, nil, nil, false
	})))
	ok("GET /api/v1/stats", val(poisoned[api.Stats]()))
	ok("GET /api/v1/version", val(poisoned[api.Version]()))

	ok("GET /api/v1/runs", func(r *http.Request) any {
		if r.URL.Query().Get("batch") != "" {
			// task run watches until the runs end.
			return poisoned[api.RunList](func(l *api.RunList) { final(&l.Items[0]) })
		}
		return poisoned[api.RunList]()
	})
	mux.HandleFunc("POST /api/v1/runs", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusCreated, poisoned[api.RunBatch](func(b *api.RunBatch) { final(&b.Runs[0]) }))
	})
	ok("GET /api/v1/runs/{id}", val(poisoned[api.Run]()))
	bytesOf("GET /api/v1/runs/{id}/logs")
	bytesOf("GET /api/v1/runs/{id}/artifacts")
	mux.HandleFunc("GET /api/v1/runs/{id}/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range []struct{ typ, kind, stream string }{
			{api.RunEventOutput, "", "stdout"}, {api.RunEventOutput, "", "stderr"}, {api.RunEventPhase, "", ""},
			{api.RunEventAgent, "tool_call", ""}, {api.RunEventAgent, "message", ""}, {api.RunEventLiveness, "", ""},
			{api.RunEventEnd, "", ""},
		} {
			sse(w, "event", poisoned[api.RunEvent](func(e *api.RunEvent) { e.Type, e.Kind, e.Stream = ev.typ, ev.kind, ev.stream }))
		}
	})

	ok("GET /api/v1/llm/exchanges", val(poisoned[api.LLMExchangeList](noPage)))
	mux.HandleFunc("GET /api/v1/llm/exchanges/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("raw") != "" {
			w.Write([]byte(evil))
			return
		}
		reply(w, http.StatusOK, poisoned[api.LLMExchangeDetail](func(d *api.LLMExchangeDetail) {
			for _, m := range []*api.LLMMessage{d.Request, d.UpstreamRequest, d.UpstreamResponse, d.Response} {
				m.BodyEncoding = "" // else the body is not shown
			}
		}))
	})
	mux.HandleFunc("GET /api/v1/llm/exchanges/stream", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		sse(w, api.LLMEventExchange, poisoned[api.LLMExchange]())
	})
	mux.HandleFunc("GET /api/v1/llm/exchanges/export", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(poisoned[api.LLMExchangeDetail]())
	})
	ok("GET /api/v1/llm/keys", val(poisoned[api.LLMKeyList]()))
	ok("POST /api/v1/llm/keys", val(poisoned[api.LLMKey]()))

	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Setenv(client.EnvURL, srv.URL)
	t.Setenv(client.EnvToken, "")
}

// Every command that prints what the daemon sent (tables, -o wide, -q,
// text views, logs and follows, progress, JSON and YAML, errors from the
// daemon's messages) prints it without a character a terminal acts on,
// whichever field it is in.
func TestTerminalInjection(t *testing.T) {
	newEvilDaemon(t)
	dir := t.TempDir()
	taskFile, importFile := filepath.Join(dir, "t.yaml"), filepath.Join(dir, "i.yaml")
	os.WriteFile(taskFile, []byte("name: t\nagent: custom\ngoal: x\nentrypoint: 'true'\n"), 0o644)
	os.WriteFile(importFile, []byte("kind: SandboxTemplate\n"), 0o644)
	for _, args := range [][]string{
		{"sandbox", "ls"}, {"sandbox", "ls", "-o", "wide"}, {"sandbox", "ls", "-q"}, {"sandbox", "ls", "-o", "json"},
		{"sandbox", "ls", "-o", "yaml"}, {"sandbox", "create", "--image", "x", "--wait=false"},
		{"sandbox", "create", "--image", "x", "--wait=false", "-o", "wide"}, {"sandbox", "logs", "sb"},
		{"sandbox", "logs", "sb", "-o", "yaml"}, {"sandbox", "rm", "sb"}, {"sandbox", "start", "--wait=false", "sb"},
		{"template", "ls", "-o", "wide"}, {"template", "ls", "-q"}, {"template", "get", "t"}, {"template", "get", "t", "--version", "1"},
		{"template", "get", "t", "-o", "yaml"}, {"template", "versions", "t", "-o", "wide"}, {"template", "rollback", "t", "--to", "1"},
		{"template", "export", "t"}, {"export"},
		{"import", importFile},
		{"image", "ls", "-o", "wide"}, {"image", "pull", "x"}, {"image", "pull", "x", "-o", "wide"},
		{"prepull", "ls", "-o", "wide"}, {"prepull", "get", "p"},
		{"context", "ls", "-o", "wide"}, {"context", "create", "-o", "wide"}, {"context", "create"},
		{"session", "ls", "-o", "wide"}, {"session", "info", "s", "-o", "wide"}, {"session", "run", "-o", "yaml", "--", "true"},
		{"session", "exec", "-o", "json", "x"},
		{"stats"}, {"version"},
		{"task", "ls", "-o", "wide"}, {"task", "show", "r"}, {"task", "show", "r", "-o", "json"}, {"task", "logs", "r"},
		{"task", "logs", "-f", "r"}, {"task", "run", taskFile},
		{"llm", "ls", "-o", "wide"}, {"llm", "show", "x"}, {"llm", "show", "x", "-o", "yaml"}, {"llm", "tail"},
		{"llm", "tail", "-o", "json"}, {"llm", "tail", "-f"}, {"llm", "export"},
		{"llm", "keys", "ls", "-o", "wide"}, {"llm", "keys", "create"}, {"llm", "keys", "create", "-o", "json"},
		{"__complete", "sandbox", "rm", ""},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			cmd, err := execute(t.Context(), env{stdout: &stdout, stderr: &stderr, poll: time.Millisecond}, args)
			report(&stderr, cmd, err)
			for name, out := range map[string]string{"stdout": stdout.String(), "stderr": stderr.String()} {
				if l := leaks(out); len(l) > 0 {
					t.Errorf("%s has %s:\n%s", name, strings.Join(l, ", "), out)
				}
			}
			if !strings.Contains(stdout.String()+stderr.String(), "pwned") {
				t.Errorf("the daemon's text is not printed: stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
			}
		})
	}
}

// JSON and YAML keep the daemon's values, escaped.
func TestStructuredOutputKeepsValues(t *testing.T) {
	newEvilDaemon(t)
	var want api.List[api.Sandbox]
	b, _ := json.Marshal(poisoned[api.List[api.Sandbox]]())
	json.Unmarshal(b, &want)
	if want.Items[0].ID != evilJSON {
		t.Fatalf("the fake's id is %+q", want.Items[0].ID)
	}
	for _, format := range []string{"json", "yaml"} {
		code, stdout, stderr := run(t, "sandbox", "ls", "-o", format)
		if code != 0 {
			t.Fatalf("-o %s: exit %d: %s", format, code, stderr)
		}
		js := []byte(stdout)
		if format == "yaml" {
			var err error
			if js, err = yamlToJSON(js); err != nil {
				t.Fatalf("-o yaml: %v:\n%s", err, stdout)
			}
		}
		var got api.List[api.Sandbox]
		if err := json.Unmarshal(js, &got); err != nil {
			t.Fatalf("-o %s: %v:\n%s", format, err, stdout)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("-o %s (-daemon +printed):\n%s", format, diff)
		}
	}
}

// The outputs documented as raw pass the bytes on as they came: your own
// command's output, downloads, exports and --raw.
func TestRawOutputs(t *testing.T) {
	newEvilDaemon(t)
	for _, tt := range []struct {
		args           []string
		stdout, stderr string // the whole of stdout; what stderr must contain
	}{
		{args: []string{"sandbox", "exec", "sb", "--", "cat", "x"}, stdout: evilJSON, stderr: evilJSON},
		{args: []string{"session", "run", "--", "cat", "x"}, stdout: evilJSON, stderr: evilJSON},
		{args: []string{"session", "exec", "print(x)"}, stdout: evilJSON + "\n", stderr: evilJSON + "\n"},
		{args: []string{"sandbox", "cp", "sb:/x", "-"}, stdout: evil},
		{args: []string{"task", "artifacts", "r", "--out", "-"}, stdout: evil},
		{args: []string{"llm", "show", "x", "--raw", "response"}, stdout: evil},
		{args: []string{"task", "logs", "--raw", "r"}, stdout: evil},
		{args: []string{"sandbox", "logs", "--raw", "sb"}, stdout: "(1 older events dropped)\n" + evilJSON + "\n\n" + evilJSON + "\n"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := run(t, tt.args...)
			if code != 0 || stdout != tt.stdout || !strings.Contains(stderr, tt.stderr) {
				t.Errorf("exit %d, stdout %+q, stderr %+q; want stdout %+q, stderr with %+q", code, stdout, stderr, tt.stdout, tt.stderr)
			}
		})
	}
	// task logs -f --raw: the events' text as it came.
	code, stdout, _ := run(t, "task", "logs", "-f", "--raw", "r")
	if code != 0 || !strings.Contains(stdout, " "+evilJSON+"\n") || !strings.Contains(stdout, "!! "+evilJSON+"\n") {
		t.Errorf("task logs -f --raw: exit %d, stdout %+q", code, stdout)
	}
	// context exec (its own daemon): the code's output as it came, and -o json escaped.
	d := newFakeContextDaemon(t)
	d.add(api.Context{ContextID: "ctx-1", Language: api.LanguagePython})
	code, stdout, stderr := runContext(t, "", "exec", "ctx-1", evil)
	if code != 0 || stdout != evilJSON+"\n" {
		t.Errorf("context exec: exit %d, stdout %+q, stderr %+q", code, stdout, stderr)
	}
	if code, stdout, _ := runContext(t, "", "exec", "ctx-1", "-o", "json", evil); code != 0 || leaks(stdout) != nil ||
		!strings.Contains(stdout, "pwned") {
		t.Errorf("context exec -o json: exit %d, stdout %+q", code, stdout)
	}
}

// TestPrintYAMLReadsBack: -o yaml prints strings that yaml.v3 would write
// in a form it cannot read back ("<<" plain is a merge key; a multi-line
// string that starts with space or a line break a literal block it
// refuses or misreads) double-quoted, so that they read back as they are.
func TestPrintYAMLReadsBack(t *testing.T) {
	want := map[string]string{"a": "\nfoo", "b": "  lead\nx", "c": "\n", "d": "<<", "<<": "e", "f": "plain", "g": "multi\nline\n"}
	var buf bytes.Buffer
	if err := printYAML(&buf, want); err != nil {
		t.Fatal(err)
	}
	var got map[string]string
	if err := yaml.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("read back: %v:\n%s", err, buf.String())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("read back (-printed +read):\n%s\n%s", diff, buf.String())
	}
}

// Exports print the daemon's YAML as it is, but where it holds what a
// terminal acts on (yaml.v3 leaves bidi overrides raw): then the values
// that hold it are double-quoted and escaped, the same values.
func TestYAMLExport(t *testing.T) {
	for _, doc := range []map[string]any{
		{"name": "py", "spec": map[string]any{"image": "python:3.12", "env": map[string]any{"A": "1"}}, "description": "two\nlines\n"},
		{"name": "py", "description": "\u202eevil\u2066 and \x1b]0;pwned\x07 \u009b", "tags": []any{"a\u202e", "b"},
			"spec": map[string]any{"startupScript": "echo\n\u202e\n"}},
	} {
		want, err := yaml.Marshal(doc) // as the daemon writes it
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(want) }))
		t.Setenv(client.EnvURL, srv.URL)
		for _, args := range [][]string{{"template", "export", "py"}, {"export"}} {
			code, stdout, stderr := run(t, args...)
			if code != 0 || leaks(stdout) != nil {
				t.Errorf("%s: exit %d, %v, stderr %s:\n%s", args, code, leaks(stdout), stderr, stdout)
			}
			var got map[string]any
			if err := yaml.Unmarshal([]byte(stdout), &got); err != nil || !cmp.Equal(got, doc) {
				t.Errorf("%s: %v, values %v, want %v", args, err, got, doc)
			}
			if clean := leaks(string(want)) == nil; clean && stdout != string(want) {
				t.Errorf("%s: a clean document changed:\n%s\nwant:\n%s", args, stdout, want)
			}
		}
		srv.Close()
	}
}
