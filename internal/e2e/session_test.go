package e2e

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
)

// TestCodeInterpreterImage checks the default image of contexts: one
// session runs python (with numpy, pandas and matplotlib), javascript and
// bash side by side, sharing its files.
func TestCodeInterpreterImage(t *testing.T) {
	d := startDaemon(t, "")
	py := d.newContext("/api/v1/contexts", api.CreateContextRequest{Language: "python", SessionName: "mixed"})
	res := d.execute("/api/v1/contexts/"+py.ContextID, "import numpy, pandas, matplotlib\n"+
		"open('/workspace/from-python', 'w').write(str(numpy.arange(3).sum()))\n"+
		"pandas.DataFrame({'a': [1, 2]})['a'].sum()", 120)
	if !res.Success || res.Result != "3" {
		t.Fatalf("python with numpy, pandas, matplotlib: %+v", res)
	}
	js := d.newContext("/api/v1/contexts", api.CreateContextRequest{Language: "javascript", SessionName: "mixed"})
	sh := d.newContext("/api/v1/contexts", api.CreateContextRequest{Language: "bash", SessionName: "mixed"})
	if js.SandboxID != py.SandboxID || sh.SandboxID != py.SandboxID {
		t.Errorf("one session in sandboxes %s, %s, %s", py.SandboxID, js.SandboxID, sh.SandboxID)
	}
	if res := d.execute("/api/v1/contexts/"+js.ContextID, "require('fs').readFileSync('/workspace/from-python', 'utf8')", 0); res.Result != "'3'" {
		t.Errorf("javascript in the python session: %+v", res)
	}
	if res := d.execute("/api/v1/contexts/"+sh.ContextID, "cat /workspace/from-python", 0); res.Output.Stdout != "3" {
		t.Errorf("bash in the python session: %+v", res)
	}
	var sb api.Sandbox
	d.do("GET", "/api/v1/sandboxes/"+py.SandboxID, nil, &sb)
	if sb.Image != "agent2env/code-interpreter" {
		t.Errorf("the session's sandbox runs %q, want the code-interpreter image", sb.Image)
	}
	d.deleteAll()
	d.assertNoLeaks()
}

// execSession runs code in a session over REST.
func (d *daemon) execSession(req api.SessionExecuteRequest) api.SessionExecuteResponse {
	d.t.Helper()
	var res api.SessionExecuteResponse
	if status := d.do("POST", "/api/v1/sessions/execute", req, &res); status != http.StatusOK {
		d.t.Fatalf("session execute %+v: status %d", req, status)
	}
	return res
}

// commandSession runs a shell command in a session over REST.
func (d *daemon) commandSession(id, flavor, command string) api.SessionCommandResponse {
	d.t.Helper()
	var res api.SessionCommandResponse
	req := api.SessionCommandRequest{Command: api.CommandLine{Shell: command}, SessionID: id, Flavor: flavor, Timeout: 60}
	if status := d.do("POST", "/api/v1/sessions/command", req, &res); status != http.StatusOK {
		d.t.Fatalf("session command %q: status %d", command, status)
	}
	return res
}

