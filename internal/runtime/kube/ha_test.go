package kube_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/agent2env/agent2env/internal/store/postgres/pgtest"
)

// postgresServer is the PostgreSQL server of the tests of several daemons,
// started by the first that asks (TestMain stops it).
var postgresServer pgtest.Shared

// haDaemon is one `agent2env serve` process of several sharing a store.
type haDaemon struct {
	name   string
	addr   string
	api    *client.Client
	log    string // its log file
	cmd    *exec.Cmd
	exited chan struct{}
}

// startDaemons starts n daemons, the binary of $AGENT2ENV_BIN (or a
// build), on the tier-A cluster k and the PostgreSQL store at storeURL,
// each with its own data directory and extra as more flags, and waits
// until every one is ready (its /readyz: store and cluster reached).
func startDaemons(t testing.TB, k *tierA, storeURL string, n int, extra ...string) []*haDaemon {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin := daemonBinary(t, dir)
	kubeconfig, err := k.c.Kubectl(ctx, "config", "view", "--flatten", "--raw")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kubeconfig"), kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	ds := make([]*haDaemon, n)
	for i := range ds {
		d := &haDaemon{name: fmt.Sprintf("daemon%d", i), exited: make(chan struct{})}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		d.addr = l.Addr().String()
		l.Close()
		data := filepath.Join(dir, d.name)
		d.log = data + ".log"
		logf, err := os.Create(d.log)
		if err != nil {
			t.Fatal(err)
		}
		args := append([]string{"serve", "--runtime", "kubernetes", "--kubeconfig", filepath.Join(dir, "kubeconfig"),
			"--kube-namespace", k.ns, "--kube-connect", "direct", "--kube-agent-image", agentImage,
			"--store", storeURL, "--prebuild-images=false", "--log-level", "debug",
			"--listen", d.addr, "--data-dir", data, "--cache-dir", filepath.Join(dir, "cache")}, extra...)
		d.cmd = exec.Command(bin, args...)
		d.cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir}
		d.cmd.Stdout, d.cmd.Stderr = logf, logf
		d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := d.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		logf.Close()
		go func() {
			_ = d.cmd.Wait()
			close(d.exited)
		}()
		t.Cleanup(func() {
			_ = d.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-d.exited:
			case <-time.After(30 * time.Second):
				_ = d.cmd.Process.Kill()
				t.Errorf("%s did not stop on SIGTERM", d.name)
			}
			if t.Failed() {
				b, _ := os.ReadFile(d.log)
				t.Logf("%s's log:\n%s", d.name, b)
			}
		})
		if d.api, err = client.New("http://" + d.addr); err != nil {
			t.Fatal(err)
		}
		ds[i] = d
	}
	for _, d := range ds {
		for !d.ready(ctx) {
			select {
			case <-d.exited:
				b, _ := os.ReadFile(d.log)
				t.Fatalf("%s exited:\n%s", d.name, b)
			case <-ctx.Done():
				b, _ := os.ReadFile(d.log)
				t.Fatalf("%s not ready:\n%s", d.name, b)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return ds
}

// ready reports whether the daemon's /readyz answers 200.
func (d *haDaemon) ready(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.addr+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// leads reports whether the daemon's log says it leads (its last word on
// the election).
func (d *haDaemon) leads() bool {
	b, _ := os.ReadFile(d.log)
	s := string(b)
	return strings.LastIndex(s, "leader election: this daemon leads") > strings.LastIndex(s, "this one follows")
}

// leader waits up to within for exactly one of ds to lead, and returns it.
func leader(t testing.TB, ds []*haDaemon, within time.Duration) *haDaemon {
	t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var leaders []*haDaemon
		for _, d := range ds {
			if d.leads() {
				leaders = append(leaders, d)
			}
		}
		if len(leaders) == 1 {
			return leaders[0]
		}
	}
	t.Fatalf("no single leader among the daemons within %v", within)
	return nil
}

// TestKillLeader runs three daemon processes on one PostgreSQL store and
// the tier-A cluster, spreads a client's sessions and task runs over them,
// and kills the leader with SIGKILL while it carries out a run and has
// another queued: another daemon leads within 15 s and sweeps (a sandbox
// whose TTL ends after the kill goes), every run ends once the dead
// daemon's lease lapses (its running one failed, with the reason; its
// queued one carried out by another daemon; the others' succeeded), and
// each session exists once, still usable through the survivors.
func TestKillLeader(t *testing.T) {
	k := startTierA(t)
	url := postgresServer.URL(t)
	ds := startDaemons(t, k, url, 3, "--max-runs", "1")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	lead := leader(t, ds, 10*time.Second)
	var survivors []*haDaemon
	for _, d := range ds {
		if d != lead {
			survivors = append(survivors, d)
		}
	}

	// Each session asked of all three daemons at once: made once.
	sessions := []string{"alpha", "beta"}
	var wg sync.WaitGroup
	for _, s := range sessions {
		for _, d := range ds {
			wg.Go(func() {
				res, err := d.api.Sessions().ExecuteCommand(ctx, api.SessionCommandRequest{SessionID: s,
					Command: api.CommandLine{Shell: "echo " + s}})
				if err != nil || res.ExitCode != 0 || res.Stdout != s+"\n" {
					t.Errorf("session %s on %s: %+v, %v", s, d.name, res, err)
				}
			})
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	// Runs: on the leader one that will be running when it dies and one
	// queued behind it (--max-runs 1); one on each survivor.
	task := func(name string, secs int) string {
		return fmt.Sprintf("name: %s\nimage: %s\nagent: custom\ngoal: wait\n"+
			"entrypoint: 'sleep %d; echo done'\nend: {timeout: 3m}\n", name, testImage, secs)
	}
	submit := func(d *haDaemon, name string, secs int) string {
		b, err := d.api.Runs().Submit(ctx, api.RunSubmitRequest{Task: task(name, secs)})
		if err != nil {
			t.Fatalf("submit %s to %s: %v", name, d.name, err)
		}
		return b.Runs[0].ID
	}
	running := submit(lead, "running", 60)
	queued := submit(lead, "queued", 1)
	others := []string{submit(survivors[0], "other0", 1), submit(survivors[1], "other1", 1)}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		r, err := survivors[0].api.Runs().Get(ctx, running)
		if err != nil {
			t.Fatal(err)
		}
		if r.Phase == api.PhaseAgent {
			break
		}
		if r.Status.Final() || time.Now().After(deadline) {
			t.Fatalf("run %s did not reach its agent: %+v", running, r)
		}
	}
	if r, err := survivors[0].api.Runs().Get(ctx, queued); err != nil || r.Status != api.RunQueued {
		t.Fatalf("run %s behind the running one: %+v, %v; want queued", queued, r, err)
	}

	// A sandbox whose TTL ends after the kill: only a leader's sweep
	// expires it, so its going shows the loops taken over.
	ttl := 5
	expiring, err := survivors[0].api.Sandbox.Create(ctx, api.CreateSandboxRequest{Image: testImage, TTL: &ttl})
	if err != nil {
		t.Fatal(err)
	}

	killed := time.Now()
	if err := lead.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-lead.exited
	next := leader(t, survivors, 15*time.Second)
	took := time.Since(killed)
	t.Logf("leader %s killed; %s leads %v later", lead.name, next.name, took.Round(10*time.Millisecond))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, err := survivors[1].api.Sandbox.Get(ctx, expiring.ID)
		if errors.Is(err, client.ErrNotFound) {
			t.Logf("sandbox %s (ttl %d s) expired by the new leader's sweep %v after the kill", expiring.ID, ttl, time.Since(killed).Round(100*time.Millisecond))
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s still there %v after its TTL of %d s: no leader sweeps", expiring.ID, time.Since(killed), ttl)
		}
	}

	// Every run ends: the survivors take the dead daemon's runs once their
	// lease lapses (30 s, then their next check): the running one ends
	// failed, the queued one (no inputs) is carried out by its taker.
	want := map[string]api.RunStatus{running: api.RunFailed, queued: api.RunSucceeded,
		others[0]: api.RunSucceeded, others[1]: api.RunSucceeded}
	for id, status := range want {
		var r *api.Run
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
			var err error
			if r, err = next.api.Runs().Get(ctx, id); err != nil {
				t.Fatal(err)
			}
			if r.Status.Final() || time.Now().After(deadline) {
				break
			}
		}
		if r.Status != status {
			t.Errorf("run %s (%s): %s %q, want %s", id, r.Task, r.Status, r.Reason, status)
		}
		if id == running && !strings.Contains(r.Reason, "daemon running it stopped") {
			t.Errorf("run %s: reason %q, want the daemon's death", id, r.Reason)
		}
		t.Logf("run %s (%s): %s %q, %v after the kill", id, r.Task, r.Status, r.Reason, time.Since(killed).Round(time.Second))
	}

	// The sessions: one each, still answering through every survivor.
	for _, d := range survivors {
		list, err := d.api.Sessions().List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range list {
			got = append(got, s.SessionID)
		}
		if slices.Sort(got); !slices.Equal(got, sessions) {
			t.Errorf("%s lists sessions %v, want %v once each", d.name, got, sessions)
		}
		for _, s := range sessions {
			res, err := d.api.Sessions().ExecuteCommand(ctx, api.SessionCommandRequest{SessionID: s,
				Command: api.CommandLine{Shell: "echo again"}})
			if err != nil || res.Created || res.Stdout != "again\n" {
				t.Errorf("session %s on %s after the kill: %+v, %v", s, d.name, res, err)
			}
		}
	}
	if took > 15*time.Second {
		t.Errorf("another daemon led %v after the leader died, want within 15 s", took)
	}
}
