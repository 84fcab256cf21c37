package mcpserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/contexts"
	"github.com/agent2env/agent2env/internal/contexts/contextstest"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/outbuf"
	"github.com/agent2env/agent2env/internal/service"
	"github.com/agent2env/agent2env/internal/session"
	"github.com/agent2env/agent2env/internal/store"
)

// These tests drive the server with the Go SDK's client over its real
// transports, above real services (package contextstest's fake runtime
// runs the host's interpreters). Nothing here may start processes with
// os/exec: the in-process agents' reaper waits for every child.

var bg = context.Background()

// env is the MCP server over HTTP, with API keys on when keyed.
type env struct {
	*contextstest.Env
	srv *Server
	url string
}

func newEnv(t *testing.T, keyed bool) *env {
	t.Helper()
	return newEnvConfig(t, keyed, manager.Config{Host: manager.Host{MilliCPU: 64000, MemoryBytes: 256 << 30}})
}

// newEnvConfig is newEnv with the manager's configuration.
func newEnvConfig(t *testing.T, keyed bool, cfg manager.Config) *env {
	t.Helper()
	ce := contextstest.NewEnv(t, cfg, nil)
	log := slog.New(slog.DiscardHandler)
	ctxs := contexts.New(contexts.Config{ReadyTimeout: 10 * time.Second}, ce.M, ce.St, nil, log)
	sess, err := session.New(session.Config{}, ce.M, ce.St, ctxs, log)
	if err != nil {
		t.Fatal(err)
	}
	ctxs.SetSessions(sess)
	srv := New(Config{ScopeByKey: keyed, Log: log}, service.NewContexts(ctxs), sess)
	mux := http.NewServeMux()
	srv.Register(mux)
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return &env{Env: ce, srv: srv, url: ts.URL}
}

// connect returns a client session to the server, sending key as the
// bearer token when not empty.
func (e *env) connect(t *testing.T, key string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	c, err := client.New(e.url, client.WithToken(key))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, opts).Connect(bg,
		&mcp.StreamableClientTransport{Endpoint: c.URL("/mcp"), HTTPClient: c.HTTPClient(), DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callTool calls a tool and decodes its JSON text into out (when not nil).
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, out any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(bg, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s %v: %v", name, args, err)
	}
	if out != nil {
		if err := json.Unmarshal([]byte(text(t, res)), out); err != nil {
			t.Fatalf("%s: result %q: %v", name, text(t, res), err)
		}
	}
	if !res.IsError {
		checkOutput(t, cs, name, res)
	}
	return res
}

// outputSchemas caches the tools' output schemas, by client session.
var outputSchemas sync.Map // *mcp.ClientSession -> map[string]*jsonschema.Resolved

// checkOutput validates a result's structured content against the tool's
// output schema, as strict clients (Python's) do.
func checkOutput(t *testing.T, cs *mcp.ClientSession, name string, res *mcp.CallToolResult) {
	t.Helper()
	v, ok := outputSchemas.Load(cs)
	if !ok {
		m := map[string]*jsonschema.Resolved{}
		for tool, err := range cs.Tools(bg, nil) {
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(tool.OutputSchema)
			var s jsonschema.Schema
			if err := json.Unmarshal(b, &s); err != nil {
				t.Fatalf("output schema of %s: %v", tool.Name, err)
			}
			r, err := s.Resolve(nil)
			if err != nil {
				t.Fatalf("output schema of %s: %v", tool.Name, err)
			}
			m[tool.Name] = r
		}
		v, _ = outputSchemas.LoadOrStore(cs, m)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var instance any
	json.Unmarshal(b, &instance)
	if err := v.(map[string]*jsonschema.Resolved)[name].Validate(instance); err != nil {
		t.Errorf("%s: structured content %s does not match the output schema: %v", name, b, err)
	}
}

func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) == 0 {
		t.Fatal("no content")
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("first content is %T", res.Content[0])
	}
	return tc.Text
}

// toolError checks that res is a tool error with code, and returns it.
func toolError(t *testing.T, res *mcp.CallToolResult, code string) ToolError {
	t.Helper()
	var te ToolError
	if !res.IsError || json.Unmarshal([]byte(text(t, res)), &te) != nil || te.Code != code || te.Error == "" || te.Suggestion == "" {
		t.Errorf("result %v %s, want a tool error %s with a message and a suggestion", res.IsError, text(t, res), code)
	}
	return te
}

func TestTools(t *testing.T) {
	e := newEnv(t, false)
	cs := e.connect(t, "", nil)
	var names []string
	for tool, err := range cs.Tools(bg, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
		if tool.OutputSchema == nil || tool.InputSchema == nil || tool.Description == "" {
			t.Errorf("tool %s lacks a schema or a description", tool.Name)
		}
	}
	want := []string{"create_context", "execute_code", "execute_command", "get_session_info", "get_stats", "list_contexts",
		"list_files", "list_sessions", "read_file", "run_code", "stop_context", "stop_session", "write_file"}
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Errorf("tools %v, want %v", names, want)
	}
}

