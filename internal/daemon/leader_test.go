package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
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
		cfg.Store = url
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
		WHERE locktype = 'advisory' AND granted AND objid = hashtext(current_schema())::oid`).Scan(&n); err != nil || n != 1 {
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
