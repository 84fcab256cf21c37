package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/contexts"
	"github.com/agent2env/agent2env/internal/mcpserver"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
	"github.com/agent2env/agent2env/internal/store"
)

// What code in a sandbox makes through its MCP server (sessions, contexts
// and their sandboxes) is bounded by that sandbox's limits, listed to the
// API key that made the sandbox (not to another), and gone when the
// sandbox is deleted; the host's capacity for others is untouched.
func TestSandboxMadeIsBounded(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t.TempDir(), fakeruntime.New())
	keyA, keyB := twoKeys(t, &cfg)
	cfg.Contexts.Defaults = map[string]contexts.Source{
		api.LanguagePython: {Image: tinyRef}, api.LanguageJavaScript: {Image: tinyRef}, api.LanguageBash: {Image: tinyRef}}
	// A host of 8 CPUs and 8 GiB, no overcommit: 20 large sessions would
	// take it ten times over.
	cfg.Manager.Host.MilliCPU, cfg.Manager.Host.MemoryBytes = 8000, 8<<30
	cfg.Manager.CPUOvercommit, cfg.Manager.MemoryOvercommit = 1, 1
	d := start(t, cfg, nil)
	d.importTiny()
	a, b := d.as(keyA), d.as(keyB)
	parent, err := a.Sandbox.Create(ctx, api.CreateSandboxRequest{Image: tinyRef, CPU: "1", Memory: "512Mi"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d.sys.sandboxHandler(parent.ID))
	defer srv.Close()
	mcpc := mcpSession(t, srv.URL+"/mcp")

	// Large sessions need 4 CPUs: past the sandbox's own size, every one is
	// refused with a suggestion.
	for i := range 20 {
		out, msg := callTool(t, mcpc, "execute_code", map[string]any{
			"code": "1", "language": "python", "session_id": fmt.Sprintf("large-%d", i), "flavor": api.FlavorLarge})
		if msg == "" {
			t.Fatalf("large session %d made: %v", i, out)
		}
		var te mcpserver.ToolError
		if err := json.Unmarshal([]byte(msg), &te); err != nil || te.Code != api.CodeLimitExceeded ||
			!strings.Contains(te.Suggestion, "flavor small") || te.Usage == nil || te.Usage.MilliCPUCapacity != 1000 {
			t.Fatalf("large session %d: %s; want %s with the sandbox's usage and a suggestion", i, msg, api.CodeLimitExceeded)
		}
	}
	// One small session fits (1 CPU, 1 GiB: the least budget); the next
	// does not, nor does a context's sandbox.
	if out, msg := callTool(t, mcpc, "execute_code", map[string]any{"code": "1", "language": "python", "session_id": "s1"}); msg != "" {
		t.Fatalf("small session: %v %s", out, msg)
	}
	if _, msg := callTool(t, mcpc, "execute_code", map[string]any{"code": "1", "language": "python", "session_id": "s2"}); !strings.Contains(msg, api.CodeLimitExceeded) {
		t.Fatalf("a second session: %q, want %s", msg, api.CodeLimitExceeded)
	}
	for i := range 100 {
		if _, msg := callTool(t, mcpc, "create_context", map[string]any{"name": fmt.Sprint("c", i)}); !strings.Contains(msg, api.CodeLimitExceeded) {
			t.Fatalf("context %d: %q, want %s", i, msg, api.CodeLimitExceeded)
		}
	}
	// The session belongs to the sandbox: its creator lists it (marked),
	// another key does not.
	list, err := a.Sessions().List(ctx)
	if err != nil || len(list) != 1 || list[0].SessionID != "s1" || list[0].MadeBySandbox != parent.ID {
		t.Fatalf("key A's sessions: %+v, %v; want s1 made by %s", list, err, parent.ID)
	}
	if list, err := b.Sessions().List(ctx); err != nil || len(list) != 0 {
		t.Fatalf("key B's sessions: %+v, %v; want none", list, err)
	}
	ctxs, err := a.Contexts().List(ctx, client.ListContextsOptions{})
	if err != nil || len(ctxs) == 0 || ctxs[0].MadeBySandbox != parent.ID {
		t.Fatalf("key A's contexts: %+v, %v; want the session's, made by %s", ctxs, err, parent.ID)
	}
	// Key A reaches the context by no id (only its maker does), and is
	// told whose it is; key B is told nothing.
	if _, err := a.Contexts().Get(ctx, ctxs[0].ContextID); !errors.Is(err, client.ErrNotFound) ||
		!strings.Contains(err.Error(), "made by the code of sandbox "+parent.ID) {
		t.Errorf("key A gets context %s: %v; want not found, naming sandbox %s", ctxs[0].ContextID, err, parent.ID)
	}
	if _, err := b.Contexts().Get(ctx, ctxs[0].ContextID); !errors.Is(err, client.ErrNotFound) ||
		strings.Contains(err.Error(), parent.ID) {
		t.Errorf("key B gets context %s: %v; want a plain not found", ctxs[0].ContextID, err)
	}
	// Another tenant's create is untouched by what the sandbox tried.
	other, err := b.Sandbox.Create(ctx, api.CreateSandboxRequest{Image: tinyRef, CPU: "4", Memory: "4Gi"})
	if err != nil {
		t.Fatalf("another key's create: %v", err)
	}
	if err := b.Sandbox.Delete(ctx, other.ID); err != nil {
		t.Fatal(err)
	}
	// Deleting the sandbox ends everything it made.
	if err := a.Sandbox.Delete(ctx, parent.ID); err != nil {
		t.Fatal(err)
	}
	sbs, err := d.sys.Store.ListSandboxes(ctx)
	if err != nil || len(sbs) != 0 {
		t.Fatalf("sandboxes after the owner's deletion: %d, %v; want none", len(sbs), err)
	}
	for _, tenant := range []string{auth.SandboxTenant(parent.ID), auth.Tenant(keyA)} {
		ss, err := d.sys.Store.ListSessions(ctx, store.SessionFilter{Tenant: tenant, WithOwned: true})
		cs, cerr := d.sys.Store.ListContexts(ctx, store.ContextFilter{ByTenant: true, Tenant: tenant, WithOwned: true})
		if err != nil || cerr != nil || len(ss)+len(cs) != 0 {
			t.Fatalf("tenant %s after the owner's deletion: sessions %+v (%v), contexts %+v (%v)", tenant, ss, err, cs, cerr)
		}
	}
}