// TestSeed004Flow is seed 004's test flow, word for word, with its result
// shapes and error codes.
func TestSeed004Flow(t *testing.T) {
	e := newEnv(t, false)
	cs := e.connect(t, "", nil)
	var created map[string]any
	callTool(t, cs, "create_context", map[string]any{"name": "test", "language": "python"}, &created)
	id, _ := created["context_id"].(string)
	if !strings.HasPrefix(id, "ctx-") || created["name"] != "test" || created["language"] != "python" || created["description"] != "" ||
		created["status"] != "active" || created["message"] != "Python context created successfully" || created["created_at"] == nil ||
		len(created) != 7 {
		t.Fatalf("create_context: %v", created)
	}
	var run map[string]any
	res := callTool(t, cs, "run_code", map[string]any{"code": "x = 100\nprint(x)", "context_id": id}, &run)
	if res.IsError || run["stdout"] != "100\n" || run["stderr"] != "" || run["success"] != true || run["execution_time"] == nil || len(run) != 4 {
		t.Fatalf("run_code: %v", run)
	}
	if sc, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(sc), `"stdout":"100\n"`) {
		t.Errorf("structured content %s", sc)
	}
	callTool(t, cs, "run_code", map[string]any{"code": "print(x + 1)", "context_id": id}, &run)
	if run["stdout"] != "101\n" {
		t.Errorf("state kept: %v", run)
	}
	callTool(t, cs, "run_code", map[string]any{"code": "1/0", "context_id": id}, &run)
	if run["success"] != false || !strings.Contains(run["stderr"].(string), "ZeroDivisionError") {
		t.Errorf("a failing run: %v", run)
	}
	var list struct {
		Contexts []map[string]any `json:"contexts"`
		Total    int              `json:"total"`
	}
	callTool(t, cs, "list_contexts", nil, &list)
	if list.Total != 1 || len(list.Contexts) != 1 || list.Contexts[0]["context_id"] != id || list.Contexts[0]["name"] != "test" ||
		list.Contexts[0]["last_used"] == nil || len(list.Contexts[0]) != 7 {
		t.Errorf("list_contexts: %+v", list)
	}
	var stopped map[string]any
	callTool(t, cs, "stop_context", map[string]any{"context_id": id}, &stopped)
	if stopped["context_id"] != id || stopped["status"] != "stopped" || stopped["message"] != "Context stopped successfully" {
		t.Errorf("stop_context: %v", stopped)
	}
	toolError(t, callTool(t, cs, "run_code", map[string]any{"code": "print(x)", "context_id": id}, nil), CodeContextNotFound)
	callTool(t, cs, "list_contexts", nil, &list)
	if list.Total != 0 || len(list.Contexts) != 0 {
		t.Errorf("list_contexts after stop: %+v", list)
	}
	if ids := e.Sandboxes(t); len(ids) != 0 {
		t.Errorf("sandboxes left: %v", ids)
	}

	var js map[string]any
	callTool(t, cs, "create_context", map[string]any{"name": "j", "language": "javascript", "description": "d"}, &js)
	if js["message"] != "JavaScript context created successfully" || js["description"] != "d" {
		t.Errorf("javascript: %v", js)
	}
	callTool(t, cs, "run_code", map[string]any{"code": "let y = 2; console.log(y * 21)", "context_id": js["context_id"]}, &run)
	if run["stdout"] != "42\n" {
		t.Errorf("javascript run: %v", run)
	}
}

func TestBadArguments(t *testing.T) {
	e := newEnv(t, false)
	cs := e.connect(t, "", nil)
	for _, tt := range []struct {
		tool string
		args map[string]any
		code string
	}{
		{"create_context", map[string]any{"name": "r", "language": "ruby"}, CodeInvalidLanguage},
		{"create_context", map[string]any{"language": "python"}, CodeInvalidParams},
		{"create_context", map[string]any{"name": ""}, CodeInvalidParams},
		{"create_context", map[string]any{"name": 5}, CodeInvalidParams},
		{"run_code", map[string]any{"code": "1"}, CodeInvalidParams},
		{"run_code", map[string]any{"context_id": "ctx-x"}, CodeInvalidParams},
		{"run_code", map[string]any{"code": 1, "context_id": "ctx-x"}, CodeInvalidParams},
		{"run_code", map[string]any{"code": "1", "context_id": "ctx-none"}, CodeContextNotFound},
		{"stop_context", map[string]any{"context_id": "ctx-none"}, CodeContextNotFound},
		{"stop_context", map[string]any{}, CodeInvalidParams},
		{"execute_code", map[string]any{"code": "1", "language": "cobol"}, CodeInvalidLanguage},
		{"execute_code", map[string]any{"code": "1", "timeout": "soon"}, CodeInvalidParams},
		{"execute_code", map[string]any{"code": "1", "session_id": "a/b"}, CodeInvalidParams},
		{"execute_code", map[string]any{"code": "1", "flavor": "xl"}, CodeInvalidParams},
		{"execute_command", map[string]any{}, CodeInvalidParams},
		{"execute_command", map[string]any{"command": "true", "cwd": "../etc"}, CodeInvalidParams},
		// Refused by the sandbox, after the session was made for it: the
		// session goes again, and the server stays up.
		{"execute_command", map[string]any{"command": "true", "cwd": "/nonexistent", "session_id": "c"}, CodeInvalidParams},
		{"write_file", map[string]any{"path": "a", "content": "x", "encoding": "rot13", "session_id": "s"}, CodeInvalidParams},
		{"write_file", map[string]any{"path": "a", "content": "!!", "encoding": "base64", "session_id": "s"}, CodeInvalidParams},
		{"read_file", map[string]any{"path": "a"}, CodeInvalidParams},
		{"read_file", map[string]any{"path": "a", "session_id": "nosuch"}, CodeSessionNotFound},
		{"list_files", map[string]any{"session_id": "nosuch"}, CodeSessionNotFound},
		{"get_session_info", map[string]any{"session_id": "nosuch"}, CodeSessionNotFound},
		{"stop_session", map[string]any{"session_id": "nosuch"}, CodeSessionNotFound},
	} {
		t.Run(tt.tool, func(t *testing.T) {
			toolError(t, callTool(t, cs, tt.tool, tt.args, nil), tt.code)
		})
	}
	if ids := e.Sandboxes(t); len(ids) != 0 {
		t.Errorf("bad arguments made sandboxes: %v", ids)
	}
}

// TestHandlerPanic: a handler that panics is answered with a JSON-RPC
// internal error, and the server goes on serving.
func TestHandlerPanic(t *testing.T) {
	e := newEnv(t, false)
	add(e.srv, tool[NoArgs, NoArgs]{name: "panics", title: "Panics",
		handle: func(context.Context, *call, NoArgs) (NoArgs, []mcp.Content, error) { panic("boom") }})
	cs := e.connect(t, "", nil)
	_, err := cs.CallTool(bg, &mcp.CallToolParams{Name: "panics"})
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInternalError {
		t.Fatalf("call of a tool that panics: %v, want a JSON-RPC internal error", err)
	}
	callTool(t, cs, "list_contexts", nil, nil)
}

