package cli

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/google/go-cmp/cmp"
)

// fakeContextDaemon serves the context routes from memory. Sandbox sb7
// exists; contexts made without a sandbox go into sb-auto. Execution
// understands a few programs (see execution).
type fakeContextDaemon struct {
	recorder
	nextID   int
	contexts map[string]*api.Context
	creates  []string // "PATH BODY"
	queries  []string // of GET /contexts
	execs    []api.ExecuteRequest
}

func newFakeContextDaemon(t *testing.T) *fakeContextDaemon {
	d := &fakeContextDaemon{contexts: map[string]*api.Context{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/contexts", d.create)
	mux.HandleFunc("POST /api/v1/sandboxes/{sb}/contexts", d.create)
	mux.HandleFunc("GET /api/v1/contexts", d.list)
	mux.HandleFunc("DELETE /api/v1/contexts/{id}", d.remove)
	mux.HandleFunc("POST /api/v1/contexts/{id}/execute", d.execute)
	mux.HandleFunc("POST /api/v1/contexts/{id}/execute/stream", d.execute)
	d.serve(t, mux)
	return d
}

// add stores a context as if it had been created.
func (d *fakeContextDaemon) add(cx api.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.contexts[cx.ContextID] = &cx
}

func (d *fakeContextDaemon) create(w http.ResponseWriter, r *http.Request) {
	var req api.CreateContextRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		fail(w, http.StatusBadRequest, api.CodeInvalidRequest, err.Error())
		return
	}
	b, _ := json.Marshal(req)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.creates = append(d.creates, r.URL.Path+" "+string(b))
	sb := "sb-auto"
	if id := r.PathValue("sb"); id != "" {
		if id != "sb7" {
			fail(w, http.StatusNotFound, api.CodeSandboxNotFound, "sandbox "+id+" not found")
			return
		}
		sb = id
	}
	switch req.Language {
	case "":
		req.Language = api.LanguagePython
	case "py":
		req.Language = api.LanguagePython
	case api.LanguagePython, api.LanguageJavaScript, api.LanguageBash:
	default:
		fail(w, http.StatusBadRequest, api.CodeInvalidLanguage, "unsupported language "+req.Language)
		return
	}
	d.nextID++
	now := time.Now().UTC()
	cx := &api.Context{ContextID: fmt.Sprintf("ctx-%d", d.nextID), Type: api.ContextTypeJupyter,
		Status: api.ContextStatusActive, CreatedAt: now, Language: req.Language, SessionName: req.SessionName,
		WorkingDir: "/workspace", SandboxID: sb, LastUsedAt: now}
	d.contexts[cx.ContextID] = cx
	reply(w, http.StatusCreated, cx)
}

func (d *fakeContextDaemon) list(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.queries = append(d.queries, r.URL.RawQuery)
	q := r.URL.Query()
	l := api.ContextList{Items: []api.Context{}}
	for _, cx := range d.contexts {
		if s := q.Get("session_name"); s != "" && cx.SessionName != s {
			continue
		}
		if s := q.Get("sandbox_id"); s != "" && cx.SandboxID != s {
			continue
		}
		l.Items = append(l.Items, *cx)
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].ContextID < l.Items[j].ContextID })
	l.Contexts, l.Total = l.Items, len(l.Items)
	reply(w, http.StatusOK, l)
}

func (d *fakeContextDaemon) remove(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	id := r.PathValue("id")
	if d.contexts[id] == nil {
		fail(w, http.StatusNotFound, api.CodeContextNotFound, "context "+id+" not found")
		return
	}
	delete(d.contexts, id)
	reply(w, http.StatusOK, api.DeleteContextResponse{ContextID: id, Status: "deleted", Message: "Context " + id + " deleted"})
}

// ctxEvent is one event of an execution.
type ctxEvent struct {
	name string
	data any
}

// pngBytes is the image the "plot" program draws.
var pngBytes = []byte("\x89PNG\r\n\x1a\n-fake-image-")

