package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
)

func jsonErr(raw []byte, e *api.Error) error { return json.Unmarshal(raw, e) }

// TestKillDaemonAndRecover kills the daemon with SIGKILL while sandboxes
// run, kills one sandbox while the daemon is down, and restarts it: the
// live sandbox is re-adopted with its files, the dead one is marked failed
// and cleaned, and after deletion nothing is left.
func TestKillDaemonAndRecover(t *testing.T) {
	d := startDaemon(t, "")
	keep := d.create(api.CreateSandboxRequest{Image: "agent2env/python"})
	lost := d.create(api.CreateSandboxRequest{Image: "agent2env/python"})
	if code, body := d.upload(keep.ID, "/workspace/state.txt", []byte("survives")); code != http.StatusOK {
		t.Fatalf("upload: %d %s", code, body)
	}
	d.kill()

	pid := agentPid(t, lost.ID)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill agent of %s: %v", lost.ID, err)
	}
	time.Sleep(200 * time.Millisecond)

	d = startDaemon(t, d.dataDir)
	var sb api.Sandbox
	if d.do("GET", "/api/v1/sandboxes/"+keep.ID, nil, &sb); sb.Status != api.StatusRunning {
		t.Fatalf("re-adopted sandbox is %s: %s", sb.Status, sb.Reason)
	}
	if code, got := d.download(keep.ID, "/workspace/state.txt"); code != http.StatusOK || string(got) != "survives" {
		t.Errorf("file after restart: %d %q", code, got)
	}
	if res := d.exec(keep.ID, "python3", "-c", "print(2)"); res.Stdout != "2\n" {
		t.Errorf("exec after restart: %+v", res)
	}
	if d.do("GET", "/api/v1/sandboxes/"+lost.ID, nil, &sb); sb.Status != api.StatusFailed || sb.Reason == "" {
		t.Errorf("sandbox killed while the daemon was down is %s (%q), want failed with a reason", sb.Status, sb.Reason)
	}
	d.deleteAll()
	d.stop()
	d.assertNoLeaks()
}

// agentPid finds the host pid of a sandbox's agent through its cgroup.
func agentPid(t *testing.T, id string) int {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		cg, _ := os.ReadFile("/proc/" + e.Name() + "/cgroup")
		if strings.HasPrefix(string(cmdline), "/.agent2env/agent2env\x00agent") && strings.Contains(string(cg), "/agent2env/") && strings.Contains(string(cg), "/"+id+"\n") {
			return pid
		}
	}
	t.Fatalf("no agent process found for sandbox %s", id)
	return 0
}
