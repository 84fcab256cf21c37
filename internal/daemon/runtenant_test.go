package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
)

// TestRunsPerAPIKey: a run is its submitting API key's. Another key
// neither lists it nor reaches it by id (get, cancel, delete, logs,
// events, artifacts: 404 as an unknown run), and cannot make a per-run
// LLM key naming it (404, no key made), which would spend its budget and
// add to its tokens; its own key can. The daemon's own lookups see every
// run: the runner carries the run out and the sandbox's channel knows it
// (RunOfSandbox, which the LLM proxy and the MCP server's run tenant use).
func TestRunsPerAPIKey(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t.TempDir(), fakeruntime.New())
	keyA, keyB := twoKeys(t, &cfg)
	d := start(t, cfg, nil)
	d.importTiny()
	a, b := d.as(keyA), d.as(keyB)
	task := fmt.Sprintf("name: long\nimage: %s\nagent: custom\ngoal: wait\nentrypoint: sleep 30\nend: {timeout: 1m}\n", tinyRef)
	bb, err := b.Runs().Submit(ctx, api.RunSubmitRequest{Task: task})
	if err != nil {
		t.Fatal(err)
	}
	theirs := bb.Runs[0].ID
	ab, err := a.Runs().Submit(ctx, api.RunSubmitRequest{Task: task})
	if err != nil {
		t.Fatal(err)
	}
	mine := ab.Runs[0].ID

	// The runner's loop carries out B's run, and B's sandbox's channel
	// knows it, whoever asks.
	sb := waitAgent(t, d, auth.WithTenant(ctx, auth.Tenant(keyB)), theirs)
	if r, ok := d.sys.Runs.RunOfSandbox(sb); !ok || r != theirs {
		t.Errorf("RunOfSandbox(%s) = %q, %v; want %s", sb, r, ok, theirs)
	}

	// A per-run key naming B's run: 404, as a run that does not exist,
	// and no key is made.
	for _, run := range []string{theirs, "run-0000000000000000"} {
		if _, err := a.LLMKeys().Create(ctx, api.LLMKeyRequest{Run: run}); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("A's LLM key for run %s: %v, want ErrNotFound", run, err)
		}
	}
	if list, err := d.sys.Store.ListLLMKeys(ctx); err != nil || len(list) != 0 {
		t.Errorf("keys made: %d, %v; want none", len(list), err)
	}
	if k, err := a.LLMKeys().Create(ctx, api.LLMKeyRequest{Run: mine}); err != nil || k.Run != mine {
		t.Errorf("A's LLM key for its own run: %+v, %v", k, err)
	}
	if k, err := b.LLMKeys().Create(ctx, api.LLMKeyRequest{Run: theirs}); err != nil || k.Run != theirs {
		t.Errorf("B's LLM key for its own run: %+v, %v", k, err)
	}

	// B's run is invisible to A.
	if list, err := a.Runs().List(ctx, client.ListRunsOptions{}); err != nil || len(list.Items) != 1 || list.Items[0].ID != mine {
		t.Errorf("A's list: %+v, %v; want its own run only", list, err)
	}
	if list, err := a.Runs().List(ctx, client.ListRunsOptions{Batch: bb.ID}); err != nil || len(list.Items) != 0 {
		t.Errorf("A's list of B's batch: %+v, %v; want none", list, err)
	}
	notFound := map[string]func() error{
		"get":       func() error { _, err := a.Runs().Get(ctx, theirs); return err },
		"cancel":    func() error { _, err := a.Runs().Cancel(ctx, theirs); return err },
		"delete":    func() error { return a.Runs().Delete(ctx, theirs) },
		"logs":      func() error { return drain(a.Runs().Logs(ctx, theirs)) },
		"artifacts": func() error { return drain(a.Runs().Artifacts(ctx, theirs)) },
		"artifact":  func() error { return drain(a.Runs().Artifact(ctx, theirs, "/workspace/x")) },
		"events":    func() error { return a.Runs().Events(ctx, theirs, func(api.RunEvent) error { return nil }) },
	}
	for name, call := range notFound {
		if err := call(); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("A's %s of B's run: %v, want ErrNotFound", name, err)
		}
	}
	if r, err := b.Runs().Get(ctx, theirs); err != nil || r.Status != api.RunRunning {
		t.Errorf("B's run after A's tries: %+v, %v; want still running", r, err)
	}

	// Each key's own still works.
	if list, err := b.Runs().List(ctx, client.ListRunsOptions{}); err != nil || len(list.Items) != 1 || list.Items[0].ID != theirs {
		t.Errorf("B's list: %+v, %v; want its own run only", list, err)
	}
	for _, own := range []struct {
		c  *client.Client
		id string
	}{{a, mine}, {b, theirs}} {
		if r, err := own.c.Runs().Cancel(ctx, own.id); err != nil || r.ID != own.id {
			t.Errorf("cancel own run %s: %+v, %v", own.id, r, err)
		}
	}
	r := waitRun(t, d, auth.WithTenant(ctx, auth.Tenant(keyB)), theirs)
	if r.Status != api.RunCancelled {
		t.Errorf("B's run: %s %s, want cancelled", r.Status, r.Reason)
	}
	if err := b.Runs().Delete(ctx, theirs); err != nil {
		t.Errorf("B deletes its run: %v", err)
	}
	if _, err := d.sys.Store.GetRun(ctx, theirs); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("B's run after its delete: %v, want gone", err)
	}
}

// drain reads and closes what a call opened, returning its error.
func drain(rc io.ReadCloser, err error) error {
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = io.Copy(io.Discard, rc)
	return err
}

// submitRun submits, with c's API key, a task that ends at once, and
// returns its run: a run a per-run LLM key of that key's may name.
func submitRun(t *testing.T, d *testDaemon, c *client.Client) string {
	t.Helper()
	d.importTiny()
	b, err := c.Runs().Submit(context.Background(), api.RunSubmitRequest{
		Task: fmt.Sprintf("name: quick\nimage: %s\nagent: custom\ngoal: g\nentrypoint: 'true'\n", tinyRef)})
	if err != nil {
		t.Fatal(err)
	}
	return b.Runs[0].ID
}
