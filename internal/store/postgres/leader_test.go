package postgres

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
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

// A lock that one store unlocked is another's at once: a daemon started
// right after another stopped must not find it still held (the server
// releases a closed connection's locks only once it notices the close).
func TestUnlockReleasesAtOnce(t *testing.T) {
	url := server.URL(t)
	a, b := open(t, url), open(t, url)
	ctx := context.Background()
	held := func() (n int) {
		if err := b.w.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted
			AND classid = $1 AND objid = hashtext(current_schema())::oid`, int64(lockDaemons)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for i := range 20 {
		h, err := a.Daemons(true).TryLock(ctx)
		if err != nil || h == nil {
			t.Fatalf("round %d: the first store's lock: %v, %v", i, h, err)
		}
		h.Unlock()
		if n := held(); n != 0 {
			t.Fatalf("round %d: the lock is still held right after Unlock returned", i)
		}
		if h, err = b.Daemons(true).TryLock(ctx); err != nil || h == nil {
			t.Fatalf("round %d: the second store cannot take the lock after Unlock: %v", i, err)
		}
		h.Unlock()
	}
}

// The daemons' lock: any number of daemons hold it shared together, and
// one holds it exclusive (alone) only while no other holds it either way.
func TestDaemonsLock(t *testing.T) {
	url := server.URL(t)
	for _, tc := range []struct {
		name          string
		first, second bool // alone
		together      bool
	}{
		{"shared then shared", false, false, true},
		{"shared then exclusive", false, true, false},
		{"exclusive then shared", true, false, false},
		{"exclusive then exclusive", true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			first, err := open(t, url).Daemons(tc.first).TryLock(ctx)
			if err != nil || first == nil {
				t.Fatalf("the first daemon's lock: %v, %v", first, err)
			}
			defer first.Unlock()
			second, err := open(t, url).Daemons(tc.second).TryLock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if second != nil {
				defer second.Unlock()
			}
			if got := second != nil; got != tc.together {
				t.Errorf("the second daemon took the lock: %v; want %v", got, tc.together)
			}
		})
	}
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

// The leader is another process, killed (SIGKILL, as when a daemon
// crashes): the server ends its connection and the follower here leads
// within 15 s.
func TestLeaderProcessKilled(t *testing.T) {
	url := server.URL(t)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), leaderChildEnv+"="+url)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	lines := bufio.NewScanner(out)
	for lines.Scan() && lines.Text() != "leading" {
	}
	if lines.Err() != nil {
		t.Fatalf("the child process: %v", lines.Err())
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := leader.New(open(t, url).Leadership(), nil)
	done := make(chan struct{})
	go func() { defer close(done); e.Run(ctx) }()
	defer func() { cancel(); <-done }()
	time.Sleep(3 * time.Second)
	if e.Leading() {
		t.Fatal("leads while the child process does")
	}
	killed := time.Now()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for !e.Leading() {
		if time.Since(killed) > 15*time.Second {
			t.Fatal("does not lead 15 s after the leader process was killed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("handover after the leader process was killed: %v", time.Since(killed).Round(time.Millisecond))
}

// leaderChildEnv names the store leaderChild campaigns on: TestMain runs
// it instead of the tests when it is set.
const leaderChildEnv = "AGENT2ENV_TEST_LEADER_CHILD"

// leaderChild is TestLeaderProcessKilled's leader, in a process of its
// own: it says "leading" once it leads, and runs until killed.
func leaderChild(url string) int {
	s, err := Open(context.Background(), url)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	e := leader.New(s.Leadership(), nil)
	go e.Run(context.Background())
	for !e.Leading() {
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("leading")
	select {}
}