// A sandbox whose owner ended without deleting it (a crash between the
// two, or an owner that failed) is deleted by the sweep.
func TestOwnedSandboxOfEndedOwnerSwept(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t.TempDir(), fakeruntime.New())
	cfg.Contexts.Defaults = map[string]contexts.Source{api.LanguagePython: {Image: tinyRef}}
	d := start(t, cfg, nil)
	d.importTiny()
	parent, err := d.api.Sandbox.Create(ctx, api.CreateSandboxRequest{Image: tinyRef})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d.sys.sandboxHandler(parent.ID))
	defer srv.Close()
	if out, msg := callTool(t, mcpSession(t, srv.URL+"/mcp"), "create_context", map[string]any{"name": "c"}); msg != "" {
		t.Fatalf("create_context: %v %s", out, msg)
	}
	// The owner's record goes as a crash would leave it: without its
	// owned sandboxes.
	if err := d.sys.Store.DeleteSandbox(ctx, parent.ID); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		sbs, err := d.sys.Store.ListSandboxes(ctx)
		if err == nil && len(sbs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandboxes: %d (%v); want the owned one swept", len(sbs), err)
		}
	}
}

// An idle connection on a sandbox's channel to the daemon's services is
// closed, as an API client's is.
func TestSandboxChannelIdleClosed(t *testing.T) {
	cfg := testConfig(t.TempDir(), fakeruntime.New())
	cfg.HTTP.IdleTimeout = 300 * time.Millisecond
	d := start(t, cfg, nil)
	l, err := net.Listen("unix", filepath.Join(t.TempDir(), "svc.sock"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go d.sys.channels.ServeSandbox(ctx, l, "sbx-test")
	c, err := net.Dial("unix", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /nothing HTTP/1.1\r\nHost: 127.0.0.1:4000\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// The channel closes the connection: the read ends at EOF, not at the
	// deadline.
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(c); err != nil {
		t.Errorf("the idle connection was not closed: %v", err)
	}
}