// TestResourceErrors: past the host's capacity or the maximum of
// sandboxes, session and context tools are tool errors INSUFFICIENT_CAPACITY
// and RESOURCE_LIMIT carrying the usage and a suggestion; nothing is made.
func TestResourceErrors(t *testing.T) {
	e := newEnvConfig(t, false, manager.Config{MaxSandboxes: 2,
		Host: manager.Host{MilliCPU: 2000, MemoryBytes: 8 << 30}, CPUOvercommit: 1, MemoryOvercommit: 1})
	cs := e.connect(t, "", nil)
	callTool(t, cs, "execute_code", map[string]any{"code": "1", "session_id": "a"}, nil)
	check := func(res *mcp.CallToolResult, code, suggestion string, sandboxes int, milliCPU int64) {
		t.Helper()
		te := toolError(t, res, code)
		if !strings.Contains(te.Suggestion, suggestion) || te.Usage == nil || te.Usage.Sandboxes != sandboxes ||
			te.Usage.MilliCPU != milliCPU || te.Usage.MilliCPUCapacity != 2000 || te.Usage.Sessions != 1 {
			t.Errorf("tool error %+v (usage %+v): want a suggestion saying %q, %d sandboxes, %dm cpu of 2000m, 1 session",
				te, te.Usage, suggestion, sandboxes, milliCPU)
		}
		if ids := e.Sandboxes(t); len(ids) != sandboxes {
			t.Errorf("sandboxes %v, want %d", ids, sandboxes)
		}
	}
	check(callTool(t, cs, "execute_code", map[string]any{"code": "1", "session_id": "b", "flavor": "medium"}, nil),
		CodeNoCapacity, "use flavor small", 1, 1000)
	callTool(t, cs, "create_context", map[string]any{"name": "c1", "language": "python"}, nil)
	check(callTool(t, cs, "execute_command", map[string]any{"command": "true", "session_id": "b"}, nil),
		CodeResourceLimit, "--max-sandboxes", 2, 2000)
	res := callTool(t, cs, "create_context", map[string]any{"name": "c2", "language": "python"}, nil)
	if te := toolError(t, res, CodeResourceLimit); te.Usage == nil || !strings.Contains(te.Suggestion, "--max-sandboxes") {
		t.Errorf("create_context at the maximum: %+v", te)
	}
}

// pngFigure displays a tiny PNG, as a matplotlib figure would.
const pngFigure = `class Figure:
    def _repr_png_(self):
        return bytes.fromhex('89504e470d0a1a0a')
display(Figure())
print('drawn')`

func TestSessionTools(t *testing.T) {
	e := newEnv(t, false)
	cs := e.connect(t, "", nil)
	var first ExecuteCodeResult
	callTool(t, cs, "execute_code", map[string]any{"code": "v = 7\nprint(v)"}, &first)
	if !first.Created || first.SessionID == "" || first.Stdout != "7\n" || !first.Success || first.ExpiresAt.IsZero() {
		t.Fatalf("new session: %+v", first)
	}
	var again ExecuteCodeResult
	callTool(t, cs, "execute_code", map[string]any{"code": "v * 6", "session_id": first.SessionID}, &again)
	if again.Created || again.Result != "42" {
		t.Errorf("reused session: %+v", again)
	}
	// A figure comes back as an image.
	res := callTool(t, cs, "execute_code", map[string]any{"code": pngFigure, "session_id": first.SessionID}, nil)
	var img *mcp.ImageContent
	for _, c := range res.Content {
		if ic, ok := c.(*mcp.ImageContent); ok {
			img = ic
		}
	}
	if img == nil || img.MIMEType != "image/png" || string(img.Data[1:4]) != "PNG" {
		t.Errorf("figure: %+v", res.Content)
	}
	// A failed execution is a tool error with the error's name, value and
	// traceback, and the output.
	var failed ExecuteCodeResult
	res = callTool(t, cs, "execute_code", map[string]any{"code": "print('before')\nraise ValueError('bad value')", "session_id": first.SessionID}, &failed)
	if !res.IsError || failed.Success || failed.Error == nil || failed.Error.Name != "ValueError" || failed.Error.Value != "bad value" ||
		!strings.Contains(failed.Error.Traceback, "ValueError") || failed.Stdout != "before\n" {
		t.Errorf("failed execution: %v %+v", res.IsError, failed)
	}
	var cmd api.SessionCommandResponse
	callTool(t, cs, "execute_command", map[string]any{"command": "echo $((6 * 7)); exit 3", "session_id": first.SessionID}, &cmd)
	if cmd.ExitCode != 3 || cmd.Stdout != "42\n" || cmd.Created {
		t.Errorf("command: %+v", cmd)
	}

	// Files, and a file as a resource.
	var fr FileResult
	callTool(t, cs, "write_file", map[string]any{"path": "data/a.txt", "content": "hello", "session_id": first.SessionID}, &fr)
	if fr.Path != "/workspace/data/a.txt" || fr.Size != 5 {
		t.Errorf("write_file: %+v", fr)
	}
	callTool(t, cs, "write_file", map[string]any{"path": "/tmp/b.bin", "content": "AP8=", "encoding": "base64", "session_id": first.SessionID}, nil)
	callTool(t, cs, "read_file", map[string]any{"path": "data/a.txt", "session_id": first.SessionID}, &fr)
	if fr.Content != "hello" || fr.Encoding != "text" {
		t.Errorf("read_file: %+v", fr)
	}
	callTool(t, cs, "read_file", map[string]any{"path": "/tmp/b.bin", "session_id": first.SessionID}, &fr)
	if fr.Content != "AP8=" || fr.Encoding != "base64" {
		t.Errorf("read_file of binary: %+v", fr)
	}
	var lf ListFilesResult
	callTool(t, cs, "list_files", map[string]any{"session_id": first.SessionID}, &lf)
	if lf.Path != "/workspace" || len(lf.Files) != 1 || lf.Files[0].Name != "data" || !lf.Files[0].IsDir {
		t.Errorf("list_files: %+v", lf)
	}
	rr, err := cs.ReadResource(bg, &mcp.ReadResourceParams{URI: "sandbox://" + first.SessionID + "/files/workspace/data/a.txt"})
	if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "hello" || rr.Contents[0].MIMEType != "text/plain; charset=utf-8" {
		t.Errorf("read resource: %+v %v", rr, err)
	}
	for uri, code := range map[string]int64{
		"sandbox://nosuch/files/workspace/a.txt":                  mcp.CodeResourceNotFound,
		"sandbox://" + first.SessionID + "/files/workspace/none":  mcp.CodeResourceNotFound,
		"sandbox://" + first.SessionID + "/other/x":               mcp.CodeResourceNotFound,
		"sandbox://" + first.SessionID + "/files/workspace/data":  jsonrpc.CodeInvalidParams, // a directory
		"sandbox://" + first.SessionID + "/files/workspace/../..": jsonrpc.CodeInvalidParams,
	} {
		_, err := cs.ReadResource(bg, &mcp.ReadResourceParams{URI: uri})
		var we *jsonrpc.Error
		if !errors.As(err, &we) || we.Code != code {
			t.Errorf("read resource %s: %v, want JSON-RPC error %d", uri, err, code)
		}
	}

	var sessions ListSessionsResult
	callTool(t, cs, "list_sessions", nil, &sessions)
	if sessions.Total != 1 || sessions.Sessions[0].SessionID != first.SessionID || sessions.Sessions[0].ExecutionCount < 4 {
		t.Errorf("list_sessions: %+v", sessions)
	}
	var info map[string]any
	callTool(t, cs, "get_session_info", map[string]any{"session_id": first.SessionID}, &info)
	if info["flavor"] != "small" || info["sandbox_id"] == "" || info["languages"] == nil {
		t.Errorf("get_session_info: %v", info)
	}
	var bySandbox FileResult
	callTool(t, cs, "read_file", map[string]any{"path": "data/a.txt", "sandbox_id": info["sandbox_id"]}, &bySandbox)
	if bySandbox.Content != "hello" || bySandbox.SessionID != "" || bySandbox.ExpiresAt != nil {
		t.Errorf("read_file by sandbox: %+v", bySandbox)
	}
	var stats map[string]any
	callTool(t, cs, "get_stats", nil, &stats)
	if stats["sessions"] == nil || stats["executions"] == nil {
		t.Errorf("get_stats: %v", stats)
	}
	var stopped StopSessionResult
	callTool(t, cs, "stop_session", map[string]any{"session_id": first.SessionID}, &stopped)
	if stopped.Status != "stopped" || len(e.Sandboxes(t)) != 0 {
		t.Errorf("stop_session: %+v, sandboxes %v", stopped, e.Sandboxes(t))
	}
}