// execution returns the events and the final response of running code:
//
//	ok       prints to stdout and stderr and evaluates to 42
//	plot     prints half a line, then shows a figure
//	fail     prints, then raises ZeroDivisionError
//	timeout  times out and loses its state
//	gone     loses its sandbox midway (the request fails)
//
// and anything else echoes the code.
func execution(code string) ([]ctxEvent, api.ExecuteResponse) {
	res := api.ExecuteResponse{Success: true, ExecutionTime: 0.25, Results: []api.ExecutionResult{}}
	var evs []ctxEvent
	out := func(name, text string) {
		evs = append(evs, ctxEvent{name, api.ExecutionOutputEvent{Text: text}})
		if name == api.EventStdout {
			res.Output.Stdout += text
		} else {
			res.Output.Stderr += text
		}
	}
	result := func(r api.ExecutionResult) {
		evs = append(evs, ctxEvent{api.EventResult, r})
		res.Results = append(res.Results, r)
		if r.IsMainResult {
			res.Result = r.Text
		}
	}
	failWith := func(e api.ExecutionError) {
		evs = append(evs, ctxEvent{api.EventError, e})
		res.Success, res.Error = false, &e
	}
	switch code {
	case "ok":
		out(api.EventStdout, "hello\n")
		out(api.EventStderr, "warning\n")
		result(api.ExecutionResult{Text: "42", IsMainResult: true})
	case "plot":
		out(api.EventStdout, "partial")
		result(api.ExecutionResult{Text: "<Figure size 640x480 with 1 Axes>", PNG: base64.StdEncoding.EncodeToString(pngBytes)})
	case "fail":
		out(api.EventStdout, "before\n")
		failWith(api.ExecutionError{Name: "ZeroDivisionError", Value: "division by zero", Kind: api.ErrorKindRuntime,
			Traceback: "Traceback (most recent call last):\n  Cell In[1], line 1\nZeroDivisionError: division by zero\n"})
	case "timeout":
		failWith(api.ExecutionError{Name: api.ErrorNameTimeout, Value: "timed out after 2s", Kind: api.ErrorKindSystem})
		res.StateLost = true
	case "interrupted":
		failWith(api.ExecutionError{Name: api.ErrorNameTimeout, Value: "execution exceeded the timeout of 1s and was interrupted",
			Kind: api.ErrorKindSystem, Traceback: "Traceback (most recent call last):\n  Cell In[1], line 1\nKeyboardInterrupt\n"})
	case "gone":
		out(api.EventStdout, "start\n")
		evs = append(evs, ctxEvent{api.EventError, api.Error{Message: "sandbox sb-auto is gone", Code: api.CodeSandboxNotFound}})
		return evs, res
	default:
		out(api.EventStdout, code)
	}
	return evs, res
}

func (d *fakeContextDaemon) execute(w http.ResponseWriter, r *http.Request) {
	var req api.ExecuteRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		fail(w, http.StatusBadRequest, api.CodeInvalidRequest, err.Error())
		return
	}
	d.mu.Lock()
	d.execs = append(d.execs, req)
	cx := d.contexts[r.PathValue("id")]
	if cx != nil {
		cx.ExecutionCount++
	}
	d.mu.Unlock()
	if cx == nil {
		fail(w, http.StatusNotFound, api.CodeContextNotFound, "context "+r.PathValue("id")+" not found")
		return
	}
	evs, res := execution(req.Code)
	res.ContextID, res.ExecutionCount = cx.ContextID, cx.ExecutionCount
	if !strings.HasSuffix(r.URL.Path, "/stream") {
		if req.Code == "gone" {
			fail(w, http.StatusNotFound, api.CodeSandboxNotFound, "sandbox sb-auto is gone")
			return
		}
		reply(w, http.StatusOK, res)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for _, ev := range evs {
		sse(w, ev.name, ev.data)
	}
	if req.Code != "gone" {
		res.Output = api.ExecutionOutput{}
		sse(w, api.EventComplete, res)
	}
}

// runContext runs "agent2env context args..." as Main does, with stdin.
func runContext(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runIn(t, stdin, append([]string{"context"}, args...)...)
}

