package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
)

// execResult is the outcome of an exec run in the background.
type execResult struct {
	status int
	res    api.ExecResponse
	err    error
}

// slowExec starts `sh -c script` in sandbox id in the background and
// returns once the script has begun (it must create /workspace/started
// first); the result arrives on the channel.
func (d *daemon) slowExec(id, script string) <-chan execResult {
	d.t.Helper()
	out := make(chan execResult, 1)
	body, _ := json.Marshal(api.ExecRequest{Command: []string{"sh", "-c", script}, Timeout: 120})
	go func() {
		var r execResult
		resp, err := http.Post(d.url("/api/v1/sandboxes/"+id+"/exec"), "application/json", bytes.NewReader(body))
		if err != nil {
			r.err = err
		} else {
			r.status = resp.StatusCode
			r.err = json.NewDecoder(resp.Body).Decode(&r.res)
			resp.Body.Close()
		}
		out <- r
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if code, _ := d.download(id, "/workspace/started"); code == http.StatusOK {
			return out
		}
		if time.Now().After(deadline) {
			d.t.Fatal("the slow exec did not start within 30s")
		}
	}
}

// waitExit waits up to limit for the daemon to exit and returns its exit
// code.
func (d *daemon) waitExit(limit time.Duration) int {
	d.t.Helper()
	select {
	case <-d.exited:
		return d.cmd.ProcessState.ExitCode()
	case <-time.After(limit):
		d.t.Fatalf("daemon still running %v after SIGTERM:\n%s", limit, d.log.String())
		return -1
	}
}

// restartWith starts a daemon again on d's data directory, checks that
// sandbox id runs there, and deletes every sandbox, leaving nothing.
func (d *daemon) restartWith(id string) {
	d.t.Helper()
	d = startDaemon(d.t, d.dataDir)
	var got api.Sandbox
	if d.do("GET", "/api/v1/sandboxes/"+id, nil, &got); got.Status != api.StatusRunning {
		d.t.Errorf("sandbox after restart is %s (%s), want running", got.Status, got.Reason)
	}
	d.deleteAll()
	d.stop()
	d.assertNoLeaks()
}

// TestGracefulShutdown sends SIGTERM to the daemon while a request runs:
// the daemon stops accepting connections, answers the request when it
// completes, closes its store (the write-ahead log is checkpointed away)
// and exits 0; started again, it has its sandbox back.
func TestGracefulShutdown(t *testing.T) {
	d := startDaemon(t, "")
	sb := d.create(api.CreateSandboxRequest{Image: "agent2env/python"})
	res := d.slowExec(sb.ID, "touch /workspace/started; sleep 3; echo done")

	d.cmd.Process.Signal(syscall.SIGTERM)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c, err := net.Dial("tcp", d.addr)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("still accepting connections 5s after SIGTERM")
		}
	}
	r := <-res
	if r.err != nil || r.status != http.StatusOK || r.res.ExitCode != 0 || r.res.Stdout != "done\n" {
		t.Errorf("request in flight at SIGTERM: status %d, %+v, %v; want it completed", r.status, r.res, r.err)
	}
	if code := d.waitExit(30 * time.Second); code != 0 {
		t.Errorf("exit code after SIGTERM: %d, want 0:\n%s", code, d.log.String())
	}
	if _, err := os.Stat(filepath.Join(d.dataDir, "state.db-wal")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state.db-wal after exit: %v; a closed store leaves none", err)
	}
	if log := d.log.String(); !strings.Contains(log, `msg="shut down"`) {
		t.Errorf("no shutdown in the log:\n%s", log)
	}

	d.restartWith(sb.ID)
}

// TestSecondSignalForcesExit: a second SIGTERM ends a daemon that is
// waiting for a request, at once and with the signal's exit status; the
// next daemon recovers the sandbox.
func TestSecondSignalForcesExit(t *testing.T) {
	d := startDaemon(t, "")
	sb := d.create(api.CreateSandboxRequest{Image: "agent2env/python"})
	res := d.slowExec(sb.ID, "touch /workspace/started; sleep 120")

	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
		t.Fatalf("daemon exited with a request in flight, after one SIGTERM:\n%s", d.log.String())
	case <-time.After(500 * time.Millisecond):
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	if code := d.waitExit(10 * time.Second); code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit code after a second SIGTERM: %d, want %d", code, 128+int(syscall.SIGTERM))
	}
	if r := <-res; r.err == nil && r.status == http.StatusOK {
		t.Errorf("the request cut off by the forced exit was answered: %+v", r.res)
	}
	if log := d.log.String(); !strings.Contains(log, "second signal") {
		t.Errorf("the forced exit is not in the log:\n%s", log)
	}

	d.restartWith(sb.ID)
}
