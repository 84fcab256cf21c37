package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/contexts"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
	"github.com/agent2env/agent2env/internal/store"
)

// slowUpstream is an OpenAI-compatible upstream: a plain call is answered
// at once with usage (7 in, 3 out); a streamed one trickles a chunk every
// 200ms for span, as a slow model does.
func slowUpstream(t *testing.T, span time.Duration) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := readAll(r.Body)
		if !strings.Contains(body, `"stream":true`) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"c","object":"chat.completion","created":0,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for end := time.Now().Add(span); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"content":"."}}]}`+"\n\n")
			w.(http.Flusher).Flush()
		}
		io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
		if strings.Contains(body, `"include_usage":true`) { // as OpenAI: only when asked (the proxy asks)
			io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":20,"total_tokens":25}}`+"\n\n")
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// waitAgent waits for run id, as ctx's tenant sees it, to be in its agent
// phase and returns its sandbox.
func waitAgent(t *testing.T, d *testDaemon, ctx context.Context, id string) string {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		r, err := d.sys.Runs.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Final() {
			t.Fatalf("run %s ended before its agent ran: %s %s", id, r.Status, r.Reason)
		}
		if r.Phase == api.PhaseAgent && r.SandboxID != "" {
			return r.SandboxID
		}
	}
	t.Fatalf("run %s never reached its agent", id)
	return ""
}

// waitRun waits for run id, as ctx's tenant sees it, to end.
func waitRun(t *testing.T, d *testDaemon, ctx context.Context, id string) *api.Run {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		r, err := d.sys.Runs.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Final() {
			return r
		}
	}
	t.Fatalf("run %s never ended", id)
	return nil
}

// TestRunsUseTheLLMProxy: a run's sandbox's model calls are the run's —
// attributed to it with no help from the agent, its liveness (an agent
// silent on its output but waiting on a slow model is not hung, while the
// same agent without calls is), and its tokens and conversation in its
// result; the models a task may name are the proxy's, as reloaded.
func TestRunsUseTheLLMProxy(t *testing.T) {
	ctx := context.Background()
	cfg := llmTestConfig(t, slowUpstream(t, 4*time.Second))
	d := start(t, cfg, nil)
	d.importTiny()
	task := func(model string, sleep int) string {
		return fmt.Sprintf("name: quiet\nimage: %s\nagent: custom\nmodel: %s\ngoal: wait\nentrypoint: sleep %d\nend: {timeout: 1m}\nliveness: {idle: 2s}\n", tinyRef, model, sleep)
	}

	// The calling run's agent ends soon after its calls (the slow one
	// takes 4 s). The silent one sleeps well past the idle window: its
	// verdict takes the window, a tick and a look at its files, which a
	// loaded machine (CI) stretched past a 5 s sleep.
	b, err := d.sys.Runs.Submit(ctx, api.RunSubmitRequest{Task: task("m", 5)})
	if err != nil {
		t.Fatal(err)
	}
	bs, err := d.sys.Runs.Submit(ctx, api.RunSubmitRequest{Task: task("m", 20)})
	if err != nil {
		t.Fatal(err)
	}
	calling, silent := b.Runs[0].ID, bs.Runs[0].ID
	sb := waitAgent(t, d, context.Background(), calling)
	srv := httptest.NewServer(d.sys.sandboxHandler(sb))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	if code, body := llmCall(t, addr, "", false); code != 200 {
		t.Fatalf("plain call: %d %s", code, body)
	}
	if code, body := llmCall(t, addr, "", true); code != 200 || !strings.Contains(body, "[DONE]") {
		t.Fatalf("slow streamed call: %d %s", code, body)
	}

	r := waitRun(t, d, context.Background(), calling)
	if r.Status != api.RunSucceeded {
		t.Errorf("the run waiting on a slow model ended %s: %s (want succeeded: its calls are progress)", r.Status, r.Reason)
	}
	if want := (api.RunLLMUsage{Requests: 2, InputTokens: 7 + 5, OutputTokens: 3 + 20, Source: "proxy"}); r.LLM != want {
		t.Errorf("llm usage %+v, want %+v", r.LLM, want)
	}
	if r.ConversationID == "" || len(r.ConversationIDs) == 0 || r.ConversationIDs[0] != r.ConversationID {
		t.Errorf("conversations %q %q, want the archive's", r.ConversationID, r.ConversationIDs)
	}
	// The calls are the run's in the archive, though nothing in them or
	// in the sandbox's environment named it.
	if xs, _, err := d.sys.LLMArchive.List(ctx, store.LLMExchangeFilter{RunID: calling}, store.Page{}); err != nil || len(xs) != 2 {
		t.Errorf("the run's exchanges in the archive: %d, %v; want 2", len(xs), err)
	}
	if r := waitRun(t, d, context.Background(), silent); r.Status != api.RunHung {
		t.Errorf("the silent run without calls ended %s: %s, want hung", r.Status, r.Reason)
	}

	// The models are the proxy's, as reloaded; an override is checked,
	// not the task's own model it replaces.
	_, err = d.sys.Runs.Submit(ctx, api.RunSubmitRequest{Task: task("nope", 5)})
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), `model: unknown model "nope"`) {
		t.Errorf("unknown model: %v", err)
	}
	path := cfg.LLMConfig
	cfgText, _ := os.ReadFile(path)
	if err := os.WriteFile(path, []byte(strings.Replace(string(cfgText), "name: m\n", "name: m2\n", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.sys.ReloadLLM(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.sys.Runs.Submit(ctx, api.RunSubmitRequest{Task: task("m", 5)}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a model the reload removed: %v", err)
	}
	b, err = d.sys.Runs.Submit(ctx, api.RunSubmitRequest{Task: task("m", 5), Models: []string{"m2"}})
	if err != nil {
		t.Fatalf("override with a model of the proxy: %v", err)
	}
	if _, err := d.sys.Runs.Cancel(ctx, b.Runs[0].ID); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.sys.LLM.Models(), []string{"m2"}) {
		t.Errorf("models %v", d.sys.LLM.Models())
	}
}

// mcpSession connects an MCP client to the daemon's MCP at url.
func mcpSession(t *testing.T, url string) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: url, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callTool calls tool name and returns its structured result, or its
// error text when it failed.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (map[string]any, string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		var text strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text.WriteString(tc.Text)
			}
		}
		return nil, text.String()
	}
	out, _ := res.StructuredContent.(map[string]any)
	return out, ""
}

