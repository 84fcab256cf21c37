package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/sse"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
	"github.com/agent2env/agent2env/internal/runtime/kube"
	"github.com/agent2env/agent2env/internal/store"
)

// Two daemons on one PostgreSQL store run the sandbox sweep once: on the
// leader only. When the leader's lock connection ends (as when the server
// drops a dead host's), the leader stops sweeping and the other daemon
// sweeps within 15 s; when that leader shuts down, the first one takes
// over again.
func TestLeaderLoops(t *testing.T) {
	url := postgresServer.URL(t)
	var (
		rts [2]*fakeruntime.Runtime
		ds  [2]*testDaemon
	)
	for i := range ds {
		rts[i] = fakeruntime.New()
		t.Cleanup(func() { rts[i].Close() })
		cfg := testConfig(t.TempDir(), rts[i])
		cfg.Store, cfg.Runtime = url, kube.Name // a runtime not of the machine, which daemons may share
		ds[i] = start(t, cfg, nil)
	}
	// The sweep lists the runtime every second; nothing else of an idle
	// daemon does.
	lists := func() [2]int { return [2]int{rts[0].Calls().List, rts[1].Calls().List} }
	sweeper := func(since [2]int, within time.Duration) int {
		t.Helper()
		for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			now := lists()
			a, b := now[0] > since[0], now[1] > since[1]
			if a && b {
				t.Fatalf("both daemons sweep: runtime lists %v, were %v", now, since)
			}
			if a || b {
				if a {
					return 0
				}
				return 1
			}
		}
		t.Fatalf("no daemon sweeps within %v", within)
		return -1
	}
	first := sweeper(lists(), 15*time.Second)
	base := lists()
	time.Sleep(4 * time.Second)
	if got := lists(); got[1-first] != base[1-first] || got[first] <= base[first] {
		t.Fatalf("runtime lists %v, were %v: want only daemon %d sweeping", got, base, first)
	}

	// End the leader's lock connection from the server.
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	killed := time.Now()
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND classid = $1 AND objid = hashtext(current_schema())::oid`,
		0x61326504 /* postgres.lockLeader */).Scan(&n); err != nil || n != 1 {
		t.Fatalf("terminate the leader's lock connection: %d terminated, %v", n, err)
	}
	for !ds[1-first].sys.Leader.Leading() || ds[first].sys.Leader.Leading() {
		if time.Since(killed) > 15*time.Second {
			t.Fatalf("15 s after the leader's lock connection ended: daemon %d leads %v, daemon %d leads %v",
				first, ds[first].sys.Leader.Leading(), 1-first, ds[1-first].sys.Leader.Leading())
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("handover after the lock connection ended: %v", time.Since(killed).Round(time.Millisecond))
	time.Sleep(1500 * time.Millisecond) // a sweep in flight at the handover ends
	base = lists()
	if second := sweeper(base, 5*time.Second); second != 1-first {
		t.Fatalf("daemon %d sweeps after the handover, want %d", second, 1-first)
	}

	// The new leader shuts down: the first daemon leads again.
	stopped := time.Now()
	if err := ds[1-first].stop(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	base = lists()
	if again := sweeper(base, 15*time.Second); again != first {
		t.Fatalf("daemon %d sweeps after the leader shut down, want %d", again, first)
	}
	t.Logf("handover after the leader shut down: %v", time.Since(stopped).Round(time.Millisecond))
}

// startShared starts two daemons on one PostgreSQL store and one
// runtime, as Kubernetes is to the daemons sharing a store, each with its
// configuration changed by setup (when not nil).
func startShared(t *testing.T, setup func(*Config)) [2]*testDaemon {
	t.Helper()
	url := postgresServer.URL(t)
	rt := fakeruntime.New()
	t.Cleanup(func() { rt.Close() })
	var ds [2]*testDaemon
	for i := range ds {
		cfg := testConfig(t.TempDir(), rt)
		cfg.Store, cfg.Runtime = url, kube.Name
		if setup != nil {
			setup(&cfg)
		}
		ds[i] = start(t, cfg, nil)
	}
	return ds
}

// A client following a run's events on one daemon sees what the daemon
// that carries the run out does: its output as it comes, and its end.
func TestRunEventsAcrossDaemons(t *testing.T) {
	ctx := context.Background()
	ds := startShared(t, nil)
	for _, d := range ds {
		d.importTiny()
	}
	task := fmt.Sprintf("name: talk\nimage: %s\nagent: custom\ngoal: talk\n"+
		"entrypoint: 'echo first; sleep 2; echo second; sleep 1'\nend: {timeout: 1m}\n", tinyRef)
	b, err := ds[1].api.Runs().Submit(ctx, api.RunSubmitRequest{Task: task})
	if err != nil {
		t.Fatal(err)
	}
	id := b.Runs[0].ID
	waitAgent(t, ds[1], ctx, id)
	var got []api.RunEvent
	fctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := ds[0].api.Runs().Events(fctx, id, func(ev api.RunEvent) error {
		got = append(got, ev)
		return nil
	}); err != nil {
		t.Fatalf("follow on the other daemon: %v (got %+v)", err, got)
	}
	var output bool
	for _, ev := range got {
		output = output || ev.Type == api.RunEventOutput && strings.Contains(ev.Text, "second")
	}
	end := got[len(got)-1]
	rec, err := ds[1].api.Runs().Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !output || end.Type != api.RunEventEnd || end.Status != rec.Status {
		t.Errorf("events followed on the other daemon: %+v; want the output \"second\" and the end (%s)", got, rec.Status)
	}
	host, _ := os.Hostname()
	if r, err := ds[1].sys.Store.GetRun(ctx, id); err != nil || r.ClaimedBy != host+":"+filepath.Join(ds[1].sys.cfg.DataDir, "runs") {
		t.Errorf("the run's claim: %+v, %v; want the submitting daemon's", r, err)
	}
}

// A daemon whose runtime is its machine's (oci) runs alone on its store:
// it is refused while another daemon of either runtime runs, and a
// daemon of either runtime is refused while it runs, saying why; once the
// first has shut down the second starts. Daemons of a runtime they share
// (kubernetes) run together.
func TestHostRuntimeRefused(t *testing.T) {
	const (
		oci  = "oci"
		kube = kube.Name
	)
	for _, tc := range []struct {
		first, second string
		refusal       string // "": the second starts beside the first
	}{
		{oci, oci, "another daemon with a runtime of its own machine uses store"},
		{kube, oci, "other daemons (--runtime kubernetes) use store"},
		{oci, kube, "a daemon with a runtime of its own machine (such as oci) uses store"},
		{kube, kube, ""},
	} {
		t.Run(tc.first+" then "+tc.second, func(t *testing.T) {
			url := postgresServer.URL(t)
			rt := fakeruntime.New()
			t.Cleanup(func() { rt.Close() })
			cfg := testConfig(t.TempDir(), rt)
			cfg.Store, cfg.Runtime = url, tc.first
			first := start(t, cfg, nil)

			second := testConfig(t.TempDir(), rt)
			second.Store, second.Runtime, second.Listen = url, tc.second, "127.0.0.1:0"
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			sys, err := New(ctx, second)
			if tc.refusal == "" {
				if err != nil {
					t.Fatalf("New beside the first daemon: %v", err)
				}
				sys.Close()
				return
			}
			if err == nil {
				sys.Close()
				t.Fatalf("a daemon with runtime %s started on the store of one with runtime %s", tc.second, tc.first)
			}
			for _, want := range []string{tc.refusal, "several daemons on one store all need --runtime kubernetes"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("New: %v; want it to say %q", err, want)
				}
			}
			if err := first.stop(); err != nil {
				t.Fatalf("shutdown: %v", err)
			}
			sys, err = New(ctx, second)
			if err != nil {
				t.Fatalf("New once the first daemon stopped: %v", err)
			}
			sys.Close()
		})
	}
}

// A daemon joining another on its store recovers nothing: the warm pool
// sandbox of the first, which a recovery would delete, stays.
func TestJoiningDaemonRecoversNothing(t *testing.T) {
	ctx := context.Background()
	url := postgresServer.URL(t)
	rt := fakeruntime.New()
	t.Cleanup(func() { rt.Close() })
	cfg := testConfig(t.TempDir(), rt)
	cfg.Store, cfg.Runtime = url, kube.Name
	first := start(t, cfg, nil)
	now := time.Now().UTC()
	pooled := &store.Sandbox{ID: "sb-pooled", Image: tinyRef, Status: string(api.StatusRunning), Runtime: "fake",
		Pool: "python", CreatedAt: now, UpdatedAt: now, AccessToken: "t"}
	if err := first.sys.Store.CreateSandbox(ctx, pooled); err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = t.TempDir()
	second := start(t, cfg, nil)
	if _, err := second.sys.Store.GetSandbox(ctx, pooled.ID); err != nil {
		t.Errorf("the first daemon's warm pool sandbox after the second started: %v", err)
	}
	if !strings.Contains(second.log.String(), "another daemon of the store leads") {
		t.Error("the joining daemon does not say why it recovers nothing")
	}
	// Alone on the store, a daemon recovers: the pool's sandbox goes.
	first.stop()
	second.stop()
	alone := start(t, cfg, nil)
	if _, err := alone.sys.Store.GetSandbox(ctx, pooled.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("the warm pool sandbox after a daemon started alone: %v; want it gone", err)
	}
}

// A client following the LLM exchange stream on one daemon sees the
// exchanges another daemon's proxy made, as they end.
func TestLLMStreamAcrossDaemons(t *testing.T) {
	ds := startShared(t, func(cfg *Config) {
		cfg.LLMConfig = filepath.Join(t.TempDir(), "llm.yaml")
		writeLLMConfig(t, cfg.LLMConfig, sseUpstream(t, "hello", nil))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ds[0].addr+"/api/v1/llm/exchanges/stream", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("follow: %d", resp.StatusCode)
	}
	if code, body := llmCall(t, ds[1].addr, "", false); code != http.StatusOK {
		t.Fatalf("LLM call on the other daemon: %d %s", code, body)
	}
	ev, err := sse.NewReader(resp.Body).Next()
	if err != nil || ev.Name == "error" || !strings.Contains(string(ev.Data), `"m"`) {
		t.Errorf("the follow on the first daemon: %q %s, %v; want the other daemon's exchange", ev.Name, ev.Data, err)
	}
}
