package opensandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/service"
)

// fakeCodes is the context service in memory; what code does is scripted
// by its text.
type fakeCodes struct {
	mu      sync.Mutex
	next    int
	byID    map[string]*api.Context
	creates []api.CreateContextRequest
	runs    []api.ExecuteRequest
	started chan struct{} // closed when a "block" run starts
}

func newFakeCodes() *fakeCodes {
	return &fakeCodes{byID: map[string]*api.Context{}, started: make(chan struct{})}
}

func (f *fakeCodes) Create(_ context.Context, sandboxID string, req api.CreateContextRequest) (*api.Context, error) {
	if req.WorkingDir == "/nope" {
		return nil, errdefs.Invalid("working_dir %s does not exist", req.WorkingDir)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	c := &api.Context{ContextID: fmt.Sprintf("ctx-%d", f.next), Language: req.Language, SandboxID: sandboxID, Name: req.Name}
	f.byID[c.ContextID] = c
	f.creates = append(f.creates, req)
	out := *c
	return &out, nil
}

// Default is service.Contexts.Default's rule over the fake's contexts.
func (f *fakeCodes) Default(ctx context.Context, sandboxID string, req api.CreateContextRequest) (*api.Context, error) {
	list, _ := f.List(ctx, sandboxID, "")
	for _, c := range list.Items {
		if c.Name == req.Name && c.Language == req.Language {
			return &c, nil
		}
	}
	return f.Create(ctx, sandboxID, req)
}

func (f *fakeCodes) List(_ context.Context, sandboxID, _ string) (*api.ContextList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var items []api.Context
	for _, c := range f.byID {
		if c.SandboxID == sandboxID {
			items = append(items, *c)
		}
	}
	sort.Slice(items, func(i, j int) bool { return items[i].ContextID < items[j].ContextID })
	return &api.ContextList{Items: items, Total: len(items)}, nil
}

func (f *fakeCodes) get(sandboxID, id string) (*api.Context, error) {
	c, ok := f.byID[id]
	if !ok || c.SandboxID != sandboxID {
		return nil, errdefs.WithCode(errdefs.NotFound("context %s not found", id), api.CodeContextNotFound)
	}
	return c, nil
}

func (f *fakeCodes) Get(_ context.Context, sandboxID, id string) (*api.Context, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.get(sandboxID, id)
	if err != nil {
		return nil, err
	}
	out := *c
	return &out, nil
}

func (f *fakeCodes) Delete(_ context.Context, sandboxID, id string) (*api.DeleteContextResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.get(sandboxID, id); err != nil {
		return nil, err
	}
	delete(f.byID, id)
	return &api.DeleteContextResponse{ContextID: id, Status: "deleted"}, nil
}

func (f *fakeCodes) Stream(_ context.Context, sandboxID, id string, req api.ExecuteRequest) (func(context.Context, service.Sink) (*api.ExecuteResponse, error), error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.get(sandboxID, id)
	if err != nil {
		return nil, err
	}
	f.runs = append(f.runs, req)
	return func(ctx context.Context, sink service.Sink) (*api.ExecuteResponse, error) {
		resp := &api.ExecuteResponse{ContextID: id, ExecutionTime: 0.0124}
		code := req.Code
		if _, cmd, ok := strings.Cut(code, "\n"); ok && strings.HasPrefix(code, sessionPrelude) {
			code = cmd // a session's run: what the shell does with its command
		}
		switch code {
		case "x + 1":
			if err := sink.Result(api.ExecutionResult{Text: "2", IsMainResult: true}); err != nil {
				return nil, err
			}
		case "print('hi')":
			if err := sink.Stdout("hi\n"); err != nil {
				return nil, err
			}
			if err := sink.Stderr("warn\n"); err != nil {
				return nil, err
			}
		case "plot()":
			if err := sink.Result(api.ExecutionResult{Text: "<Figure>", PNG: "iVBORw0KGgo=", HTML: "<b>x</b>",
				JSON: map[string]any{"a": 1}}); err != nil {
				return nil, err
			}
		case "1/0":
			resp.Error = &api.ExecutionError{Name: "ZeroDivisionError", Value: "division by zero", Kind: api.ErrorKindRuntime,
				Traceback: "Traceback (most recent call last):\n  File \"<cell>\", line 1\nZeroDivisionError: division by zero\n"}
		case "block":
			close(f.started)
			<-ctx.Done()
			return nil, ctx.Err()
		case "broken":
			return nil, fmt.Errorf("agent connection lost")
		case "echo hi":
			if err := sink.Stdout("hi\n"); err != nil {
				return nil, err
			}
		case "echo hi; exit 3":
			if err := sink.Stdout("hi\n"); err != nil {
				return nil, err
			}
			resp.Error = &api.ExecutionError{Name: kernelExitStatus, Value: "exit status 3", Kind: api.ErrorKindRuntime}
		case "if":
			resp.Error = &api.ExecutionError{Name: "SyntaxError", Value: "syntax error: unexpected end of file", Kind: api.ErrorKindSyntax}
		case "sleep 100":
			resp.Error = &api.ExecutionError{Name: api.ErrorNameTimeout, Value: "execution exceeded the timeout", Kind: api.ErrorKindSystem}
		case "kill -9 $$":
			resp.Error = &api.ExecutionError{Name: api.ErrorNameKernelDied, Value: "the bash kernel was killed by SIGKILL; it was restarted", Kind: api.ErrorKindSystem}
		}
		f.mu.Lock()
		c.ExecutionCount++
		f.mu.Unlock()
		return resp, nil
	}, nil
}

// newCodeSetup is newExecdSetup with a context service, holding context
// ctx-1 (python, 4 runs so far) in sandbox a and ctx-2 (bash) in p.
func newCodeSetup(t *testing.T) (*setup, *fakeCodes) {
	t.Helper()
	s, _ := newExecdSetup(t)
	codes := newFakeCodes()
	codes.byID["ctx-1"] = &api.Context{ContextID: "ctx-1", Language: "python", SandboxID: "a", ExecutionCount: 4}
	codes.byID["ctx-2"] = &api.Context{ContextID: "ctx-2", Language: "bash", SandboxID: "p"}
	codes.next = 2
	s.h.cfg.Codes = codes
	return s, codes
}

// withoutTimestamps is evs as JSON, keys sorted, timestamps dropped.
func withoutTimestamps(evs []map[string]any) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		delete(ev, "timestamp")
		b, _ := json.Marshal(ev)
		out[i] = string(b)
	}
	return out
}

