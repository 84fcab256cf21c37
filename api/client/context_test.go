package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/google/go-cmp/cmp"
)

const contextJSON = `{"context_id":"ctx-1","type":"jupyter","status":"active","created_at":"2025-01-02T03:04:05Z",` +
	`"language":"python","session_name":"s1","working_dir":"/workspace","sandbox_id":"sb1",` +
	`"last_used_at":"2025-01-02T03:04:05Z","execution_count":2}`

var pyContext = api.Context{ContextID: "ctx-1", Type: api.ContextTypeJupyter, Status: api.ContextStatusActive,
	CreatedAt: created, Language: api.LanguagePython, SessionName: "s1", WorkingDir: "/workspace", SandboxID: "sb1",
	LastUsedAt: created, ExecutionCount: 2}

// handleOf returns what a context handle describes, for comparison: cmp
// cannot look into the handle's unexported client.
func handleOf(cx *client.Context, err error) (any, error) {
	if cx == nil {
		return nil, err
	}
	return cx.Context, err
}

// handlesOf is handleOf of a list.
func handlesOf(cxs []*client.Context, err error) (any, error) {
	out := []api.Context{}
	for _, cx := range cxs {
		out = append(out, cx.Context)
	}
	return out, err
}

// handle returns a handle on ctx-1, which c's daemon must describe.
func handle(t *testing.T, c *client.Client) *client.Context {
	t.Helper()
	cx, err := c.Contexts().Get(t.Context(), "ctx-1")
	if err != nil {
		t.Fatal(err)
	}
	return cx
}

func TestContextRequests(t *testing.T) {
	tests := []struct {
		name  string
		reply reply
		call  func(ctx context.Context, c *client.Client) (any, error)
		want  recorded
		out   any
	}{
		{
			name:  "create",
			reply: reply{status: http.StatusCreated, contentType: "application/json", body: contextJSON},
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return handleOf(c.Contexts().Create(ctx, api.CreateContextRequest{Language: "py", SessionName: "s1",
					Template: "python-data", Env: map[string]string{"A": "1"}}))
			},
			want: recorded{Method: "POST", Path: "/api/v1/contexts", ContentType: "application/json",
				Body: `{"language":"py","session_name":"s1","template":"python-data","env":{"A":"1"}}`},
			out: pyContext,
		},
		{
			name:  "create in a sandbox",
			reply: reply{status: http.StatusCreated, contentType: "application/json", body: contextJSON},
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return handleOf(c.Contexts().CreateIn(ctx, "sb/1", api.CreateContextRequest{SandboxID: "other", WorkingDir: "/tmp"}))
			},
			want: recorded{Method: "POST", Path: "/api/v1/sandboxes/sb%2F1/contexts", ContentType: "application/json",
				Body: `{"working_dir":"/tmp"}`},
			out: pyContext,
		},
		{
			name:  "list everything",
			reply: jsonReply(`{"items":[` + contextJSON + `],"contexts":[` + contextJSON + `],"total":1}`),
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return handlesOf(c.Contexts().List(ctx, client.ListContextsOptions{}))
			},
			want: recorded{Method: "GET", Path: "/api/v1/contexts"},
			out:  []api.Context{pyContext},
		},
		{
			name:  "list filtered",
			reply: jsonReply(`{"items":[],"contexts":[],"total":0}`),
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return handlesOf(c.Contexts().List(ctx, client.ListContextsOptions{SessionName: "a b", SandboxID: "sb1", Order: api.OrderDesc}))
			},
			want: recorded{Method: "GET", Path: "/api/v1/contexts", Query: "order=desc&sandbox_id=sb1&session_name=a+b"},
			out:  []api.Context{},
		},
		{
			name:  "list a page",
			reply: jsonReply(`{"items":[` + contextJSON + `],"contexts":[` + contextJSON + `],"total":1,"next_cursor":"c2"}`),
			call: func(ctx context.Context, c *client.Client) (any, error) {
				p, err := c.Contexts().ListPage(ctx, client.ListContextsOptions{Limit: 1, Cursor: "c1", Order: api.OrderDesc})
				if err != nil {
					return nil, err
				}
				items, _ := handlesOf(p.Items, nil)
				return []any{items, p.NextCursor}, nil
			},
			want: recorded{Method: "GET", Path: "/api/v1/contexts", Query: "cursor=c1&limit=1&order=desc"},
			out:  []any{[]api.Context{pyContext}, "c2"},
		},
		{
			name:  "list of seed 001's service",
			reply: jsonReply(`{"contexts":[` + contextJSON + `],"total":1}`),
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return handlesOf(c.Contexts().List(ctx, client.ListContextsOptions{}))
			},
			want: recorded{Method: "GET", Path: "/api/v1/contexts"},
			out:  []api.Context{pyContext},
		},
		{
			name:  "get escapes the id",
			reply: jsonReply(contextJSON),
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return handleOf(c.Contexts().Get(ctx, "a/b?"))
			},
			want: recorded{Method: "GET", Path: "/api/v1/contexts/a%2Fb%3F"},
			out:  pyContext,
		},
		{
			name:  "delete",
			reply: jsonReply(`{"context_id":"ctx-1","status":"deleted","message":"Context ctx-1 deleted"}`),
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return nil, c.Contexts().Delete(ctx, "ctx-1")
			},
			want: recorded{Method: "DELETE", Path: "/api/v1/contexts/ctx-1"},
		},
		{
			name: "execute",
			reply: jsonReply(`{"output":{"stdout":"hi\n","stderr":""},"success":true,"execution_time":0.25,` +
				`"context_id":"ctx-1","execution_count":3,"result":"42","results":[{"text":"42","is_main_result":true}]}`),
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.Contexts().Execute(ctx, "ctx-1", api.ExecuteRequest{Code: "print('hi')\n6*7", Timeout: 5})
			},
			want: recorded{Method: "POST", Path: "/api/v1/contexts/ctx-1/execute", ContentType: "application/json",
				Body: `{"code":"print('hi')\n6*7","timeout":5}`},
			out: &api.ExecuteResponse{Output: api.ExecutionOutput{Stdout: "hi\n"}, Success: true, ExecutionTime: 0.25,
				ContextID: "ctx-1", ExecutionCount: 3, Result: "42", Results: []api.ExecutionResult{{Text: "42", IsMainResult: true}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, rec := fakeDaemon(t, tt.reply)
			out, err := tt.call(t.Context(), c)
			if err != nil {
				t.Fatal(err)
			}
			tt.want.Auth = "Bearer secret"
			if diff := cmp.Diff(tt.want, *rec); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.out, out); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}

