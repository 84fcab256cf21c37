package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/contexts"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
	"github.com/agent2env/agent2env/internal/service"
	"github.com/agent2env/agent2env/internal/session"
	"github.com/agent2env/agent2env/internal/store"
	"github.com/agent2env/agent2env/internal/store/sqlite"
)

// TestSessionTenants: with API keys, a session id names the key's own
// session; another key using the same id reaches another one.
func TestSessionTenants(t *testing.T) {
	keyA, keyB := auth.NewKey(), auth.NewKey()
	keys, err := auth.NewKeys(keyA, keyB)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := newSessionHandler(t, manager.Config{}, WithMiddleware(AuthMiddleware(keys)), WithMiddleware(TenantMiddleware))
	do := func(key, method, path, body string, out any) int {
		t.Helper()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if out != nil {
			if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
				t.Fatalf("%s %s: %s: %v", method, path, rec.Body, err)
			}
		}
		return rec.Code
	}
	var a, b api.SessionExecuteResponse
	if code := do(keyA, "POST", "/api/v1/sessions/s1/execute", `{"code":"secret = 1"}`, &a); code != http.StatusOK || !a.Created {
		t.Fatalf("key A: %d %+v", code, a)
	}
	if code := do(keyB, "POST", "/api/v1/sessions/execute", `{"code":"'secret' in globals()","session_id":"s1"}`, &b); code != http.StatusOK ||
		!b.Created || b.Result != "False" {
		t.Errorf("key B with key A's session id: %d %+v", code, b)
	}
	var list api.SessionList
	if code := do(keyA, "GET", "/api/v1/sessions", "", &list); code != http.StatusOK || list.Total != 1 {
		t.Errorf("key A's list: %d %+v", code, list)
	}
	if code := do(keyB, "DELETE", "/api/v1/sessions/s1", "", nil); code != http.StatusOK {
		t.Errorf("key B's delete: %d", code)
	}
	var e api.Error
	if code := do(keyB, "GET", "/api/v1/sessions/s1", "", &e); code != http.StatusNotFound || e.Code != api.CodeSessionNotFound {
		t.Errorf("key B's get after its delete: %d %+v", code, e)
	}
	var info api.Session
	if code := do(keyA, "GET", "/api/v1/sessions/s1", "", &info); code != http.StatusOK || info.ExecutionCount != 1 {
		t.Errorf("key A's session after key B's delete: %d %+v", code, info)
	}
	if code := do(keyA, "POST", "/api/v1/sessions/s1/execute", `{"code":"1","session_id":"s2"}`, &e); code != http.StatusBadRequest {
		t.Errorf("path and body name two sessions: %d %+v", code, e)
	}
}

// newSessionHandler serves the session and context routes, with opts,
// over a real session service, contexts service, manager (cfg) and store
// on a fake runtime; all is closed when the test ends.
func newSessionHandler(tb testing.TB, cfg manager.Config, opts ...Option) (http.Handler, store.Store) {
	tb.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(tb.TempDir(), "state.db"))
	if err != nil {
		tb.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	imgs := newFakeImages("agent2env/code-interpreter")
	rt := fakeruntime.New(fakeruntime.WithImages(imgs))
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 10 * time.Second
	}
	m := manager.New(cfg, rt, st, log)
	ctxs := contexts.New(contexts.Config{}, m, st, nil, log)
	sess, err := session.New(session.Config{}, m, st, ctxs, log)
	if err != nil {
		tb.Fatal(err)
	}
	ctxs.SetSessions(sess)
	tb.Cleanup(func() {
		m.Close()
		rt.Close()
		st.Close()
	})
	opts = append([]Option{WithRoutes(NewSessionRoutes(sess)), WithRoutes(NewContextRoutes(service.NewContexts(ctxs)))}, opts...)
	return New(service.NewSandboxes(m, ""), service.NewImages(imgs), log, opts...).Handler(), st
}

