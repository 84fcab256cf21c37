package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/agent2env/agent2env/api/sse"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/contexts"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
)

// TestLLMArchiveByAPIKey: with two API keys, the exchanges of calls made
// with one (or with a per-run key it made) are its own: the other does not
// list or read them, nor list or revoke its per-run keys.
func TestLLMArchiveByAPIKey(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "llm.yaml")
	writeLLMConfig(t, path, sseUpstream(t, "ok", nil))
	keyA, keyB := auth.NewKey(), auth.NewKey()
	keys, err := auth.NewKeys(keyA, keyB)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t.TempDir(), fakeruntime.New())
	cfg.LLMConfig, cfg.Keys = path, keys
	d := start(t, cfg, nil)
	a, _ := client.New("http://"+d.addr, client.WithToken(keyA))
	b, _ := client.New("http://"+d.addr, client.WithToken(keyB))
	runA := submitRun(t, d, a)
	perRun, err := a.LLMKeys().Create(ctx, api.LLMKeyRequest{Run: runA, ExpiresIn: 600})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{keyA, keyB, perRun.Key} {
		if code, body := llmCall(t, d.addr, key, false); code != 200 {
			t.Fatalf("call: %d %s", code, body)
		}
	}
	if err := d.sys.LLMArchive.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	list := func(c *client.Client) (runs []string, ids []string) {
		t.Helper()
		l, err := c.LLM().List(ctx, client.LLMFilter{})
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range l.Items {
			runs, ids = append(runs, x.RunID), append(ids, x.ID)
		}
		return runs, ids
	}
	runsA, idsA := list(a)
	runsB, idsB := list(b)
	if len(idsA) != 2 || !slices.Contains(runsA, runA) || len(idsB) != 1 || runsB[0] != "" {
		t.Fatalf("key A lists runs %q, key B %q; want A's two calls (one with its per-run key), B's one", runsA, runsB)
	}
	for _, id := range idsA {
		if _, err := b.LLM().Get(ctx, id); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("key B gets A's exchange %s: %v, want ErrNotFound", id, err)
		}
	}
	if _, err := a.LLM().Get(ctx, idsA[0]); err != nil {
		t.Errorf("key A gets its exchange: %v", err)
	}
	if ks, err := b.LLMKeys().List(ctx); err != nil || len(ks) != 0 {
		t.Errorf("key B lists per-run keys %+v, %v; want none", ks, err)
	}
	if err := b.LLMKeys().Revoke(ctx, perRun.ID); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("key B revokes A's per-run key: %v, want ErrNotFound", err)
	}
	if ks, err := a.LLMKeys().List(ctx); err != nil || len(ks) != 1 || ks[0].RevokedAt != nil {
		t.Errorf("key A's per-run keys %+v, %v", ks, err)
	}
}

// TestLLMFollowEndsAtShutdown: a follow of the archive, which never ends
// on its own, ends with an UNAVAILABLE error event when the daemon shuts
// down, and does not hold the shutdown for its timeout.
func TestLLMFollowEndsAtShutdown(t *testing.T) {
	cfg := testConfig(t.TempDir(), fakeruntime.New())
	cfg.ShutdownTimeout = 30 * time.Second
	d := start(t, cfg, nil)
	resp, err := http.Get("http://" + d.addr + "/api/v1/llm/exchanges/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK { // the headers come at once: the follow runs
		t.Fatalf("follow: %d", resp.StatusCode)
	}
	began := time.Now()
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("shutdown took %s with a follow open", took)
	}
	ev, err := sse.NewReader(resp.Body).Next()
	if err != nil || ev.Name != "error" || !strings.Contains(string(ev.Data), api.CodeUnavailable) {
		t.Errorf("the follow ended with %q %s, %v; want an %s error event", ev.Name, ev.Data, err, api.CodeUnavailable)
	}
}

// TestRunExchangesAreTheRunTenants: the model calls a run's sandbox
// makes, and those of a sandbox its agent made (an owned one, for a
// context), are the run's and its tenant's: the key that submitted the run
// lists, reads and exports them; another key, which gets 404 for the run,
// gets nothing of them either (every key reached them).
func TestRunExchangesAreTheRunTenants(t *testing.T) {
	ctx := context.Background()
	cfg := llmTestConfig(t, sseUpstream(t, "ok", nil))
	cfg.Contexts.Defaults = map[string]contexts.Source{api.LanguagePython: {Image: tinyRef}}
	keyA, keyB := twoKeys(t, &cfg)
	d := start(t, cfg, nil)
	d.importTiny()
	a, b := d.as(keyA), d.as(keyB)
	batch, err := a.Runs().Submit(ctx, api.RunSubmitRequest{
		Task: fmt.Sprintf("name: long\nimage: %s\nagent: custom\ngoal: g\nentrypoint: sleep 60\n", tinyRef)})
	if err != nil {
		t.Fatal(err)
	}
	run := batch.Runs[0].ID
	t.Cleanup(func() { _, _ = a.Runs().Cancel(ctx, run) })
	sb := waitAgent(t, d, auth.WithTenant(ctx, auth.Tenant(keyA)), run)
	srv := httptest.NewServer(d.sys.sandboxHandler(sb))
	defer srv.Close()
	if out, msg := callTool(t, mcpSession(t, srv.URL+"/mcp"), "create_context", map[string]any{"name": "c"}); msg != "" {
		t.Fatalf("create_context: %v %s", out, msg)
	}
	sbs, err := d.sys.Store.ListSandboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var owned string
	for _, s := range sbs {
		if s.Owner == sb {
			owned = s.ID
		}
	}
	if owned == "" {
		t.Fatal("no sandbox owned by the run's")
	}
	ownedSrv := httptest.NewServer(d.sys.sandboxHandler(owned))
	defer ownedSrv.Close()
	for _, u := range []string{srv.URL, ownedSrv.URL} {
		if code, body := llmCall(t, strings.TrimPrefix(u, "http://"), "", false); code != 200 {
			t.Fatalf("call: %d %s", code, body)
		}
	}
	if err := d.sys.LLMArchive.Sync(ctx); err != nil {
		t.Fatal(err)
	}

	mine, err := a.LLM().List(ctx, client.LLMFilter{Run: run})
	if err != nil || len(mine.Items) != 2 {
		t.Fatalf("key A lists %+v, %v; want the run's two exchanges", mine, err)
	}
	for _, f := range []client.LLMFilter{{Run: run}, {}, {Sandbox: sb}, {Sandbox: owned}} {
		if l, err := b.LLM().List(ctx, f); err != nil || len(l.Items) != 0 {
			t.Errorf("key B lists %+v with %+v, %v; want none", l.Items, f, err)
		}
		var exported int
		err := b.LLM().ExportEach(ctx, f, func(*api.LLMExchangeDetail) error { exported++; return nil })
		if err != nil || exported != 0 {
			t.Errorf("key B exports %d exchanges with %+v, %v; want none", exported, f, err)
		}
	}
	for _, x := range mine.Items {
		if _, err := b.LLM().Get(ctx, x.ID); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("key B gets the run's exchange %s: %v, want ErrNotFound", x.ID, err)
		}
		if _, err := a.LLM().Get(ctx, x.ID); err != nil {
			t.Errorf("key A gets its run's exchange %s: %v", x.ID, err)
		}
	}
}