// TestContextHandle checks that a handle acts on its own context, sends
// options as the wire wants them and marshals as the context.
func TestContextHandle(t *testing.T) {
	var bodies []string
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		paths = append(paths, r.Method+" "+r.URL.EscapedPath())
		bodies = append(bodies, string(b))
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet:
			io.WriteString(w, contextJSON)
		case r.Method == http.MethodDelete:
			io.WriteString(w, `{"context_id":"ctx-1","status":"deleted"}`)
		default:
			io.WriteString(w, `{"output":{"stdout":"","stderr":""},"success":true,"context_id":"ctx-1"}`)
		}
	}))
	defer srv.Close()
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	cx := handle(t, c)
	for _, opts := range [][]client.RunOption{
		nil,
		{client.WithRunTimeout(90 * time.Second)},
		{client.WithRunTimeout(1500 * time.Millisecond)},
		{client.WithRunTimeout(time.Minute), client.WithRunTimeout(0)}, // the last one wins
		{client.WithRunTimeout(-time.Second)},
	} {
		if _, err := cx.Run(t.Context(), "1", opts...); err != nil {
			t.Fatal(err)
		}
	}
	if err := cx.Delete(t.Context()); err != nil {
		t.Fatal(err)
	}
	wantPaths := []string{"GET /api/v1/contexts/ctx-1"}
	for range 5 {
		wantPaths = append(wantPaths, "POST /api/v1/contexts/ctx-1/execute")
	}
	wantPaths = append(wantPaths, "DELETE /api/v1/contexts/ctx-1")
	if diff := cmp.Diff(wantPaths, paths); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	wantBodies := []string{"", `{"code":"1"}`, `{"code":"1","timeout":90}`, `{"code":"1","timeout":1.5}`,
		`{"code":"1"}`, `{"code":"1"}`, ""}
	if diff := cmp.Diff(wantBodies, bodies); diff != "" {
		t.Errorf("request bodies (-want +got):\n%s", diff)
	}
	b, err := json.Marshal(cx)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(pyContext)
	if string(b) != string(want) {
		t.Errorf("handle marshals as\n%s\nwant\n%s", b, want)
	}
}