func TestExecdRunCode(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		wantStatus int
		wantCode   string
		// wantEvents are the events after init (keys sorted, without
		// timestamps).
		wantEvents []string
		wantCtx    string // the context created, if any: language/name
	}{
		{
			name: "last expression's value", body: `{"code":"x + 1","context":{"id":"ctx-1","language":"python"}}`, wantStatus: 200,
			wantEvents: []string{`{"execution_count":5,"type":"execution_count"}`, `{"results":{"text":"2"},"type":"result"}`,
				`{"execution_time":12,"type":"execution_complete"}`},
		},
		{
			name: "output", body: `{"code":"print('hi')","context":{"id":"ctx-1","language":"python"}}`, wantStatus: 200,
			wantEvents: []string{`{"execution_count":5,"type":"execution_count"}`, `{"text":"hi\n","type":"stdout"}`,
				`{"text":"warn\n","type":"stderr"}`, `{"execution_time":12,"type":"execution_complete"}`},
		},
		{
			name: "rich result keyed by MIME type", body: `{"code":"plot()","context":{"id":"ctx-1","language":"python"}}`, wantStatus: 200,
			wantEvents: []string{`{"execution_count":5,"type":"execution_count"}`,
				`{"results":{"application/json":{"a":1},"image/png":"iVBORw0KGgo=","text":"\u003cFigure\u003e","text/html":"\u003cb\u003ex\u003c/b\u003e"},"type":"result"}`,
				`{"execution_time":12,"type":"execution_complete"}`},
		},
		{
			name: "exception", body: `{"code":"1/0","context":{"id":"ctx-1","language":"python"}}`, wantStatus: 200,
			wantEvents: []string{`{"execution_count":5,"type":"execution_count"}`,
				`{"error":{"ename":"ZeroDivisionError","evalue":"division by zero","traceback":["Traceback (most recent call last):","  File \"\u003ccell\u003e\", line 1","ZeroDivisionError: division by zero"]},"type":"error"}`},
		},
		{
			name: "the run fails", body: `{"code":"broken","context":{"id":"ctx-1","language":"python"}}`, wantStatus: 200,
			wantEvents: []string{`{"execution_count":5,"type":"execution_count"}`,
				`{"error":{"ename":"RuntimeError","evalue":"agent connection lost","traceback":[]},"type":"error"}`},
		},
		{
			name: "no id: the language's default context, made", body: `{"code":"x + 1","context":{"language":"bash"}}`, wantStatus: 200,
			wantEvents: []string{`{"execution_count":1,"type":"execution_count"}`, `{"results":{"text":"2"},"type":"result"}`,
				`{"execution_time":12,"type":"execution_complete"}`},
			wantCtx: "bash/" + defaultContextName,
		},
		{
			name: "no context: python's default", body: `{"code":"x + 1"}`, wantStatus: 200,
			wantEvents: []string{`{"execution_count":1,"type":"execution_count"}`, `{"results":{"text":"2"},"type":"result"}`,
				`{"execution_time":12,"type":"execution_complete"}`},
			wantCtx: "python/" + defaultContextName,
		},
		{name: "context of another sandbox", body: `{"code":"x","context":{"id":"ctx-2","language":"bash"}}`, wantStatus: 404, wantCode: api.CodeContextNotFound},
		{name: "unknown context", body: `{"code":"x","context":{"id":"nope","language":"python"}}`, wantStatus: 404, wantCode: api.CodeContextNotFound},
		{name: "language differs from the context's", body: `{"code":"x","context":{"id":"ctx-1","language":"bash"}}`, wantStatus: 400},
		{name: "language without a kernel", body: `{"code":"x","context":{"language":"java"}}`, wantStatus: 400},
		{name: "no code", body: `{"code":"  ","context":{"language":"python"}}`, wantStatus: 400},
		{name: "not JSON", body: `{"code":`, wantStatus: 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, codes := newCodeSetup(t)
			rec := execdDo(t, s, "POST", "/opensandbox/a/execd/code", "application/json", strings.NewReader(tc.body), "tok-a")
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d %s, want %d", rec.Code, rec.Body, tc.wantStatus)
			}
			if tc.wantStatus != 200 {
				var eb map[string]string
				_ = json.Unmarshal(rec.Body.Bytes(), &eb)
				if tc.wantCode != "" && eb["code"] != tc.wantCode {
					t.Errorf("code %q, want %q", eb["code"], tc.wantCode)
				}
				if len(codes.runs) != 0 {
					t.Errorf("a refused request ran: %v", codes.runs)
				}
				return
			}
			if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream" {
				t.Errorf("Content-Type %q", ct)
			}
			evs := events(t, rec.Body.String())
			if len(evs) == 0 || evs[0]["type"] != "init" || evs[0]["text"] == "" {
				t.Fatalf("first event %v, want init with the execution id", evs)
			}
			got := withoutTimestamps(evs[1:])
			if strings.Join(got, "\n") != strings.Join(tc.wantEvents, "\n") {
				t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.wantEvents, "\n"))
			}
			if len(codes.runs) != 1 || codes.runs[0].Timeout != codeTimeout {
				t.Errorf("runs %+v, want one with the maximum timeout", codes.runs)
			}
			var made []string
			for _, c := range codes.creates {
				made = append(made, c.Language+"/"+c.Name)
			}
			if strings.Join(made, ",") != tc.wantCtx {
				t.Errorf("contexts made: %v, want %q", made, tc.wantCtx)
			}
		})
	}
}