// TestSessions drives sessions over REST on real sandboxes: auto-create,
// reuse with state, an unknown id, python, javascript and bash in one
// session, flavors' limits as the sandbox's cgroups show them, and a
// shared volume of which each session sees its own directory.
func TestSessions(t *testing.T) {
	shared := t.TempDir()
	d := startDaemon(t, "", func(c *exec.Cmd) {
		c.Env = append(os.Environ(), "MSB_SHARED_VOLUME_PATH=[\""+shared+":/data\"]", "MSB_SESSION_TIMEOUT=600")
	})
	first := d.execSession(api.SessionExecuteRequest{Code: "x = 100\nprint(x)"})
	if !first.Created || first.SessionID == "" || first.Output.Stdout != "100\n" ||
		time.Until(first.ExpiresAt) < 9*time.Minute || time.Until(first.ExpiresAt) > 11*time.Minute {
		t.Fatalf("first execution: %+v", first)
	}
	again := d.execSession(api.SessionExecuteRequest{Code: "x + 1", SessionID: first.SessionID})
	if again.Created || again.Result != "101" {
		t.Errorf("reuse: %+v", again)
	}
	js := d.execSession(api.SessionExecuteRequest{Code: "require('fs').writeFileSync('/workspace/js.txt', 'js'); 6 * 7",
		Language: "javascript", SessionID: first.SessionID})
	sh := d.commandSession(first.SessionID, "", "cat /workspace/js.txt; echo; echo $((6 * 7))")
	if js.Result != "42" || sh.Stdout != "js\n42\n" || sh.Created {
		t.Errorf("javascript %+v, bash %+v", js, sh)
	}

	// Flavors, as the cgroups inside the sandboxes say.
	limits := "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes; " +
		"cat /sys/fs/cgroup/cpu.max 2>/dev/null || cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null || cat /sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us"
	for _, tt := range []struct{ flavor, memory, cpu string }{
		{"small", "1073741824", "100000"}, {"medium", "2147483648", "200000"}, {"large", "4294967296", "400000"},
	} {
		r := d.commandSession("flavor-"+tt.flavor, tt.flavor, limits)
		lines := strings.Fields(r.Stdout)
		if r.ExitCode != 0 || len(lines) < 2 || lines[0] != tt.memory || lines[1] != tt.cpu {
			t.Errorf("flavor %s: cgroup limits %q (exit %d, %s), want memory %s, cpu quota %s", tt.flavor, r.Stdout, r.ExitCode, r.Stderr, tt.memory, tt.cpu)
		}
		var s api.Session
		if d.do("GET", "/api/v1/sessions/flavor-"+tt.flavor, nil, &s); s.Flavor != tt.flavor {
			t.Errorf("session %+v", s)
		}
	}

	// The shared volume: each session its own directory.
	if r := d.commandSession("vol-a", "", "echo secret > /data/a.txt && ls /data"); r.ExitCode != 0 || r.Stdout != "a.txt\n" {
		t.Fatalf("write to the shared volume: %+v", r)
	}
	if r := d.commandSession("vol-b", "", "ls -A /data; cat /data/../data/a.txt"); r.Stdout != "" || r.ExitCode == 0 {
		t.Errorf("another session sees: %+v", r)
	}
	if b, err := os.ReadFile(filepath.Join(shared, "vol-a", "a.txt")); err != nil || string(b) != "secret\n" {
		t.Errorf("the session's file on the host: %q %v", b, err)
	}
	// A symlink the sandbox makes in the volume resolves inside the
	// sandbox: a host file beside the volume stays out of reach.
	hostFile := filepath.Join(filepath.Dir(shared), "beside-the-volume")
	if err := os.WriteFile(hostFile, []byte("host only\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(hostFile)
	if r := d.commandSession("vol-a", "", "ln -s "+hostFile+" /data/link && cat /data/link"); r.ExitCode == 0 || strings.Contains(r.Stdout, "host only") {
		t.Errorf("a symlink in the volume reached the host: %+v", r)
	}

	var st api.Stats
	if d.do("GET", "/api/v1/stats", nil, &st); st.Sessions.Active != 6 || st.Executions.Count < 8 || st.Sandboxes["running"] != 6 {
		t.Errorf("stats %+v", st)
	}
	var list api.SessionList
	d.do("GET", "/api/v1/sessions", nil, &list)
	for _, s := range list.Items {
		if code := d.do("DELETE", "/api/v1/sessions/"+s.SessionID, nil, nil); code != http.StatusOK {
			t.Errorf("delete session %s: %d", s.SessionID, code)
		}
	}
	var sbs api.SandboxList
	if d.do("GET", "/api/v1/sandboxes", nil, &sbs); len(sbs.Items) != 0 {
		t.Errorf("sandboxes left after the sessions went: %+v", sbs.Items)
	}
	d.assertNoLeaks()
}

// TestSessionLimits: the daemon's --max-sandboxes and --cpu-overcommit
// refuse new sessions and sandboxes on real sandboxes, 507 and 429 with
// the usage and a suggestion, and make nothing.
func TestSessionLimits(t *testing.T) {
	overcommit := strconv.FormatFloat(1.5/float64(runtime.NumCPU()), 'f', -1, 64) // 1500m on any host
	d := startDaemon(t, "", func(c *exec.Cmd) {
		c.Args = append(c.Args, "--max-sandboxes", "2", "--cpu-overcommit", overcommit)
	})
	refused := func(status int, body api.ResourceError, wantStatus int, code, suggestion string, sandboxes int, milliCPU int64) {
		t.Helper()
		u := body.Usage
		if status != wantStatus || body.Code != code || !strings.Contains(body.Suggestion, suggestion) || u.Sandboxes != sandboxes ||
			u.MilliCPU != milliCPU || u.MilliCPUCapacity != 1500 || u.MaxSandboxes != 2 || u.Sessions != 1 {
			t.Errorf("status %d, body %+v: want %d %s, a suggestion saying %q, %d sandboxes, %dm of 1500m cpu, 1 session",
				status, body, wantStatus, code, suggestion, sandboxes, milliCPU)
		}
		var sbs api.SandboxList
		if d.do("GET", "/api/v1/sandboxes", nil, &sbs); len(sbs.Items) != sandboxes {
			t.Errorf("sandboxes after a refusal: %+v", sbs.Items)
		}
	}
	d.commandSession("a", "", "true") // small: 1 cpu
	command := api.SessionCommandRequest{Command: api.CommandLine{Shell: "true"}, SessionID: "b"}
	var body api.ResourceError
	status := d.do("POST", "/api/v1/sessions/command", command, &body)
	refused(status, body, http.StatusInsufficientStorage, api.CodeInsufficientCapacity, "delete idle sessions", 1, 1000)
	var sb api.Sandbox
	if status := d.do("POST", "/api/v1/sandboxes", `{"image":"agent2env/code-interpreter","cpu":"250m","memory":"256Mi"}`, &sb); status != http.StatusCreated {
		t.Fatalf("a sandbox within the capacity: %d %+v", status, sb)
	}
	body = api.ResourceError{}
	status = d.do("POST", "/api/v1/sessions/command", command, &body)
	refused(status, body, http.StatusTooManyRequests, api.CodeLimitExceeded, "--max-sandboxes", 2, 1250)
	if code := d.do("DELETE", "/api/v1/sessions/a", nil, nil); code != http.StatusOK {
		t.Errorf("delete session a: %d", code)
	}
	d.deleteAll()
	d.assertNoLeaks()
}