func TestRunFailure(t *testing.T) {
	// The code failed: a response, not an error.
	c, _ := fakeDaemon(t, jsonReply(`{"output":{"stdout":"","stderr":""},"success":false,"context_id":"ctx-1",`+
		`"error":{"name":"ZeroDivisionError","value":"division by zero","traceback":"Traceback...","kind":"runtime"}}`))
	res, err := c.Contexts().Execute(t.Context(), "ctx-1", api.ExecuteRequest{Code: "1/0"})
	if err != nil {
		t.Fatalf("a failed execution is an error: %v", err)
	}
	want := &api.ExecuteResponse{ContextID: "ctx-1", Error: &api.ExecutionError{Name: "ZeroDivisionError",
		Value: "division by zero", Traceback: "Traceback...", Kind: api.ErrorKindRuntime}}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
}

func TestContextNotFound(t *testing.T) {
	notFound := `{"error":"context ctx-1 not found","code":"CONTEXT_NOT_FOUND"}`
	calls := map[string]func(c *client.Client) error{
		"get": func(c *client.Client) error { _, err := c.Contexts().Get(t.Context(), "ctx-1"); return err },
		"run": func(c *client.Client) error {
			_, err := c.Contexts().Execute(t.Context(), "ctx-1", api.ExecuteRequest{Code: "1"})
			return err
		},
		"stream": func(c *client.Client) error {
			_, err := c.Contexts().ExecuteStream(t.Context(), "ctx-1", api.ExecuteRequest{Code: "1"}, client.StreamHandler{})
			return err
		},
		"delete": func(c *client.Client) error { return c.Contexts().Delete(t.Context(), "ctx-1") },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			c, _ := fakeDaemon(t, reply{status: http.StatusNotFound, contentType: "application/json", body: notFound})
			err := call(c)
			var apiErr *client.APIError
			if !errors.As(err, &apiErr) || apiErr.Code != api.CodeContextNotFound {
				t.Fatalf("err %v, want an *APIError with code %s", err, api.CodeContextNotFound)
			}
			checkClass(t, err, client.ErrNotFound)
			if !strings.Contains(err.Error(), "context ctx-1") {
				t.Errorf("error %q does not name the context", err)
			}
		})
	}
}

// streamCall is what one streamed execution reported and returned.
type streamCall struct {
	Events []string // "stdout:text", "result:text", "error:name", ...
	Res    *api.ExecuteResponse
}

// recordStream runs a streamed execution and records the callbacks.
func recordStream(t *testing.T, c *client.Client, opts ...client.RunOption) (streamCall, error) {
	t.Helper()
	var got streamCall
	h := client.StreamHandler{
		OnStdout: func(s string) { got.Events = append(got.Events, "stdout:"+s) },
		OnStderr: func(s string) { got.Events = append(got.Events, "stderr:"+s) },
		OnResult: func(r api.ExecutionResult) { got.Events = append(got.Events, "result:"+r.Text) },
		OnError:  func(e api.ExecutionError) { got.Events = append(got.Events, "error:"+e.Name) },
	}
	req := api.ExecuteRequest{Code: "code"}
	for _, o := range opts {
		o(&req)
	}
	res, err := c.Contexts().ExecuteStream(t.Context(), "ctx-1", req, h)
	got.Res = res
	return got, err
}