// TestProgressAndCancel: output comes as progress notifications while the
// code runs, and cancelling the call interrupts the code; the session and
// its state survive.
func TestProgressAndCancel(t *testing.T) {
	e := newEnv(t, false)
	progress := make(chan string, 100)
	cs := e.connect(t, "", &mcp.ClientOptions{ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
		progress <- req.Params.Message
	}})
	var first ExecuteCodeResult
	callTool(t, cs, "execute_code", map[string]any{"code": "kept = 1", "session_id": "p"}, &first)

	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	params := &mcp.CallToolParams{Name: "execute_code", Arguments: map[string]any{"session_id": "p", "timeout": 60,
		"code": "import time\nfor i in range(600):\n    print('tick', i, flush=True)\n    time.sleep(0.1)"}}
	params.SetProgressToken("tok-1")
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := cs.CallTool(ctx, params)
		done <- err
	}()
	var seen string
	for !strings.Contains(seen, "tick 0\n") {
		select {
		case msg := <-progress:
			seen += msg
		case <-time.After(20 * time.Second):
			t.Fatalf("no progress while the code ran (%q)", seen)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Error("the cancelled call succeeded")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the cancelled call did not return")
	}
	// The daemon interrupted the code: the session is free within the
	// interrupt grace, long before the loop's 60 seconds.
	var after ExecuteCodeResult
	callTool(t, cs, "execute_code", map[string]any{"code": "kept + i", "session_id": "p"}, &after)
	if after.Created || !after.Success || time.Since(start) > 30*time.Second {
		t.Errorf("after the cancellation (%v): %+v", time.Since(start), after)
	}
}

// TestKeyedTenants: with keys on, each key reaches its own sessions and
// contexts only.
func TestKeyedTenants(t *testing.T) {
	e := newEnv(t, true)
	a, b := e.connect(t, "key-aaaaaaaaaaaaaaaa", nil), e.connect(t, "key-bbbbbbbbbbbbbbbb", nil)
	var ra, rb ExecuteCodeResult
	callTool(t, a, "execute_code", map[string]any{"code": "secret = 1", "session_id": "shared-name"}, &ra)
	callTool(t, b, "execute_code", map[string]any{"code": "'secret' in globals()", "session_id": "shared-name"}, &rb)
	if !ra.Created || !rb.Created || rb.Result != "False" {
		t.Errorf("key b reached key a's session: %+v %+v", ra, rb)
	}
	var created map[string]any
	callTool(t, a, "create_context", map[string]any{"name": "a's"}, &created)
	var list ListContextsResult
	callTool(t, b, "list_contexts", nil, &list)
	for _, c := range list.Contexts {
		if c.ContextID == created["context_id"] {
			t.Error("key b lists key a's context")
		}
	}
	toolError(t, callTool(t, b, "run_code", map[string]any{"code": "1", "context_id": created["context_id"]}, nil), CodeContextNotFound)
	if got := auth.Tenant("key-aaaaaaaaaaaaaaaa"); e.record(t, got, "shared-name") == "" {
		t.Error("no session of key a's tenant")
	}
}

func (e *env) record(t *testing.T, tenant, id string) string {
	t.Helper()
	s, err := e.St.GetSession(bg, tenant+"/"+id)
	if err != nil {
		t.Fatal(err)
	}
	return s.SandboxID
}