// A run without a context id reuses the default context it made.
func TestExecdRunCodeDefaultReused(t *testing.T) {
	s, codes := newCodeSetup(t)
	for i := 0; i < 3; i++ {
		rec := execdDo(t, s, "POST", "/opensandbox/a/execd/code", "application/json", strings.NewReader(`{"code":"x + 1","context":{"language":"python"}}`), "tok-a")
		if rec.Code != 200 {
			t.Fatalf("run %d: %d %s", i, rec.Code, rec.Body)
		}
		evs := events(t, rec.Body.String())
		if n := fmt.Sprint(evs[1]["execution_count"]); n != fmt.Sprint(i+1) {
			t.Errorf("run %d: execution_count %s", i, n)
		}
	}
	if len(codes.creates) != 1 {
		t.Errorf("contexts made: %v, want one", codes.creates)
	}
}

func TestExecdCodeContexts(t *testing.T) {
	type step struct {
		method, target, body string
		wantStatus           int
		wantBody             string // JSON, when set
	}
	for _, tc := range []struct {
		name  string
		steps []step
		// wantLeft are the contexts left in sandbox a.
		wantLeft string
	}{
		{
			name: "create, get, list, delete",
			steps: []step{
				{"POST", "/code/context", `{"language":"python"}`, 200, `{"id":"ctx-3","language":"python"}`},
				{"POST", "/code/context", `{"language":"javascript"}`, 200, `{"id":"ctx-4","language":"javascript"}`},
				{"GET", "/code/contexts/ctx-3", "", 200, `{"id":"ctx-3","language":"python"}`},
				{"GET", "/code/contexts?language=python", "", 200, `[{"id":"ctx-1","language":"python"},{"id":"ctx-3","language":"python"}]`},
				{"GET", "/code/contexts", "", 200, `[{"id":"ctx-1","language":"python"},{"id":"ctx-3","language":"python"},{"id":"ctx-4","language":"javascript"}]`},
				{"DELETE", "/code/contexts/ctx-3", "", 200, ""},
				{"GET", "/code/contexts/ctx-3", "", 404, ""},
				{"DELETE", "/code/contexts/ctx-3", "", 404, ""},
			},
			wantLeft: "ctx-1,ctx-4",
		},
		{
			name: "delete by language",
			steps: []step{
				{"POST", "/code/context", `{"language":"bash"}`, 200, `{"id":"ctx-3","language":"bash"}`},
				{"POST", "/code/context", `{"language":"python"}`, 200, `{"id":"ctx-4","language":"python"}`},
				{"DELETE", "/code/contexts?language=python", "", 200, ""},
				{"GET", "/code/contexts?language=python", "", 200, `[]`},
				{"DELETE", "/code/contexts", "", 400, ""},
			},
			wantLeft: "ctx-3",
		},
		{
			name: "refusals",
			steps: []step{
				{"POST", "/code/context", `{"language":"go"}`, 400, ""},
				{"POST", "/code/context", `{"language":"typescript"}`, 400, ""},
				{"POST", "/code/context", `{"language":"python","cwd":"/nope"}`, 400, ""},
				{"GET", "/code/contexts?language=java", "", 400, ""},
				{"GET", "/code/contexts/ctx-2", "", 404, ""}, // sandbox p's
				{"PUT", "/code/context", `{}`, 405, ""},
				{"GET", "/code/contexts/ctx-1/x", "", 404, ""},
			},
			wantLeft: "ctx-1",
		},
		{
			name: "sessions are not code contexts",
			steps: []step{
				{"POST", "/session", "", 200, `{"session_id":"ctx-3"}`},
				{"GET", "/code/contexts/ctx-3", "", 404, ""},
				{"DELETE", "/code/contexts/ctx-3", "", 404, ""},
				{"POST", "/code", `{"code":"print(1)","context":{"id":"ctx-3"}}`, 404, ""},
				{"GET", "/code/contexts?language=bash", "", 200, `[]`},
			},
			wantLeft: "ctx-1,ctx-3",
		},
		{
			name: "default language is python",
			steps: []step{
				{"POST", "/code/context", `{}`, 200, `{"id":"ctx-3","language":"python"}`},
			},
			wantLeft: "ctx-1,ctx-3",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, codes := newCodeSetup(t)
			for _, st := range tc.steps {
				ctype := ""
				if st.body != "" {
					ctype = "application/json"
				}
				rec := execdDo(t, s, st.method, "/opensandbox/a/execd"+st.target, ctype, strings.NewReader(st.body), "tok-a")
				if rec.Code != st.wantStatus {
					t.Fatalf("%s %s: %d %s, want %d", st.method, st.target, rec.Code, rec.Body, st.wantStatus)
				}
				if st.wantBody != "" && strings.TrimSpace(rec.Body.String()) != st.wantBody {
					t.Errorf("%s %s: body %s, want %s", st.method, st.target, rec.Body, st.wantBody)
				}
			}
			list, _ := codes.List(context.Background(), "a", "")
			var left []string
			for _, c := range list.Items {
				left = append(left, c.ContextID)
			}
			if strings.Join(left, ",") != tc.wantLeft {
				t.Errorf("contexts left %v, want %s", left, tc.wantLeft)
			}
		})
	}
}