// A keepalive's body may be left out or be empty, chunked too: the idle
// timeout stays; a body that is there is read.
func TestKeepAliveBodies(t *testing.T) {
	h, _ := newSessionHandler(t, manager.Config{})
	do := func(body io.Reader, length int64) (int, string) {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, "/api/v1/sessions/s1/keepalive", body)
		req.Header.Set("Content-Type", "application/json")
		req.ContentLength = length
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	req := httptest.NewRequest(http.MethodPost, "/api/v1/sessions/s1/execute", strings.NewReader(`{"code":"1"}`))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("execute: %d %s", rec.Code, rec.Body)
	}
	for _, tt := range []struct {
		name   string
		body   io.Reader
		length int64
		want   int
		idle   float64
	}{
		{"no body", http.NoBody, 0, http.StatusOK, 1800},
		{"empty chunked body", io.MultiReader(strings.NewReader("")), -1, http.StatusOK, 1800},
		{"chunked body", io.MultiReader(strings.NewReader(`{"idle_timeout":600}`)), -1, http.StatusOK, 600},
		{"malformed chunked body", io.MultiReader(strings.NewReader(`{"idle_timeout":`)), -1, http.StatusBadRequest, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, body := do(tt.body, tt.length)
			if code != tt.want {
				t.Fatalf("%d %s, want %d", code, body, tt.want)
			}
			var sess api.Session
			if code == http.StatusOK && (json.Unmarshal([]byte(body), &sess) != nil || sess.IdleTimeout != tt.idle) {
				t.Errorf("session %s, want an idle timeout of %v", body, tt.idle)
			}
		})
	}
}

// Code that fails answers seed 001's execute with its traceback in
// output.stderr, where that API's clients (and the MCP server of seed 004
// built on it) read why, besides the structured error; output the code
// wrote to stderr itself comes first.
func TestContextExecuteErrorInStderr(t *testing.T) {
	h, _ := newSessionHandler(t, manager.Config{})
	do := func(path, body string, out any) {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code/100 != 2 {
			t.Fatalf("%s: %d %s", path, rec.Code, rec.Body)
		}
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			t.Fatal(err)
		}
	}
	var c api.Context
	do("/api/v1/contexts", `{"language":"python"}`, &c)
	for _, tt := range []struct {
		name, code string
		want       []string // in stderr, in order
	}{
		{"runtime error", `1/0`, []string{"Traceback", "ZeroDivisionError: division by zero"}},
		{"after the code's own stderr", `import sys; print("mine", file=sys.stderr); raise KeyError("k")`,
			[]string{"mine\n", "KeyError: 'k'"}},
		{"syntax error", `if True print(1)`, []string{"SyntaxError"}},
		{"success", `print(1)`, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var res api.ExecuteResponse
			do("/api/v1/contexts/"+c.ContextID+"/execute", `{"code":`+strconv.Quote(tt.code)+`}`, &res)
			if tt.want == nil {
				if !res.Success || res.Output.Stderr != "" {
					t.Errorf("%+v", res)
				}
				return
			}
			rest := res.Output.Stderr
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("stderr %q: no %q (in order %q)", res.Output.Stderr, w, tt.want)
				}
				rest = rest[i+len(w):]
			}
			if res.Success || res.Error == nil || strings.Count(res.Output.Stderr, res.Error.Traceback) != 1 {
				t.Errorf("response %+v: want a failure whose traceback is in stderr once", res)
			}
		})
	}
}