// TestBridge runs the stdio bridge over in-memory pipes against the HTTP
// server: the flow, progress and cancellation come through it.
func TestBridge(t *testing.T) {
	e := newEnv(t, false)
	c, err := client.New(e.url)
	if err != nil {
		t.Fatal(err)
	}
	serverT, clientT := mcp.NewInMemoryTransports()
	ctx, stop := context.WithCancel(bg)
	bridged := make(chan error, 1)
	go func() {
		bridged <- Bridge(ctx, c, serverT, BridgeOptions{DefaultTimeout: 45, Log: slog.New(slog.DiscardHandler)})
	}()
	defer func() {
		stop()
		if err := <-bridged; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("bridge: %v", err)
		}
	}()
	var mu sync.Mutex
	var messages []string
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			messages = append(messages, req.Params.Message)
			mu.Unlock()
		}}).Connect(bg, clientT, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var created CreateContextResult
	callTool(t, cs, "create_context", map[string]any{"name": "test"}, &created)
	var run RunCodeResult
	callTool(t, cs, "run_code", map[string]any{"code": "x = 100\nprint(x)", "context_id": created.ContextID}, &run)
	if run.Stdout != "100\n" || !run.Success {
		t.Errorf("run_code through the bridge: %+v", run)
	}
	toolError(t, callTool(t, cs, "run_code", map[string]any{"code": "1"}, nil), CodeInvalidParams)
	params := &mcp.CallToolParams{Name: "execute_code", Arguments: map[string]any{"code": "print('a', flush=True)\nprint('b')", "session_id": "bridged"}}
	params.SetProgressToken(7)
	res, err := cs.CallTool(bg, params)
	if err != nil || res.IsError {
		t.Fatalf("execute_code through the bridge: %+v %v", res, err)
	}
	// Notifications may be handled just after the result.
	deadline := time.Now().Add(5 * time.Second)
	var got string
	for time.Now().Before(deadline) && got != "a\nb\n" {
		time.Sleep(10 * time.Millisecond)
		mu.Lock()
		got = strings.Join(messages, "")
		mu.Unlock()
	}
	if got != "a\nb\n" {
		t.Errorf("progress through the bridge: %q", got)
	}
	rr, err := cs.ReadResource(bg, &mcp.ReadResourceParams{URI: "sandbox://bridged/files/etc/hostname"})
	if err != nil || len(rr.Contents) != 1 {
		t.Errorf("resource through the bridge: %+v %v", rr, err)
	}
}

// TestWithDefault: the bridge adds a default argument to arguments that
// are an object, none or null, and passes others on as they are for the
// daemon to refuse.
func TestWithDefault(t *testing.T) {
	for _, tt := range []struct{ raw, want string }{
		{"", `{"timeout":45}`},
		{"null", `{"timeout":45}`},
		{"{}", `{"timeout":45}`},
		{`{"code":"1"}`, `{"code":"1","timeout":45}`},
		{`{"timeout":2}`, `{"timeout":2}`},
		{`{"timeout":null}`, `{"timeout":null}`},
		{"[1]", "[1]"},
		{`"x"`, `"x"`},
		{"{", "{"},
	} {
		if got := string(withDefault(json.RawMessage(tt.raw), "timeout", 45.0)); got != tt.want {
			t.Errorf("withDefault(%q) = %s, want %s", tt.raw, got, tt.want)
		}
	}
}