func TestContextUsageErrors(t *testing.T) {
	tests := []struct {
		args   []string
		stderr string
	}{
		{[]string{"context"}, "usage: agent2env context <command>"},
		{[]string{"context", "bogus"}, `unknown command "bogus"`},
		{[]string{"context", "create", "extra"}, "unexpected argument \"extra\"\n"},
		{[]string{"context", "create", "--sandbox", "sb7", "--template", "t"}, "give --sandbox or --template, not both"},
		{[]string{"context", "create", "--env", "X"}, `"X" is not KEY=VALUE`},
		{[]string{"context", "exec"}, "need a context id"},
		{[]string{"context", "exec", "ctx-1", "1", "2"}, "need a context id and at most one CODE argument"},
		{[]string{"context", "exec", "--timeout", "soon", "ctx-1", "1"}, `invalid argument "soon" for "--timeout" flag`},
		{[]string{"context", "exec", "ctx-1", "--timeout", "-1s", "1"}, `invalid argument "-1s" for "--timeout" flag: must not be negative`},
		{[]string{"context", "ls", "x"}, `unexpected argument "x"`},
		{[]string{"context", "rm"}, "need at least one context id"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			d := newFakeContextDaemon(t)
			checkUsageError(t, &d.recorder, tt.args, tt.stderr)
		})
	}
	if _, _, stderr := run(t); !strings.Contains(stderr, "  context ") {
		t.Errorf("the command list lacks context:\n%s", stderr)
	}
}

func TestContextCreate(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    result
		creates []string
	}{
		{
			name:    "prints the id alone",
			args:    []string{"context", "create"},
			want:    result{Stdout: "ctx-1\n"},
			creates: []string{"/api/v1/contexts {}"},
		},
		{
			name: "every flag",
			args: []string{"context", "create", "--language", "py", "--session", "s1", "--workdir", "/tmp",
				"--template", "python-data", "--env", "A=1"},
			want: result{Stdout: "ctx-1\n"},
			creates: []string{`/api/v1/contexts {"language":"py","session_name":"s1","working_dir":"/tmp",` +
				`"template":"python-data","env":{"A":"1"}}`},
		},
		{
			name: "in a sandbox, as JSON",
			args: []string{"context", "create", "--sandbox", "sb7", "--language", "bash", "--json"},
			want: result{Stdout: `{
  "context_id": "ctx-1",
  "type": "jupyter",
  "status": "active",
  "created_at": "<time>",
  "language": "bash",
  "working_dir": "/workspace",
  "sandbox_id": "sb7",
  "last_used_at": "<time>",
  "execution_count": 0
}
`},
			creates: []string{`/api/v1/sandboxes/sb7/contexts {"language":"bash"}`},
		},
		{
			name:    "in a missing sandbox",
			args:    []string{"context", "create", "--sandbox", "nope"},
			want:    result{Code: 1, Stderr: "agent2env context: create context in sandbox nope: sandbox nope not found (SANDBOX_NOT_FOUND, HTTP 404)\n"},
			creates: []string{"/api/v1/sandboxes/nope/contexts {}"},
		},
		{
			name:    "rejected",
			args:    []string{"context", "create", "--language", "cobol"},
			want:    result{Code: 1, Stderr: "create context: unsupported language cobol (INVALID_LANGUAGE, HTTP 400)"},
			creates: []string{`/api/v1/contexts {"language":"cobol"}`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newFakeContextDaemon(t)
			code, stdout, stderr := run(t, tt.args...)
			got := result{Code: code, Stdout: stripLastUsed(stripTimes(stdout)), Stderr: tt.want.Stderr}
			if !strings.Contains(stderr, tt.want.Stderr) {
				got.Stderr = stderr
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.creates, d.creates); diff != "" {
				t.Errorf("create requests (-want +got):\n%s", diff)
			}
		})
	}
}

// stripLastUsed replaces the JSON last_used_at value, which the fake
// daemon takes from the clock.
func stripLastUsed(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if k, _, ok := strings.Cut(l, `"last_used_at": "`); ok {
			lines[i] = k + `"last_used_at": "<time>"` + l[len(strings.TrimSuffix(l, ",")):]
		}
	}
	return strings.Join(lines, "\n")
}

