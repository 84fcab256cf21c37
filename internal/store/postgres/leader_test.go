package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/leader"
)

// Two daemons' electors on one store: one leads; when its lock's
// connection is ended (pg_terminate_backend, as when the leader's host
// dies and the server drops it), it stops leading and the other leads
// within 15 s.
func TestLeaderHandover(t *testing.T) {
	url := server.URL(t)
	a, b := open(t, url), open(t, url)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	electors := []*leader.Elector{leader.New(a.Leadership(), nil), leader.New(b.Leadership(), nil)}
	done := make(chan struct{}, 2)
	for _, e := range electors {
		go func() {
			e.Run(ctx)
			done <- struct{}{}
		}()
	}
	defer func() {
		cancel()
		<-done
		<-done
	}()

	first := waitLeader(t, electors, 15*time.Second)
	time.Sleep(3 * time.Second) // a few retries of the follower
	if electors[0].Leading() && electors[1].Leading() {
		t.Fatal("both electors lead")
	}
	// The leader's connection is the one holding the lock.
	var pid int32
	if err := a.w.QueryRow(ctx, `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND classid = $1 AND objid = hashtext(current_schema())::oid`, int64(lockLeader)).Scan(&pid); err != nil {
		t.Fatalf("find the leader's connection: %v", err)
	}
	killed := time.Now()
	if _, err := a.w.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatalf("terminate the leader's connection: %v", err)
	}
	other := electors[1-first]
	for !other.Leading() {
		if time.Since(killed) > 15*time.Second {
			t.Fatal("the follower does not lead 15 s after the leader's connection ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(killed)
	for electors[first].Leading() {
		if time.Since(killed) > 15*time.Second {
			t.Fatal("the old leader still leads 15 s after its connection ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("handover: the follower led %v after the leader's connection ended; the old leader stopped after %v", took.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
}

// waitLeader waits until one of electors leads and returns its index.
func waitLeader(t *testing.T, electors []*leader.Elector, within time.Duration) int {
	t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for i, e := range electors {
			if e.Leading() {
				return i
			}
		}
	}
	t.Fatalf("no elector leads after %v", within)
	return -1
}
