package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
)

// runTask is a task of the custom agent on agent2env/python: the agent is
// a shell command, end conditions and liveness as given, and every .txt
// file of the workdir an artifact.
func runTask(name, entrypoint, timeout, check, idle, heartbeat string) string {
	return fmt.Sprintf(`name: %s
image: agent2env/python
agent: custom
goal: run the script
entrypoint: %q
end:
  timeout: %s
  success_file: /workspace/done.txt
  check: %q
liveness:
  idle: %s
  heartbeat: %s
artifacts: ["/workspace/**/*.txt"]
`, name, entrypoint, timeout, check, idle, heartbeat)
}

// submit submits req and returns its batch.
func (d *daemon) submit(req api.RunSubmitRequest) api.RunBatch {
	d.t.Helper()
	var b api.RunBatch
	if code := d.do("POST", "/api/v1/runs", req, &b); code != http.StatusCreated {
		d.t.Fatalf("submit: status %d", code)
	}
	return b
}

// waitRuns waits for every run of batch id to end.
func (d *daemon) waitRuns(id string, n int, within time.Duration) []api.Run {
	d.t.Helper()
	deadline := time.Now().Add(within)
	for {
		var list api.RunList
		if code := d.do("GET", "/api/v1/runs?batch="+id, nil, &list); code != http.StatusOK {
			d.t.Fatalf("list runs: status %d", code)
		}
		done := len(list.Items) == n
		for _, r := range list.Items {
			done = done && r.Status.Final()
		}
		if done {
			return list.Items
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("runs of %s not ended after %s: %+v", id, within, list.Items)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitRunPhase waits for run id to reach phase and returns it.
func (d *daemon) waitRunPhase(id, phase string) api.Run {
	d.t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var r api.Run
		d.do("GET", "/api/v1/runs/"+id, nil, &r)
		if r.Phase == phase {
			return r
		}
		if r.Status.Final() || time.Now().After(deadline) {
			d.t.Fatalf("run %s did not reach %s: %+v", id, phase, r)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRunOutcomes runs the custom agent in real sandboxes to each end: it
// succeeds; it sleeps and ends hung within its liveness window, long
// before its timeout; it keeps printing and ends at its timeout; its
// check fails; its sandbox is killed under it. Every run brings its
// artifacts back, the killed one's too, and none leaves a sandbox.
func TestRunOutcomes(t *testing.T) {
	d := startDaemon(t, "")
	tests := []struct {
		name, task string
		kill       bool
		status     api.RunStatus
		reason     string
		within     time.Duration // after the run started
	}{
		{"succeeded", runTask("ok", "mkdir -p sub && echo ok > sub/a.txt && echo done > done.txt", "2m", "grep -q ok sub/a.txt", "1m", "30s"),
			false, api.RunSucceeded, "the check passed", time.Minute},
		{"hung", runTask("hung", "echo started > s.txt; exec sleep 100000", "10m", "true", "3s", "30s"),
			false, api.RunHung, "no progress for 3s", 40 * time.Second},
		{"timeout", runTask("timeout", "echo t > t.txt; while true; do echo tick; sleep 0.2; done", "4s", "true", "1m", "30s"),
			false, api.RunTimeout, "timeout of 4s", 40 * time.Second},
		{"check fails", runTask("check", "echo done > done.txt", "2m", "echo 2 tests failed; exit 1", "1m", "30s"),
			false, api.RunFailed, "the check exited 1: 2 tests failed", time.Minute},
		{"sandbox lost", runTask("lost", "echo l > l.txt; exec sleep 100000", "10m", "true", "10m", "5s"),
			true, api.RunSandboxLost, "the sandbox", time.Minute},
	}
	batches := make([]api.RunBatch, len(tests))
	for i, tt := range tests {
		batches[i] = d.submit(api.RunSubmitRequest{Task: tt.task})
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := batches[i].Runs[0].ID
			if tt.kill {
				r := d.waitRunPhase(id, api.PhaseAgent)
				time.Sleep(500 * time.Millisecond)
				if err := syscall.Kill(agentPid(t, r.SandboxID), syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
			}
			// The first runs may wait for the image to be made.
			r := d.waitRuns(batches[i].ID, 1, 15*time.Minute)[0]
			// From the sandbox running to the run's end.
			took := r.EndedAt.Sub(*r.StartedAt) - time.Duration(r.Timings[api.PhaseCreate]*float64(time.Millisecond))
			t.Logf("%s after %s: %s (timings %v)", r.Status, took.Round(time.Millisecond), r.Reason, r.Timings)
			if took > tt.within {
				t.Errorf("ended after %s, want within %s", took, tt.within)
			}
			if r.Status != tt.status || !strings.Contains(r.Reason, tt.reason) {
				t.Errorf("%s %q, want %s %q", r.Status, r.Reason, tt.status, tt.reason)
			}
			// Every run brings its artifacts back, the killed one's too:
			// its sandbox kept its files, and is started again to give
			// them.
			if len(r.Artifacts) == 0 || r.ArtifactsError != "" {
				t.Errorf("artifacts %+v, error %q; want them collected", r.Artifacts, r.ArtifactsError)
			}
			if tt.kill && (len(r.Artifacts) != 1 || r.Artifacts[0].Path != "/workspace/l.txt") {
				t.Errorf("artifacts of the killed sandbox %+v, want /workspace/l.txt", r.Artifacts)
			}
			for _, a := range r.Artifacts {
				resp, err := http.Get(d.url("/api/v1/runs/" + id + "/artifacts" + a.Path))
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Errorf("artifact %s: %v %v", a.Path, resp, err)
				}
				if resp != nil {
					resp.Body.Close()
				}
			}
			// The sandbox goes once the run's end is recorded.
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				var sb api.Sandbox
				code := d.do("GET", "/api/v1/sandboxes/"+r.SandboxID, nil, &sb)
				if code == http.StatusNotFound {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("the run's sandbox is still there: %d %+v", code, sb)
					break
				}
			}
		})
	}
	d.stop()
	d.assertNoLeaks()
}

// TestRunResources: a task's resources are its sandbox's limits; its
// disk is the size of the sandbox's writable storage, as df sees it.
func TestRunResources(t *testing.T) {
	d := startDaemon(t, "")
	b := d.submit(api.RunSubmitRequest{Task: `name: disk
image: agent2env/python
agent: custom
goal: measure the disk
resources: {cpu: 500m, memory: 256Mi, disk: 100Mi}
entrypoint: "df -k /workspace | tail -n 1 | awk '{print $2}' > size.txt"
end:
  check: "s=$(cat size.txt); echo \"$s KiB\"; test $s -gt 60000 && test $s -le 102400"
artifacts: [/workspace/size.txt]
`})
	r := d.waitRuns(b.ID, 1, 15*time.Minute)[0]
	if r.Status != api.RunSucceeded {
		t.Errorf("%s %q: want the sandbox's storage about 100Mi (output %q)", r.Status, r.Reason, r.OutputTail)
	}
	if resp, err := http.Get(d.url("/api/v1/runs/" + r.ID + "/artifacts/workspace/size.txt")); err == nil {
		size, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Logf("df: %s KiB", strings.TrimSpace(string(size)))
	}
	d.stop()
	d.assertNoLeaks()
}

// TestRunsParallel runs 20 runs of the custom agent 10 at a time: all
// succeed and nothing is left (sandboxes, mounts, processes).
func TestRunsParallel(t *testing.T) {
	d := startDaemon(t, "")
	b := d.submit(api.RunSubmitRequest{Task: runTask("many", "echo done > done.txt", "2m", "test -s done.txt", "1m", "30s"),
		Repeats: 20, Parallel: 10})
	start := time.Now()
	runs := d.waitRuns(b.ID, 20, 10*time.Minute)
	t.Logf("20 runs, 10 at a time, in %s", time.Since(start).Round(time.Millisecond))
	for _, r := range runs {
		if r.Status != api.RunSucceeded {
			t.Errorf("run %d: %s %s", r.Repeat, r.Status, r.Reason)
		}
	}
	d.stop()
	d.assertNoLeaks()
}

// TestRunDaemonRestart stops the daemon during five runs' agents, with
// SIGKILL and with SIGTERM: the agents go on in their sandboxes while no
// daemon runs, and the next daemon follows each again, reads the output
// written meanwhile, and ends it succeeded once its agent has finished;
// a run stopped in its setup ends failed with reason "daemon restarted",
// with the artifacts of its sandbox, which survived.
func TestRunDaemonRestart(t *testing.T) {
	for _, stop := range []string{"SIGKILL", "SIGTERM"} {
		t.Run(stop, func(t *testing.T) {
			d := startDaemon(t, "")
			agentTask := runTask("carried", "echo partial > p.txt; echo before; "+
				"while [ ! -f go.txt ]; do sleep 0.1; done; echo meanwhile; echo done > done.txt; sleep 1; echo after", "30m", "test -f done.txt", "30m", "30s")
			b := d.submit(api.RunSubmitRequest{Task: agentTask, Repeats: 5})
			setupTask := strings.Replace(runTask("killed", "echo done > done.txt", "30m", "true", "30m", "30s"),
				"artifacts:", "setup: ['echo partial > p.txt; exec sleep 100000']\nartifacts:", 1)
			bs := d.submit(api.RunSubmitRequest{Task: setupTask})
			var sandboxes []string
			for _, r := range b.Runs {
				sandboxes = append(sandboxes, d.waitRunPhase(r.ID, api.PhaseAgent).SandboxID)
			}
			d.waitRunPhase(bs.Runs[0].ID, api.PhaseSetup)
			time.Sleep(500 * time.Millisecond) // the agents' "before" read, and saved
			if stop == "SIGKILL" {
				d.kill()
			} else {
				d.stop()
			}
			d = startDaemon(t, d.dataDir)
			for _, id := range sandboxes {
				if code, body := d.upload(id, "/workspace/go.txt", []byte("go")); code != http.StatusOK {
					t.Fatalf("go.txt into %s: %d %s", id, code, body)
				}
			}
			for _, r := range d.waitRuns(b.ID, 5, 2*time.Minute) {
				if r.Status != api.RunSucceeded {
					t.Errorf("run %d: %s %q", r.Repeat, r.Status, r.Reason)
				}
				var out strings.Builder
				resp, err := http.Get(d.url("/api/v1/runs/" + r.ID + "/logs"))
				if err == nil {
					_, _ = io.Copy(&out, resp.Body)
					resp.Body.Close()
				}
				want := "before\nmeanwhile\nafter\n"
				if stop == "SIGKILL" { // its last state may be up to 250 ms behind what it read
					want = "meanwhile\nafter\n"
				}
				if got := out.String(); (stop == "SIGTERM" && got != want) || !strings.HasSuffix(got, want) {
					t.Errorf("run %d output %q, want %q", r.Repeat, got, want)
				}
			}
			for _, r := range d.waitRuns(bs.ID, 1, time.Minute) {
				if r.Status != api.RunFailed || r.Reason != "daemon restarted" {
					t.Errorf("the run stopped in its setup: %s %q", r.Status, r.Reason)
				}
				if len(r.Artifacts) != 1 || r.Artifacts[0].Path != "/workspace/p.txt" {
					t.Errorf("the run stopped in its setup, artifacts: %+v", r.Artifacts)
				}
			}
			d.stop()
			d.assertNoLeaks()
		})
	}
}

// TestRunBadTasks: a task that does not load is 400 with a message naming
// the field, and records nothing.
func TestRunBadTasks(t *testing.T) {
	d := startDaemon(t, "")
	for _, tt := range []struct{ task, field string }{
		{"name: t\nagent: nope\ngoal: g\n", "agent"},
		{"name: t\nagent: custom\nentrypoint: x\n", "goal"},
		{"name: t\nagent: custom\ngoal: g\nentrypoint: x\nend: {timeout: soon}\n", "end.timeout"},
		{"name: t\nagent: custom\ngoal: g\nentrypoint: x\ninputs: [{source: ../etc, destination: /workspace/x}]\n", "inputs[0].source"},
		{"name: t\nagent: custom\ngoal: g\nentrypoint: x\nartifacts: [/workspace/../../etc/shadow]\n", "artifacts[0]"},
	} {
		var e api.Error
		if code := d.do("POST", "/api/v1/runs", api.RunSubmitRequest{Task: tt.task}, &e); code != http.StatusBadRequest ||
			!strings.Contains(e.Message, tt.field) {
			t.Errorf("task %q: %d %+v, want 400 naming %s", tt.task, code, e, tt.field)
		}
	}
	var list api.RunList
	if d.do("GET", "/api/v1/runs", nil, &list); len(list.Items) != 0 {
		t.Errorf("bad tasks recorded runs: %+v", list.Items)
	}
}

// TestTaskRunCLI runs `agent2env task run` against a daemon: the task's
// inputs come from beside its file, a matrix of two models runs twice
// each, the results land in --out, and the exit code says whether every
// run succeeded.
func TestTaskRunCLI(t *testing.T) {
	d := startDaemon(t, "")
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "repo"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "repo", "a.txt"), []byte("A\n"), 0o644)
	task := func(name, check string) string {
		p := filepath.Join(dir, name+".yaml")
		os.WriteFile(p, []byte(fmt.Sprintf(`name: %s
image: agent2env/python
agent: custom
goal: copy
entrypoint: cat repo/a.txt > out.txt && echo copied
inputs: [{source: ./repo, destination: /workspace/repo}]
end: {check: %q}
artifacts: [/workspace/out.txt]
`, name, check)), 0o644)
		return p
	}
	cli := func(args ...string) (int, string) {
		cmd := exec.Command(binary, append([]string{"--url", d.url("")}, args...)...)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, string(out)
	}
	out := filepath.Join(dir, "results")
	code, text := cli("task", "run", task("copy", "grep -qx A out.txt"), "-k", "2", "--parallel", "2", "--model", "m1,m2", "--out", out)
	if code != 0 || !strings.Contains(text, "2/2") || !strings.Contains(text, "1.00 (k=2)") {
		t.Fatalf("task run: exit %d\n%s", code, text)
	}
	results, _ := filepath.Glob(filepath.Join(out, "run-*", "result.json"))
	arts, _ := filepath.Glob(filepath.Join(out, "run-*", "artifacts", "workspace", "out.txt"))
	logs, _ := filepath.Glob(filepath.Join(out, "run-*", "output.log"))
	if len(results) != 4 || len(arts) != 4 || len(logs) != 4 {
		t.Errorf("in --out: %d results, %d artifacts, %d logs; want 4 each", len(results), len(arts), len(logs))
	}
	if b, err := os.ReadFile(logs[0]); err != nil || !strings.Contains(string(b), "copied") {
		t.Errorf("output.log = %q, %v", b, err)
	}
	if code, text := cli("task", "run", task("nocopy", "false")); code != 1 || !strings.Contains(text, "the check exited 1") {
		t.Errorf("failing task run: exit %d\n%s", code, text)
	}
	if code, text := cli("task", "ls"); code != 0 || strings.Count(text, "succeeded") != 4 {
		t.Errorf("task ls: exit %d\n%s", code, text)
	}
	d.stop()
	d.assertNoLeaks()
}

func runTimeOf(r api.Run) time.Duration {
	if r.StartedAt == nil || r.EndedAt == nil {
		return 0
	}
	return r.EndedAt.Sub(*r.StartedAt).Round(time.Millisecond)
}