func TestContextExec(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		stdin string
		code  int
		// stdout and stderr, exactly.
		stdout, stderr string
		req            api.ExecuteRequest
	}{
		{
			name:   "streams output and results",
			args:   []string{"exec", "ctx-1", "ok"},
			stdout: "hello\n42\n",
			stderr: "warning\n",
			req:    api.ExecuteRequest{Code: "ok"},
		},
		{
			name:   "figure on a line of its own",
			args:   []string{"exec", "ctx-1", "plot"},
			stdout: fmt.Sprintf("partial\n<Figure size 640x480 with 1 Axes>\n[image/png %d bytes]\n", len(pngBytes)),
			req:    api.ExecuteRequest{Code: "plot"},
		},
		{
			name:   "failure prints the traceback and exits 1",
			args:   []string{"exec", "ctx-1", "fail"},
			code:   1,
			stdout: "before\n",
			stderr: "Traceback (most recent call last):\n  Cell In[1], line 1\nZeroDivisionError: division by zero\n",
			req:    api.ExecuteRequest{Code: "fail"},
		},
		{
			name:   "timeout without traceback, state lost",
			args:   []string{"exec", "--timeout", "2s", "ctx-1", "timeout"},
			code:   124,
			stderr: "TimeoutError: timed out after 2s\nagent2env context exec: the interpreter was restarted: its variables and imports are gone\n",
			req:    api.ExecuteRequest{Code: "timeout", Timeout: 2},
		},
		{
			name: "timeout names itself after the traceback",
			args: []string{"exec", "--timeout", "1s", "ctx-1", "interrupted"},
			code: 124,
			stderr: "Traceback (most recent call last):\n  Cell In[1], line 1\nKeyboardInterrupt\n" +
				"TimeoutError: execution exceeded the timeout of 1s and was interrupted\n",
			req: api.ExecuteRequest{Code: "interrupted", Timeout: 1},
		},
		{
			name:   "request failed midway",
			args:   []string{"exec", "ctx-1", "gone"},
			code:   1,
			stdout: "start\n",
			stderr: "agent2env context: execute in context ctx-1: sandbox sb-auto is gone (SANDBOX_NOT_FOUND, HTTP 404)\n",
			req:    api.ExecuteRequest{Code: "gone"},
		},
		{
			name:   "missing context",
			args:   []string{"exec", "nope", "ok"},
			code:   1,
			stderr: "agent2env context: execute in context nope: context nope not found (CONTEXT_NOT_FOUND, HTTP 404)\n",
			req:    api.ExecuteRequest{Code: "ok"},
		},
		{
			name:   "code from stdin",
			args:   []string{"exec", "ctx-1"},
			stdin:  "x = 1\nprint(x)\n",
			stdout: "x = 1\nprint(x)\n",
			req:    api.ExecuteRequest{Code: "x = 1\nprint(x)\n"},
		},
		{
			name:   "code from stdin by -, flags after it",
			args:   []string{"exec", "ctx-1", "-", "--timeout", "1m30s"},
			stdin:  "no newline",
			stdout: "no newline\n",
			req:    api.ExecuteRequest{Code: "no newline", Timeout: 90},
		},
		{
			name:   "code that looks like a flag",
			args:   []string{"exec", "ctx-1", "--", "-1"},
			stdout: "-1\n",
			req:    api.ExecuteRequest{Code: "-1"},
		},
		{
			name:   "variables of this run",
			args:   []string{"exec", "-e", "A=1", "--env", "B=x=y", "ctx-1", "--", "-1"},
			stdout: "-1\n",
			req:    api.ExecuteRequest{Code: "-1", Env: map[string]string{"A": "1", "B": "x=y"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newFakeContextDaemon(t)
			d.add(api.Context{ContextID: "ctx-1", Language: api.LanguagePython, SandboxID: "sb-auto"})
			code, stdout, stderr := runContext(t, tt.stdin, tt.args...)
			want := []any{tt.code, tt.stdout, tt.stderr}
			if diff := cmp.Diff(want, []any{code, stdout, stderr}); diff != "" {
				t.Errorf("exit code, stdout, stderr (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]api.ExecuteRequest{tt.req}, d.execs); diff != "" {
				t.Errorf("execute requests (-want +got):\n%s", diff)
			}
		})
	}
}

func TestContextExecJSON(t *testing.T) {
	d := newFakeContextDaemon(t)
	d.add(api.Context{ContextID: "ctx-1", Language: api.LanguagePython, SandboxID: "sb-auto"})
	tests := []struct {
		code string
		exit int
	}{
		{"ok", 0},
		{"fail", 1},
	}
	for _, tt := range tests {
		code, stdout, stderr := run(t, "context", "exec", "--json", "ctx-1", tt.code)
		if code != tt.exit || stderr != "" {
			t.Errorf("%s: exit %d, stderr %q, want exit %d and nothing on stderr", tt.code, code, stderr, tt.exit)
		}
		var got api.ExecuteResponse
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatalf("%s: output is not an ExecuteResponse: %v\n%s", tt.code, err, stdout)
		}
		_, want := execution(tt.code)
		want.ContextID = "ctx-1"
		want.ExecutionCount = got.ExecutionCount
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: response (-want +got):\n%s", tt.code, diff)
		}
	}
	if len(d.execs) != 2 {
		t.Errorf("%d executions, want 2", len(d.execs))
	}
}