// TestCancelledNotification: a client of protocol 2025-06-18 cancels a
// call with notifications/cancelled in a POST of its own, which the
// stateless server matches to the call by caller and id; a cancellation
// that matches two calls is ignored.
func TestCancelledNotification(t *testing.T) {
	e := newEnv(t, false)
	post := func(body string) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, e.url+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		return http.DefaultClient.Do(req)
	}
	// The session first, so that the long call below finds it.
	cs := e.connect(t, "", nil)
	callTool(t, cs, "execute_code", map[string]any{"code": "kept = 1", "session_id": "c"}, nil)
	done := make(chan string, 1)
	start := time.Now()
	go func() {
		resp, err := post(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"execute_code","arguments":` +
			`{"session_id":"c","timeout":60,"code":"import time\nfor i in range(600):\n    time.sleep(0.1)"}}}`)
		if err != nil {
			done <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- string(b)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !e.srv.calls.has(5) {
		if time.Now().After(deadline) {
			t.Fatal("the call never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // into the loop
	resp, err := post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"user"}}`)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the cancelled call did not end")
	}
	var after ExecuteCodeResult
	callTool(t, cs, "execute_code", map[string]any{"code": "kept + i", "session_id": "c"}, &after)
	if !after.Success || time.Since(start) > 30*time.Second {
		t.Errorf("after the cancellation (%v): %+v", time.Since(start), after)
	}

	var f inflight
	a, b := make(chan struct{}), make(chan struct{})
	k := callKey{"caller", "7"}
	f.add(k, a)
	f.add(k, b)
	if f.cancel(k) {
		t.Error("a cancellation matching two calls was applied")
	}
	f.remove(k, b)
	if !f.cancel(k) || !isClosed(a) || isClosed(b) {
		t.Error("the one call in flight was not cancelled")
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// has reports whether a call of any caller with JSON-RPC id id is in
// flight.
func (f *inflight) has(id int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k := range f.calls {
		if k.id == fmt.Sprint(id) {
			return true
		}
	}
	return false
}

// A page a browser loaded from another host cannot reach a loopback
// daemon's /mcp by DNS rebinding: the host must be a loopback one.
func TestDNSRebinding(t *testing.T) {
	e := newEnv(t, false)
	for host, want := range map[string]int{"evil.example:80": http.StatusForbidden, strings.TrimPrefix(e.url, "http://"): http.StatusOK} {
		req, _ := http.NewRequest(http.MethodPost, e.url+"/mcp",
			strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`))
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("host %s: %d, want %d", host, resp.StatusCode, want)
		}
	}
}

// A request past MaxRequestBytes is 413, and one that is not JSON 400,
// each with a JSON-RPC error (the SDK's own answer to the latter is
// text), as MCP clients parse every answer.
func TestRequestRefusedAsJSONRPC(t *testing.T) {
	e := newEnv(t, false)
	e.srv.cfg.MaxRequestBytes = 1 << 10
	for _, tc := range []struct {
		name, body string
		status     int
		code       int64
		message    string
	}{
		{"too large", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"pad":"` + strings.Repeat("x", 2<<10) + `"}}`,
			http.StatusRequestEntityTooLarge, jsonrpc.CodeInvalidRequest, "limit of 1024 bytes"},
		{"not JSON", `{bad`, http.StatusBadRequest, jsonrpc.CodeParseError, "the request is not JSON: invalid character 'b'"},
		{"empty", ``, http.StatusBadRequest, jsonrpc.CodeParseError, "the request is not JSON"},
	} {
		req, _ := http.NewRequest(http.MethodPost, e.url+"/mcp", strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   struct {
				Code    int64  `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if resp.StatusCode != tc.status || err != nil || got.JSONRPC != "2.0" || string(got.ID) != "null" ||
			got.Error.Code != tc.code || !strings.Contains(got.Error.Message, tc.message) {
			t.Errorf("%s: %d %+v (%v)", tc.name, resp.StatusCode, got, err)
		}
	}
}

// budgetWriter records the output budget in use when the first byte of a
// response is written.
type budgetWriter struct {
	http.ResponseWriter
	budget  *outbuf.Budget
	atWrite atomic.Int64 // -1 until the first write
}

func (w *budgetWriter) Write(p []byte) (int, error) {
	w.atWrite.CompareAndSwap(-1, w.budget.InUse())
	return w.ResponseWriter.Write(p)
}

func (w *budgetWriter) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

// A tool's output counts against the output budget until its response is
// written, copies and all, not only until its handler returns: the SDK
// encodes the result after that, so many calls in flight at once would
// hold copies of their outputs beyond the budget.
func TestOutputHeldUntilWritten(t *testing.T) {
	e := newEnv(t, false)
	budget := e.M.OutputBudget()
	var writers []*budgetWriter
	var mu sync.Mutex
	h := e.srv.Handler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bw := &budgetWriter{ResponseWriter: w, budget: budget}
		bw.atWrite.Store(-1)
		mu.Lock()
		writers = append(writers, bw)
		mu.Unlock()
		h.ServeHTTP(bw, r)
	}))
	t.Cleanup(ts.Close)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(bg,
		&mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp", DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	mu.Lock()
	writers = nil // the handshake's
	mu.Unlock()
	const size = 150 << 10 // within MaxResultText
	var out api.SessionCommandResponse
	callTool(t, cs, "execute_command", map[string]any{"command": fmt.Sprintf("head -c %d /dev/zero | tr '\\0' a", size)}, &out)
	if len(out.Stdout) != size {
		t.Fatalf("stdout of %d bytes, want %d", len(out.Stdout), size)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(writers) == 0 { // the call's, then callTool's tools/list
		t.Fatal("no request")
	}
	if got := writers[0].atWrite.Load(); got < size {
		t.Errorf("output budget in use while the result was written: %d bytes, want at least the output's %d", got, size)
	}
	if got := budget.InUse(); got != 0 {
		t.Errorf("output budget in use after the call: %d bytes, want 0", got)
	}
}

// msgCost is what text takes of a result's message: its JSON encoding,
// and that encoding's.
func msgCost(text string) int {
	once, _ := json.Marshal(text)
	twice, _ := json.Marshal(string(once))
	return len(once) - 2 + len(twice) - 6
}

// TestCapTexts: an execution's texts are cut so that together they take
// at most MaxResultText of a result's message (their JSON encoding and
// that encoding's), the short ones kept whole, each cut one at a
// character with a marker; texts that fit are kept.
func TestCapTexts(t *testing.T) {
	big := func(s string, cost int) string { return strings.Repeat(s, MaxResultText/cost+1) }
	for _, tc := range []struct {
		name  string
		texts []string
		cut   []bool
	}{
		{"fit", []string{strings.Repeat("a", MaxResultText/4), strings.Repeat("b", MaxResultText/4)}, []bool{false, false}},
		{"one byte over", []string{strings.Repeat("a", MaxResultText/2+1), ""}, []bool{true, false}},
		{"one large, one small", []string{big("a", 2), "a short error\n"}, []bool{true, false}},
		{"quotes and unicode escapes", []string{big(`"`, 6), big("<", 13)}, []bool{true, true}},
		{"multi-byte, control characters, invalid UTF-8", []string{big("€", 6), big("\x00", 13), big("\xff", 13), "x"}, []bool{true, true, true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			texts := slices.Clone(tc.texts)
			ptrs := make([]*string, len(texts))
			for i := range texts {
				ptrs[i] = &texts[i]
			}
			if got, want := capTexts(ptrs...), slices.Contains(tc.cut, true); got != want {
				t.Errorf("capTexts = %t, want %t", got, want)
			}
			total := 0
			for i, text := range texts {
				total += msgCost(text)
				kept, _, marked := strings.Cut(text, "\n[truncated: ")
				switch {
				case !tc.cut[i] && text != tc.texts[i]:
					t.Errorf("text %d, which fits, was changed", i)
				case tc.cut[i] && (!marked || !strings.HasPrefix(tc.texts[i], kept) || utf8.ValidString(tc.texts[i]) && !utf8.ValidString(kept)):
					t.Errorf("text %d cut to %d bytes without the marker, or not at a character", i, len(kept))
				}
			}
			if total > MaxResultText {
				t.Errorf("the texts take %d bytes of a message, want at most %d", total, MaxResultText)
			}
		})
	}
}

// TestLargeOutputCapped: an execution with more output than a tool result
// takes has its result cut, marked truncated, small enough for the stock
// Python client's 1 MiB limit of a message; the whole output goes as
// progress.
func TestLargeOutputCapped(t *testing.T) {
	e := newEnv(t, false)
	var progress atomic.Int64
	cs := e.connect(t, "", &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		progress.Add(int64(len(r.Params.Message)))
	}})
	const size = 2 << 20
	params := &mcp.CallToolParams{Name: "execute_command",
		Arguments: map[string]any{"command": fmt.Sprintf("head -c %d /dev/zero | tr '\\0' '<'; head -c %d /dev/zero | tr '\\0' '\"' >&2", size, size)}}
	params.SetProgressToken("p")
	res, err := cs.CallTool(bg, params)
	if err != nil {
		t.Fatal(err)
	}
	var out api.SessionCommandResponse
	if err := json.Unmarshal([]byte(text(t, res)), &out); err != nil {
		t.Fatal(err)
	}
	if !out.Truncated || !strings.Contains(out.Stdout, "[truncated: ") || !strings.Contains(out.Stderr, "[truncated: ") {
		t.Errorf("result of %d and %d bytes, truncated %t; want both cut, marked", len(out.Stdout), len(out.Stderr), out.Truncated)
	}
	msg, _ := json.Marshal(res)
	if len(msg) >= 1<<20 {
		t.Errorf("the result's message is %d bytes, want less than 1 MiB", len(msg))
	}
	checkOutput(t, cs, "execute_command", res)
	if got := progress.Load(); got != 2*size {
		t.Errorf("progress carried %d bytes of output, want all %d", got, 2*size)
	}
	// The value of the last expression, an error's value and traceback.
	for _, code := range []string{"'x' * 3_000_000", "raise ValueError('v' * 3_000_000)"} {
		res, err := cs.CallTool(bg, &mcp.CallToolParams{Name: "execute_code", Arguments: map[string]any{"code": code}})
		if err != nil {
			t.Fatal(err)
		}
		var out ExecuteCodeResult
		if err := json.Unmarshal([]byte(text(t, res)), &out); err != nil {
			t.Fatal(err)
		}
		if msg, _ := json.Marshal(res); len(msg) >= 1<<20 || !out.Truncated {
			t.Errorf("%s: a message of %d bytes, truncated %t; want less than 1 MiB, truncated", code, len(msg), out.Truncated)
		}
	}
}

// TestReadFileParts: a file larger than one result takes is refused whole
// with a length that fits, and read in parts with offset and length, each
// result small enough for the stock Python client's 1 MiB limit of a
// message; bad parts are INVALID_PARAMS.
func TestReadFileParts(t *testing.T) {
	e := newEnv(t, false)
	cs := e.connect(t, "", nil)
	const size = 1 << 20
	var made api.SessionCommandResponse
	callTool(t, cs, "execute_command", map[string]any{"command": fmt.Sprintf(
		`head -c %d /dev/zero | tr '\0' '"' > q.txt && head -c %d /dev/urandom > r.bin`, size, size)}, &made)
	if made.ExitCode != 0 {
		t.Fatalf("make the files: %+v", made)
	}
	target := map[string]any{"session_id": made.SessionID}
	read := func(args map[string]any) (*mcp.CallToolResult, FileResult) {
		t.Helper()
		for k, v := range target {
			args[k] = v
		}
		var fr FileResult
		res := callTool(t, cs, "read_file", args, nil)
		if !res.IsError {
			if err := json.Unmarshal([]byte(text(t, res)), &fr); err != nil {
				t.Fatal(err)
			}
		}
		if msg, _ := json.Marshal(res); len(msg) >= 1<<20 {
			t.Errorf("read_file %v: a message of %d bytes, want less than 1 MiB", args, len(msg))
		}
		return res, fr
	}
	for _, f := range []struct{ path, encoding string }{{"q.txt", "text"}, {"r.bin", "base64"}} {
		res, _ := read(map[string]any{"path": f.path})
		te := toolError(t, res, CodeInvalidParams)
		var length int64
		if _, err := fmt.Sscanf(te.Error[strings.LastIndex(te.Error, "a length of "):], "a length of %d fits here", &length); err != nil || length <= 0 {
			t.Fatalf("%s whole: %q, want the length that fits", f.path, te.Error)
		}
		var whole []byte
		for off := int64(0); off < size; off += length {
			_, fr := read(map[string]any{"path": f.path, "offset": off, "length": length})
			if fr.Encoding != f.encoding || fr.Offset != off || fr.FileSize != size {
				t.Fatalf("%s part at %d: %+v", f.path, off, fr)
			}
			part := []byte(fr.Content)
			if f.encoding == "base64" {
				var err error
				if part, err = base64.StdEncoding.DecodeString(fr.Content); err != nil {
					t.Fatal(err)
				}
			}
			whole = append(whole, part...)
		}
		if len(whole) != size {
			t.Errorf("%s read in parts: %d bytes, want %d", f.path, len(whole), size)
		}
	}
	for _, args := range []map[string]any{
		{"path": "q.txt", "offset": -1},
		{"path": "q.txt", "length": -1},
		{"path": "q.txt", "offset": size + 1},
	} {
		res, _ := read(args)
		toolError(t, res, CodeInvalidParams)
	}
}

// TestListFilesParts: a directory with more entries than one result takes
// is listed in parts, by name, each result small enough for the stock
// Python client's 1 MiB limit of a message; a bad offset is
// INVALID_PARAMS.
func TestListFilesParts(t *testing.T) {
	e := newEnv(t, false)
	cs := e.connect(t, "", nil)
	const n = 8000
	var made api.SessionCommandResponse
	callTool(t, cs, "execute_command", map[string]any{"command": fmt.Sprintf(
		`mkdir many && cd many && seq 1 %d | sed 's/^/a-file-with-a-long-name-"quoted"-/' | xargs touch`, n)}, &made)
	if made.ExitCode != 0 {
		t.Fatalf("make the files: %+v", made)
	}
	var names []string
	parts := 0
	for offset := 0; ; parts++ {
		args := map[string]any{"path": "many", "offset": offset, "session_id": made.SessionID}
		var lr ListFilesResult
		res := callTool(t, cs, "list_files", args, &lr)
		if msg, _ := json.Marshal(res); len(msg) >= 1<<20 {
			t.Fatalf("list_files %v: a message of %d bytes, want less than 1 MiB", args, len(msg))
		}
		if lr.Total != n || lr.Offset != offset || len(lr.Files) == 0 && lr.Truncated {
			t.Fatalf("list_files %v: total %d, offset %d, %d entries, truncated %t", args, lr.Total, lr.Offset, len(lr.Files), lr.Truncated)
		}
		for _, f := range lr.Files {
			names = append(names, f.Name)
		}
		if !lr.Truncated {
			break
		}
		offset += len(lr.Files)
	}
	if parts == 0 || len(names) != n || !slices.IsSorted(names) || len(slices.Compact(slices.Clone(names))) != n {
		t.Errorf("%d names in %d parts (sorted %t), want %d, each once, by name", len(names), parts+1, slices.IsSorted(names), n)
	}
	for _, offset := range []int{-1, n + 1} {
		toolError(t, callTool(t, cs, "list_files", map[string]any{"path": "many", "offset": offset, "session_id": made.SessionID}, nil), CodeInvalidParams)
	}
}

// TestReadLargeResource: a file resource larger than one result takes is
// a JSON-RPC invalid params error pointing at read_file's parts, not a
// message the stock Python client refuses.
func TestReadLargeResource(t *testing.T) {
	e := newEnv(t, false)
	cs := e.connect(t, "", nil)
	var made api.SessionCommandResponse
	callTool(t, cs, "execute_command", map[string]any{"command": "head -c 1000000 /dev/urandom > big.bin && echo hi > small.txt"}, &made)
	if made.ExitCode != 0 {
		t.Fatalf("make the files: %+v", made)
	}
	uri := "sandbox://" + made.SessionID + "/files/workspace/"
	_, err := cs.ReadResource(bg, &mcp.ReadResourceParams{URI: uri + "big.bin"})
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != jsonrpc.CodeInvalidParams || !strings.Contains(we.Message, "read_file") {
		t.Errorf("read a large resource: %v, want invalid params pointing at read_file", err)
	}
	if rr, err := cs.ReadResource(bg, &mcp.ReadResourceParams{URI: uri + "small.txt"}); err != nil || rr.Contents[0].Text != "hi\n" {
		t.Errorf("read a small resource: %+v, %v", rr, err)
	}
}

// run_code in a context whose sandbox was paused through the REST API is
// a tool error that says so and how to go on, not a run that failed.
func TestRunCodeSandboxPaused(t *testing.T) {
	e := newEnv(t, false)
	cs := e.connect(t, "", nil)
	var created map[string]any
	callTool(t, cs, "create_context", map[string]any{"name": "p", "language": "python"}, &created)
	sbs := e.Sandboxes(t)
	if len(sbs) != 1 {
		t.Fatalf("sandboxes %v", sbs)
	}
	if _, err := e.M.Pause(bg, sbs[0]); err != nil {
		t.Fatal(err)
	}
	res := callTool(t, cs, "run_code", map[string]any{"code": "1", "context_id": created["context_id"]}, nil)
	if te := toolError(t, res, CodeSandboxNotReady); !strings.Contains(te.Error, "paused") || !strings.Contains(te.Suggestion, "resume") {
		t.Errorf("tool error %+v", te)
	}
	if _, err := e.M.Resume(bg, sbs[0]); err != nil {
		t.Fatal(err)
	}
	var run map[string]any
	if res := callTool(t, cs, "run_code", map[string]any{"code": "print(2)", "context_id": created["context_id"]}, &run); res.IsError || run["stdout"] != "2\n" {
		t.Errorf("run_code once resumed: %v", run)
	}
}

// TestListParts: list_contexts and list_sessions with more entries than
// one result takes give them in parts, in their order, each result small
// enough for the stock Python client's 1 MiB limit of a message; the
// first part alone keeps seed 004's shape when it is the whole list; a
// bad offset is INVALID_PARAMS.
func TestListParts(t *testing.T) {
	e := newEnv(t, false)
	sb := e.Sandbox(t)
	now := time.Now().UTC().Truncate(time.Second)
	const contexts, sessions = 300, 1500
	for i := range contexts {
		c := &store.Context{ID: fmt.Sprintf("ctx-%06d", i), SandboxID: sb.ID, Language: api.LanguagePython, Type: api.ContextTypeJupyter,
			Name: fmt.Sprintf("c%d", i), Description: strings.Repeat(`a "quoted" description `, 170), WorkingDir: "/workspace",
			CreatedAt: now.Add(time.Duration(i) * time.Second), LastUsedAt: now}
		if err := e.St.CreateContext(bg, c); err != nil {
			t.Fatal(err)
		}
	}
	for i := range sessions {
		id := fmt.Sprintf("%s-%06d", strings.Repeat("s", 100), i)
		if err := e.St.CreateSession(bg, &store.Session{Key: store.SessionKey("", id), ID: id, SandboxID: sb.ID, Flavor: "small",
			IdleTimeout: time.Hour, CreatedAt: now.Add(time.Duration(i) * time.Millisecond), LastUsedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	cs := e.connect(t, "", nil)
	// part reads either tool's result.
	type part struct {
		Contexts []ContextInfo `json:"contexts"`
		Sessions []api.Session `json:"sessions"`
		Total    int           `json:"total"`
		ListPart
	}
	for _, tt := range []struct {
		tool  string
		total int
		// want is the i-th id of the whole list.
		want func(i int) string
	}{
		{"list_contexts", contexts, func(i int) string { return fmt.Sprintf("ctx-%06d", contexts-1-i) }}, // newest first
		{"list_sessions", sessions, func(i int) string { return fmt.Sprintf("%s-%06d", strings.Repeat("s", 100), i) }},
	} {
		t.Run(tt.tool, func(t *testing.T) {
			var got []string
			parts := 0
			for offset := 0; ; parts++ {
				var args map[string]any
				if offset > 0 {
					args = map[string]any{"offset": offset}
				}
				res := callTool(t, cs, tt.tool, args, nil)
				if msg, _ := json.Marshal(res); len(msg) >= 1<<20 {
					t.Fatalf("%s %v: a message of %d bytes, want less than 1 MiB", tt.tool, args, len(msg))
				}
				var p part
				if err := json.Unmarshal([]byte(text(t, res)), &p); err != nil {
					t.Fatal(err)
				}
				n := len(got)
				for _, c := range p.Contexts {
					got = append(got, c.ContextID)
				}
				for _, s := range p.Sessions {
					got = append(got, s.SessionID)
				}
				if p.Total != tt.total || p.Offset != offset || len(got) == n {
					t.Fatalf("%s %v: total %d, offset %d, %d entries, truncated %t", tt.tool, args, p.Total, p.Offset, len(got)-n, p.Truncated)
				}
				if !p.Truncated {
					break
				}
				offset += len(got) - n
			}
			if parts == 0 || len(got) != tt.total {
				t.Fatalf("%d entries in %d parts, want %d in more than one", len(got), parts+1, tt.total)
			}
			for i, id := range got {
				if id != tt.want(i) {
					t.Fatalf("entry %d is %s, want %s", i, id, tt.want(i))
				}
			}
			for _, offset := range []int{-1, tt.total + 1} {
				toolError(t, callTool(t, cs, tt.tool, map[string]any{"offset": offset}, nil), CodeInvalidParams)
			}
		})
	}
}

// Arguments of the wrong kind are INVALID_PARAMS in plain words, never in
// the decoder's (Go's types).
func TestArgumentsInPlainWords(t *testing.T) {
	e := newEnv(t, false)
	cs := e.connect(t, "", nil)
	for _, tt := range []struct {
		tool string
		args any
		want string
	}{
		{"run_code", []any{1}, "arguments must be a JSON object (got array)"},
		{"list_sessions", map[string]any{"offset": 1e30}, "invalid arguments: offset must be an integer (got number 1e+30)"},
	} {
		t.Run(tt.tool, func(t *testing.T) {
			res, err := cs.CallTool(bg, &mcp.CallToolParams{Name: tt.tool, Arguments: tt.args})
			if err != nil {
				t.Fatal(err)
			}
			if te := toolError(t, res, CodeInvalidParams); te.Error != tt.want {
				t.Errorf("error %q, want %q", te.Error, tt.want)
			}
		})
	}
}