func TestRunStream(t *testing.T) {
	tests := []struct {
		name   string
		stream string
		want   streamCall
	}{
		{
			name: "success",
			stream: "event: stdout\ndata: {\"text\":\"a\\n\"}\n\n" +
				": keep-alive\n\n" +
				"event: stderr\ndata: {\"text\":\"warn\\n\"}\n\n" +
				"event: result\ndata: {\"text\":\"<Figure>\",\"png\":\"iVBORw0K\"}\n\n" +
				"event: stdout\ndata: {\"text\":\"b\\n\"}\n\n" +
				"event: progress\ndata: {}\n\n" + // unknown: skipped
				"event: result\ndata: {\"text\":\"42\",\"is_main_result\":true}\n\n" +
				"event: complete\ndata: {\"output\":{\"stdout\":\"\",\"stderr\":\"\"},\"success\":true,\"execution_time\":0.5," +
				"\"context_id\":\"ctx-1\",\"execution_count\":4,\"result\":\"42\"," +
				"\"results\":[{\"text\":\"<Figure>\",\"png\":\"iVBORw0K\"},{\"text\":\"42\",\"is_main_result\":true}]}\n\n",
			want: streamCall{
				Events: []string{"stdout:a\n", "stderr:warn\n", "result:<Figure>", "stdout:b\n", "result:42"},
				Res: &api.ExecuteResponse{Output: api.ExecutionOutput{Stdout: "a\nb\n", Stderr: "warn\n"}, Success: true,
					ExecutionTime: 0.5, ContextID: "ctx-1", ExecutionCount: 4, Result: "42",
					Results: []api.ExecutionResult{{Text: "<Figure>", PNG: "iVBORw0K"}, {Text: "42", IsMainResult: true}}},
			},
		},
		{
			name: "code failed",
			stream: "event: stdout\ndata: {\"text\":\"before\\n\"}\n\n" +
				"event: error\ndata: {\"name\":\"ZeroDivisionError\",\"value\":\"division by zero\",\"traceback\":\"tb\",\"kind\":\"runtime\"}\n\n" +
				"event: complete\ndata: {\"output\":{\"stdout\":\"\",\"stderr\":\"\"},\"success\":false,\"context_id\":\"ctx-1\"," +
				"\"error\":{\"name\":\"ZeroDivisionError\",\"value\":\"division by zero\",\"traceback\":\"tb\",\"kind\":\"runtime\"}}\n\n",
			want: streamCall{
				Events: []string{"stdout:before\n", "error:ZeroDivisionError"},
				Res: &api.ExecuteResponse{Output: api.ExecutionOutput{Stdout: "before\n"}, ContextID: "ctx-1",
					Error: &api.ExecutionError{Name: "ZeroDivisionError", Value: "division by zero", Traceback: "tb", Kind: api.ErrorKindRuntime}},
			},
		},
		{
			name: "terse complete event",
			stream: "event: result\ndata: {\"text\":\"1\",\"is_main_result\":true}\n\n" +
				"event: error\ndata: {\"name\":\"TimeoutError\",\"value\":\"timed out\",\"kind\":\"system\"}\n\n" +
				"event: complete\ndata: {\"success\":false,\"state_lost\":true}\n\n",
			want: streamCall{
				Events: []string{"result:1", "error:TimeoutError"},
				Res: &api.ExecuteResponse{StateLost: true, Results: []api.ExecutionResult{{Text: "1", IsMainResult: true}},
					Error: &api.ExecutionError{Name: api.ErrorNameTimeout, Value: "timed out", Kind: api.ErrorKindSystem}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, rec := fakeDaemon(t, sseReply(tt.stream))
			got, err := recordStream(t, c, client.WithRunTimeout(2*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("stream (-want +got):\n%s", diff)
			}
			want := recorded{Method: "POST", Path: "/api/v1/contexts/ctx-1/execute/stream", ContentType: "application/json",
				Auth: "Bearer secret", Body: `{"code":"code","timeout":2}`}
			if diff := cmp.Diff(want, *rec); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRunStreamErrors(t *testing.T) {
	tests := []struct {
		name   string
		stream string
		events []string
		want   *client.APIError // nil: any error that is not an *APIError
		class  error
	}{
		{
			name: "request failed midway",
			stream: "event: stdout\ndata: {\"text\":\"x\"}\n\n" +
				"event: error\ndata: {\"error\":\"sandbox sb1 is gone\",\"code\":\"SANDBOX_NOT_FOUND\"}\n\n",
			events: []string{"stdout:x"},
			want:   &client.APIError{StatusCode: http.StatusNotFound, Code: api.CodeSandboxNotFound, Message: "sandbox sb1 is gone"},
			class:  client.ErrNotFound,
		},
		{
			name:   "context deleted midway",
			stream: "event: error\ndata: {\"error\":\"context ctx-1 not found\",\"code\":\"CONTEXT_NOT_FOUND\"}\n\n",
			want:   &client.APIError{StatusCode: http.StatusNotFound, Code: api.CodeContextNotFound, Message: "context ctx-1 not found"},
			class:  client.ErrNotFound,
		},
		{
			name:   "unknown code",
			stream: "event: error\ndata: {\"error\":\"odd\",\"code\":\"ODD\"}\n\n",
			want:   &client.APIError{Code: "ODD", Message: "odd"},
		},
		{
			name: "cut before complete",
			stream: "event: stdout\ndata: {\"text\":\"x\"}\n\n" +
				"event: error\ndata: {\"name\":\"KernelDied\",\"value\":\"\",\"kind\":\"system\"}\n\n" +
				"event: complete\ndata: {\"success\":false}\n", // no closing blank line
			events: []string{"stdout:x", "error:KernelDied"},
		},
		{
			name:   "empty stream",
			stream: "",
		},
		{
			name:   "malformed chunk",
			stream: "event: stdout\ndata: nope\n\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := fakeDaemon(t, sseReply(tt.stream))
			got, err := recordStream(t, c)
			if err == nil {
				t.Fatalf("succeeded with %+v", got.Res)
			}
			if diff := cmp.Diff(tt.events, got.Events); diff != "" {
				t.Errorf("callbacks (-want +got):\n%s", diff)
			}
			var apiErr *client.APIError
			if tt.want == nil {
				if errors.As(err, &apiErr) {
					t.Errorf("err %v is an *APIError", err)
				}
				return
			}
			if !errors.As(err, &apiErr) {
				t.Fatalf("err %v is not an *APIError", err)
			}
			if diff := cmp.Diff(tt.want, apiErr); diff != "" {
				t.Errorf("APIError (-want +got):\n%s", diff)
			}
			checkClass(t, err, tt.class)
		})
	}
}

// TestRunStreamIsLive checks callbacks run while the code still runs.
func TestRunStreamIsLive(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		io.WriteString(w, "event: stdout\ndata: {\"text\":\"first\"}\n\n")
		rc.Flush()
		select {
		case <-got:
		case <-time.After(10 * time.Second):
			t.Error("the client did not hand over the first chunk before the execution ended")
		}
		io.WriteString(w, "event: complete\ndata: {\"success\":true}\n\n")
	}))
	defer srv.Close()
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Contexts().ExecuteStream(t.Context(), "ctx-1", api.ExecuteRequest{Code: "x"},
		client.StreamHandler{OnStdout: func(s string) { got <- s }})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Success || res.Output.Stdout != "first" {
		t.Errorf("response %+v", res)
	}
}

func TestContextEmptyIDs(t *testing.T) {
	c, err := client.New("http://daemon.invalid")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	calls := map[string]func() error{
		"create in": func() error { _, err := c.Contexts().CreateIn(ctx, "", api.CreateContextRequest{}); return err },
		"get":       func() error { _, err := c.Contexts().Get(ctx, ""); return err },
		"delete":    func() error { return c.Contexts().Delete(ctx, "") },
		"execute":   func() error { _, err := c.Contexts().Execute(ctx, "", api.ExecuteRequest{}); return err },
		"stream": func() error {
			_, err := c.Contexts().ExecuteStream(ctx, "", api.ExecuteRequest{}, client.StreamHandler{})
			return err
		},
	}
	for name, call := range calls {
		if err := call(); err == nil || errors.Is(err, client.ErrNotFound) {
			t.Errorf("%s: err %v, want a local error", name, err)
		}
	}
}