func TestContextList(t *testing.T) {
	longAgo := time.Now().Add(-150 * time.Minute).UTC()
	seed := []api.Context{
		{ContextID: "ctx-1", Type: api.ContextTypeJupyter, Status: api.ContextStatusActive, Language: api.LanguagePython,
			SessionName: "s1", WorkingDir: "/workspace", SandboxID: "sb7", ExecutionCount: 12, CreatedAt: longAgo, LastUsedAt: longAgo},
		{ContextID: "ctx-2", Type: api.ContextTypeJupyter, Status: api.ContextStatusActive, Language: api.LanguageJavaScript,
			WorkingDir: "/workspace", SandboxID: "sb-auto", CreatedAt: longAgo, LastUsedAt: longAgo},
	}
	tests := []struct {
		name   string
		args   []string
		stdout string
		query  string
	}{
		{
			name: "table",
			args: []string{"context", "ls"},
			stdout: "" +
				"CONTEXT ID   LANGUAGE     SANDBOX   SESSION   EXECUTIONS   CREATED\n" +
				"ctx-1        python       sb7       s1        12           2h\n" +
				"ctx-2        javascript   sb-auto             0            2h\n",
		},
		{
			name: "filtered",
			args: []string{"context", "ls", "--session", "s1", "--sandbox", "sb7"},
			stdout: "" +
				"CONTEXT ID   LANGUAGE   SANDBOX   SESSION   EXECUTIONS   CREATED\n" +
				"ctx-1        python     sb7       s1        12           2h\n",
			query: "sandbox_id=sb7&session_name=s1",
		},
		{
			name:   "none",
			args:   []string{"context", "ls", "--session", "other"},
			stdout: "CONTEXT ID   LANGUAGE   SANDBOX   SESSION   EXECUTIONS   CREATED\n",
			query:  "session_name=other",
		},
		{
			name: "json",
			args: []string{"context", "ls", "--json", "--sandbox", "sb-auto"},
			stdout: `{
  "items": [
    {
      "context_id": "ctx-2",
      "type": "jupyter",
      "status": "active",
      "created_at": "<time>",
      "language": "javascript",
      "working_dir": "/workspace",
      "sandbox_id": "sb-auto",
      "last_used_at": "<time>",
      "execution_count": 0
    }
  ]
}
`,
			query: "sandbox_id=sb-auto",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newFakeContextDaemon(t)
			for _, cx := range seed {
				d.add(cx)
			}
			code, stdout, stderr := run(t, tt.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if diff := cmp.Diff(tt.stdout, stripLastUsed(stripTimes(stdout))); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{tt.query}, d.queries); diff != "" {
				t.Errorf("list queries (-want +got):\n%s", diff)
			}
		})
	}
}

func TestContextRemove(t *testing.T) {
	d := newFakeContextDaemon(t)
	for _, id := range []string{"ctx-1", "ctx-2", "ctx-3"} {
		d.add(api.Context{ContextID: id})
	}
	check(t, []string{"context", "rm", "ctx-1", "nope", "ctx-3"}, result{Code: 1, Stdout: "ctx-1\nctx-3\n",
		Stderr: "agent2env context: delete context nope: context nope not found (CONTEXT_NOT_FOUND, HTTP 404)\n"})
	if _, ok := d.contexts["ctx-2"]; !ok || len(d.contexts) != 1 {
		t.Errorf("contexts left: %v, want ctx-2", d.contexts)
	}
	check(t, []string{"context", "rm", "ctx-2"}, result{Stdout: "ctx-2\n"})
}