// DELETE /code?id= interrupts a run of the same sandbox, by the id of its
// init event.
func TestExecdInterruptCode(t *testing.T) {
	s, codes := newCodeSetup(t)
	// The token of p, which is pending: make it run for this test.
	s.sbs.byID["p"].Status = api.StatusRunning
	srv := httptest.NewServer(s.h)
	t.Cleanup(srv.Close)
	dec, execID := openStream(t, srv, "/opensandbox/a/execd/code", `{"code":"block","context":{"id":"ctx-1"}}`)
	select {
	case <-codes.started:
	case <-time.After(5 * time.Second):
		t.Fatal("the run did not start")
	}
	for _, tc := range []struct {
		target, token string
		want          int
	}{
		{"/opensandbox/a/execd/code", "tok-a", 400},              // no id
		{"/opensandbox/a/execd/code?id=nope", "tok-a", 404},      // unknown
		{"/opensandbox/p/execd/code?id=" + execID, "tok-p", 404}, // another sandbox's run
		{"/opensandbox/a/execd/code?id=" + execID, "tok-a", 200}, // this one
		{"/opensandbox/a/execd/code?id=" + execID, "tok-a", 404}, // ended
	} {
		rec := execdDo(t, s, "DELETE", tc.target, "", nil, tc.token)
		if rec.Code != tc.want {
			t.Errorf("DELETE %s: %d %s, want %d", tc.target, rec.Code, rec.Body, tc.want)
		}
		if tc.want == 200 {
			// The stream ends with the interrupt's error.
			if last := lastEvent(dec); fmt.Sprint(last["error"]) != "map[ename:KeyboardInterrupt evalue:interrupted traceback:[]]" {
				t.Errorf("last event %v", last)
			}
		}
	}
}