// TestSandboxMCPIsScoped: the MCP server a sandbox reaches on its own
// channel is scoped to its run (or to itself): a session it makes is not
// seen by another sandbox's MCP, the API's tenant that made the sandbox
// lists it (made_by_sandbox) but reaches it by no id of its own, and the
// sandbox reaches no other sandbox by id.
func TestSandboxMCPIsScoped(t *testing.T) {
	ctx := context.Background()
	d := start(t, testConfig(t.TempDir(), fakeruntime.New()), nil)
	d.importTiny()
	a := d.create(api.CreateSandboxRequest{Image: tinyRef})
	b := d.create(api.CreateSandboxRequest{Image: tinyRef})
	srvA := httptest.NewServer(d.sys.sandboxHandler(a.ID))
	defer srvA.Close()
	srvB := httptest.NewServer(d.sys.sandboxHandler(b.ID))
	defer srvB.Close()
	mcpA, mcpB := mcpSession(t, srvA.URL+"/mcp"), mcpSession(t, srvB.URL+"/mcp")

	out, msg := callTool(t, mcpA, "execute_command", map[string]any{"command": "echo hi", "session_id": "mine"})
	if msg != "" || out["session_id"] != "mine" {
		t.Fatalf("execute_command from A: %v %s", out, msg)
	}
	if out, msg := callTool(t, mcpA, "list_sessions", nil); msg != "" || out["total"] != float64(1) {
		t.Errorf("A's sessions: %v %s, want its one", out, msg)
	}
	if out, msg := callTool(t, mcpB, "list_sessions", nil); msg != "" || out["total"] != float64(0) {
		t.Errorf("B's sessions: %v %s, want none of A's", out, msg)
	}
	if _, msg := callTool(t, mcpB, "get_session_info", map[string]any{"session_id": "mine"}); !strings.Contains(msg, "SESSION_NOT_FOUND") {
		t.Errorf("B asking for A's session: %q, want SESSION_NOT_FOUND", msg)
	}
	if list, err := d.api.Sessions().List(ctx); err != nil || len(list) != 1 || list[0].MadeBySandbox != a.ID {
		t.Errorf("the API's sessions: %+v, %v, want A's, made by %s", list, err, a.ID)
	}
	// Not found, saying whose it is and how it ends (the listing shows it).
	for op, call := range map[string]func() error{
		"get":    func() error { _, err := d.api.Sessions().Get(ctx, "mine"); return err },
		"delete": func() error { return d.api.Sessions().Delete(ctx, "mine") },
	} {
		if err := call(); !errors.Is(err, client.ErrNotFound) ||
			!strings.Contains(err.Error(), "made by the code of sandbox "+a.ID+", which alone reaches it by id") {
			t.Errorf("the API's %s of A's session by its id: %v, want not found, naming sandbox %s", op, err, a.ID)
		}
	}
	// By sandbox id, each reaches its own sandbox only.
	if _, msg := callTool(t, mcpB, "list_files", map[string]any{"sandbox_id": a.ID}); !strings.Contains(msg, "SANDBOX_NOT_FOUND") {
		t.Errorf("B listing A's sandbox: %q, want SANDBOX_NOT_FOUND", msg)
	}
	if _, msg := callTool(t, mcpA, "list_files", map[string]any{"sandbox_id": a.ID}); msg != "" {
		t.Errorf("A listing its own sandbox: %s", msg)
	}
	// The operator's MCP (no key: the open API's tenant) lists it, and
	// reaches it by no id.
	operator := mcpSession(t, "http://"+d.addr+"/mcp")
	if out, msg := callTool(t, operator, "list_sessions", nil); msg != "" || out["total"] != float64(1) {
		t.Errorf("the API's MCP sessions: %v %s, want A's", out, msg)
	}
	if _, msg := callTool(t, operator, "get_session_info", map[string]any{"session_id": "mine"}); !strings.Contains(msg, "SESSION_NOT_FOUND") {
		t.Errorf("the operator asking for A's session: %q, want SESSION_NOT_FOUND", msg)
	}
}