// A context execute in a paused or stopped sandbox is 409
// SANDBOX_NOT_READY, as the sandbox's other requests, saying it is paused
// and how to go on, with the sandbox and its status in the details; the
// stream form answers it before the stream starts. Once resumed, the
// context runs code again.
func TestContextExecuteSandboxNotRunning(t *testing.T) {
	h, _ := newSessionHandler(t, manager.Config{})
	do := func(path, body string) (int, []byte) {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.Bytes()
	}
	code, body := do("/api/v1/contexts", `{"language":"python"}`)
	var c api.Context
	if code != http.StatusCreated && code != http.StatusOK || json.Unmarshal(body, &c) != nil {
		t.Fatalf("create: %d %s", code, body)
	}
	for _, tt := range []struct{ op, status, message string }{
		{"pause", "paused", "is paused, not running: resume it first"},
		{"stop", "succeeded", "not running"},
	} {
		t.Run(tt.op, func(t *testing.T) {
			if code, body := do("/api/v1/sandboxes/"+c.SandboxID+"/"+tt.op, ``); code != http.StatusOK {
				t.Fatalf("%s: %d %s", tt.op, code, body)
			}
			for _, path := range []string{
				"/api/v1/contexts/" + c.ContextID + "/execute",
				"/api/v1/contexts/" + c.ContextID + "/execute/stream",
				"/api/v1/sandboxes/" + c.SandboxID + "/contexts/" + c.ContextID + "/execute",
				"/api/v1/sandboxes/" + c.SandboxID + "/contexts/" + c.ContextID + "/execute/stream",
			} {
				code, body := do(path, `{"code":"1"}`)
				var e api.Error
				if code != http.StatusConflict || json.Unmarshal(body, &e) != nil || e.Code != api.CodeSandboxNotReady ||
					!strings.Contains(e.Message, tt.message) || e.Details["sandbox_id"] != c.SandboxID || e.Details["status"] != tt.status {
					t.Errorf("%s: %d %s, want 409 %s saying %q", path, code, body, api.CodeSandboxNotReady, tt.message)
				}
			}
			back := map[string]string{"pause": "resume", "stop": "start"}[tt.op]
			if code, body := do("/api/v1/sandboxes/"+c.SandboxID+"/"+back, ``); code != http.StatusOK {
				t.Fatalf("%s: %d %s", back, code, body)
			}
		})
	}
}