// What a run's agent makes through its sandbox's MCP server (sessions,
// contexts and their sandboxes) is the run's, and goes when the run ends,
// however it ends.
func TestRunMCPStateEndsWithTheRun(t *testing.T) {
	for _, tt := range []struct {
		name       string
		entrypoint string
		cancel     bool
		want       api.RunStatus
	}{
		// The agent's time must outlast the MCP calls below on a loaded
		// machine: a context asked for while its run's sandbox goes is
		// refused, as it should be, and the test would not see it.
		{"succeeded", "sleep 5", false, api.RunSucceeded},
		{"failed", "sleep 5; exit 3", false, api.RunFailed},
		{"cancelled", "sleep 60", true, api.RunCancelled},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			cfg := testConfig(t.TempDir(), fakeruntime.New())
			cfg.Contexts.Defaults = map[string]contexts.Source{api.LanguagePython: {Image: tinyRef}}
			cfg.Manager.Owned.CPU, cfg.Manager.Owned.Memory = "2", "2Gi" // a session's sandbox and a context's
			d := start(t, cfg, nil)
			d.importTiny()
			b, err := d.sys.Runs.Submit(ctx, api.RunSubmitRequest{
				Task: fmt.Sprintf("name: mcp\nimage: %s\nagent: custom\ngoal: g\nentrypoint: %q\nend: {timeout: 1m}\n", tinyRef, tt.entrypoint)})
			if err != nil {
				t.Fatal(err)
			}
			id := b.Runs[0].ID
			srv := httptest.NewServer(d.sys.sandboxHandler(waitAgent(t, d, context.Background(), id)))
			defer srv.Close()
			mcpc := mcpSession(t, srv.URL+"/mcp")
			if out, msg := callTool(t, mcpc, "execute_command", map[string]any{"command": "true", "session_id": "s1"}); msg != "" {
				t.Fatalf("execute_command: %v %s", out, msg)
			}
			if out, msg := callTool(t, mcpc, "create_context", map[string]any{"name": "c1", "language": "python"}); msg != "" || out["context_id"] == "" {
				t.Fatalf("create_context: %v %s", out, msg)
			}
			runCtx := auth.WithTenant(ctx, auth.RunTenant(id))
			if list, err := d.sys.Sessions.List(runCtx); err != nil || len(list) != 1 {
				t.Fatalf("the run's sessions while it runs: %+v, %v; want s1", list, err)
			}
			if list, _, err := d.sys.Contexts.List(runCtx, store.ContextFilter{}, store.Page{}); err != nil || len(list) != 1 {
				t.Fatalf("the run's contexts while it runs: %+v, %v; want c1", list, err)
			}
			if tt.cancel {
				if _, err := d.sys.Runs.Cancel(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			if r := waitRun(t, d, context.Background(), id); r.Status != tt.want {
				t.Fatalf("run %s: %s, want %s", r.Status, r.Reason, tt.want)
			}
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				sessions, serr := d.sys.Sessions.List(runCtx)
				ctxs, _, cerr := d.sys.Contexts.List(runCtx, store.ContextFilter{}, store.Page{})
				sbs, err := d.sys.Manager.List(ctx)
				if serr == nil && cerr == nil && err == nil && len(sessions)+len(ctxs)+len(sbs) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after the run ended: sessions %+v (%v), contexts %+v (%v), sandboxes %d (%v); want none",
						sessions, serr, ctxs, cerr, len(sbs), err)
				}
			}
		})
	}
}