// A context create naming a sandbox and a template is 400, with nothing
// made (no context, no session), unless the sandbox was made from that
// template, which older code-interpreter clients send beside its id.
func TestContextCreateSandboxAndTemplate(t *testing.T) {
	h, st := newSessionHandler(t, manager.Config{})
	do := func(method, path, body string) (int, string) {
		t.Helper()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	code, body := do("POST", "/api/v1/contexts", `{"language":"python"}`)
	var own api.Context
	if code != http.StatusCreated || json.Unmarshal([]byte(body), &own) != nil {
		t.Fatalf("create: %d %s", code, body)
	}
	if _, err := st.UpdateSandbox(context.Background(), own.SandboxID, func(sb *store.Sandbox) error {
		sb.Template = "py-tools"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sb := strconv.Quote(own.SandboxID)
	for _, tt := range []struct {
		name, path, body string
		want             int
	}{
		{"another template", "/api/v1/contexts", `{"sandbox_id":` + sb + `,"template":"node-tools"}`, http.StatusBadRequest},
		{"another template, in a session", "/api/v1/contexts", `{"sandbox_id":` + sb + `,"template":"node-tools","session_name":"s1"}`, http.StatusBadRequest},
		{"another template, sandbox path", "/api/v1/sandboxes/" + own.SandboxID + "/contexts", `{"template":"node-tools"}`, http.StatusBadRequest},
		{"its template", "/api/v1/contexts", `{"sandbox_id":` + sb + `,"template":"py-tools"}`, http.StatusCreated},
		{"its template, sandbox path", "/api/v1/sandboxes/" + own.SandboxID + "/contexts", `{"template":"py-tools"}`, http.StatusCreated},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before, err := st.ListContexts(context.Background(), store.ContextFilter{})
			if err != nil {
				t.Fatal(err)
			}
			code, body := do("POST", tt.path, tt.body)
			if code != tt.want {
				t.Fatalf("%d %s, want %d", code, body, tt.want)
			}
			if code != http.StatusBadRequest {
				return
			}
			if !strings.Contains(body, `template \"node-tools\" is not the template of sandbox `+own.SandboxID) {
				t.Errorf("body %s", body)
			}
			after, err := st.ListContexts(context.Background(), store.ContextFilter{})
			if err != nil {
				t.Fatal(err)
			}
			sessions, err := st.ListSessions(context.Background(), store.SessionFilter{})
			if err != nil {
				t.Fatal(err)
			}
			if len(after) != len(before) || len(sessions) != 0 {
				t.Errorf("made: %d contexts (before %d), sessions %d", len(after), len(before), len(sessions))
			}
		})
	}
}

// The context lists, of every sandbox and of one, are oldest first unless
// order=desc asks for newest first, in pages of limit with next_cursor
// asking for the next; another order or limit, or a cursor the server did
// not give, is 400 naming its parameter.
func TestListContextsOrder(t *testing.T) {
	h, _ := newSessionHandler(t, manager.Config{})
	do := requester(t, h)
	var want []string
	var sandboxID string
	for i := range 3 {
		body := `{"language":"python"}`
		if i > 0 {
			body = `{"language":"python","sandbox_id":"` + sandboxID + `"}`
		}
		code, b := do(http.MethodPost, "/api/v1/contexts", body)
		var c api.Context
		if err := json.Unmarshal(b, &c); code != http.StatusCreated || err != nil {
			t.Fatalf("create: %d %s", code, b)
		}
		sandboxID = c.SandboxID
		want = append(want, c.ContextID)
	}
	newest := slices.Clone(want)
	slices.Reverse(newest)
	for _, path := range []string{"/api/v1/contexts", "/api/v1/sandboxes/" + sandboxID + "/contexts"} {
		for _, tt := range []struct {
			query string
			want  []string
		}{{"", want}, {"?order=asc", want}, {"?order=desc", newest}} {
			code, b := do(http.MethodGet, path+tt.query, "")
			var l api.ContextList
			if err := json.Unmarshal(b, &l); code != http.StatusOK || err != nil {
				t.Fatalf("%s%s: %d %s", path, tt.query, code, b)
			}
			var got, gotContexts []string
			for i := range l.Items {
				got = append(got, l.Items[i].ContextID)
				gotContexts = append(gotContexts, l.Contexts[i].ContextID)
			}
			if !slices.Equal(got, tt.want) || !slices.Equal(gotContexts, tt.want) || l.Total != len(tt.want) {
				t.Errorf("%s%s: items %v, contexts %v, total %d; want %v", path, tt.query, got, gotContexts, l.Total, tt.want)
			}
		}
		get := func(target string) (int, []byte) { return do(http.MethodGet, target, "") }
		checkPages(t, path, []pageCase{{"?limit=2", want, 2}, {"?limit=1&order=desc", newest, 3}, {"?limit=3", want, 1}}, get,
			pageIDs(func(l *api.ContextList) ([]string, string) {
				var ids []string
				for _, c := range l.Items {
					ids = append(ids, c.ContextID)
				}
				if l.Total != len(l.Items) {
					ids = append(ids, "(total "+strconv.Itoa(l.Total)+")")
				}
				return ids, l.NextCursor
			}))
	}
}

// The session list is oldest first unless order=desc, in pages of limit
// with next_cursor asking for the next; another order or limit, or a
// cursor the server did not give, is 400 naming its parameter.
func TestListSessionsPages(t *testing.T) {
	h, _ := newSessionHandler(t, manager.Config{})
	do := requester(t, h)
	oldest := []string{"s1", "s2", "s3"}
	for _, id := range oldest {
		if code, b := do(http.MethodPost, "/api/v1/sessions/"+id+"/execute", `{"code":"1"}`); code != http.StatusOK {
			t.Fatalf("execute in %s: %d %s", id, code, b)
		}
	}
	newest := slices.Clone(oldest)
	slices.Reverse(newest)
	get := func(target string) (int, []byte) { return do(http.MethodGet, target, "") }
	checkPages(t, "/api/v1/sessions", []pageCase{
		{"", oldest, 1}, {"?order=desc", newest, 1}, {"?limit=2", oldest, 2}, {"?limit=1&order=desc", newest, 3},
	}, get, pageIDs(func(l *api.SessionList) ([]string, string) {
		var ids []string
		for _, s := range l.Items {
			ids = append(ids, s.SessionID)
		}
		if l.Total != len(l.Items) {
			ids = append(ids, "(total "+strconv.Itoa(l.Total)+")")
		}
		return ids, l.NextCursor
	}))
}

// requester returns a function that sends h a request, a JSON body when
// body is not empty, and returns its status and body.
func requester(t *testing.T, h http.Handler) func(method, path, body string) (int, []byte) {
	return func(method, path, body string) (int, []byte) {
		t.Helper()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.Bytes()
	}
}
