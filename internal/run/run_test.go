package run

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/agents"
	"github.com/agent2env/agent2env/internal/contexts/contextstest"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/service"
	"github.com/agent2env/agent2env/internal/store"
	tasks "github.com/agent2env/agent2env/internal/task"
)

// These tests run the runner over a real manager on the fake runtime
// (contextstest): commands run on the host, as the test's user, with
// /workspace mapped to a directory per sandbox for file operations and
// the working directory, not inside command lines. Nothing here may start
// processes with os/exec.

var bg = context.Background()

type env struct {
	*contextstest.Env
	svc  *Service
	stop func()
}

func newEnv(t *testing.T, cfg Config, mgr ...manager.Config) *env {
	t.Helper()
	var mc manager.Config
	if len(mgr) > 0 {
		mc = mgr[0]
	}
	mc.KeepDeadFiles = []string{ManagedBy} // as the daemon has it
	ce := contextstest.NewEnv(t, mc, nil)
	if cfg.Dir == "" {
		cfg.Dir = filepath.Join(t.TempDir(), "runs")
	}
	if cfg.Tick == 0 {
		cfg.Tick = 50 * time.Millisecond
	}
	svc, err := New(cfg, service.NewSandboxes(ce.M, ""), ce.St, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{Env: ce, svc: svc}
	e.start(t)
	return e
}

// start runs the service's loop until the test ends or stop.
func (e *env) start(t *testing.T) {
	ctx, cancel := context.WithCancel(bg)
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.svc.Run(ctx)
	}()
	var once sync.Once
	e.stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(e.stop)
}

// submit submits the task content and returns the batch.
func (e *env) submit(t *testing.T, content string, req api.RunSubmitRequest) *api.RunBatch {
	t.Helper()
	req.Task = content
	b, err := e.svc.Submit(bg, req)
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	return b
}

// wait waits for every run of batch b to end and returns them.
func (e *env) wait(t *testing.T, b *api.RunBatch, within time.Duration) []api.Run {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		list, err := e.svc.List(bg, ListOptions{BatchID: b.ID})
		if err != nil {
			t.Fatal(err)
		}
		done := true
		for _, r := range list.Items {
			done = done && r.Status.Final()
		}
		if done && len(list.Items) == len(b.Runs) {
			return list.Items
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs not ended after %s: %+v", within, list.Items)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// noSandboxes checks that every sandbox the runs made is gone, soon after
// they ended (a run's sandbox goes after its end is recorded).
func (e *env) noSandboxes(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ids := e.Rt.IDs()
		sbs, err := e.M.List(bg)
		if len(ids) == 0 && err == nil && len(sbs) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("sandboxes left: %v; records: %d, %v", ids, len(sbs), err)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

const customTask = `name: t
agent: custom
goal: do it
entrypoint: %s
end:
  timeout: %s
  success_file: /workspace/done.txt
  check: %s
liveness:
  idle: %s
  heartbeat: %s
artifacts: ["/workspace/**/*.txt", /workspace/missing]
`

func taskYAML(entrypoint, timeout, check, idle, heartbeat string) string {
	out := customTask
	for _, v := range []string{quote(entrypoint), timeout, quote(check), idle, heartbeat} {
		out = strings.Replace(out, "%s", v, 1)
	}
	return out
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func TestRunOutcomes(t *testing.T) {
	e := newEnv(t, Config{})
	tests := []struct {
		name      string
		task      string
		within    time.Duration
		kill      bool
		loseFiles bool // the runtime's Stop loses files
		status    api.RunStatus
		reason    string
		artifacts []string
		// artifactsErr is in the result's ArtifactsError ("": none).
		artifactsErr string
		outputTail   string
	}{
		{
			name:   "succeeded",
			task:   taskYAML("mkdir -p sub && echo ok > sub/a.txt && echo done > done.txt && echo finished", "1m", "grep -q ok sub/a.txt", "1m", "30s"),
			within: 20 * time.Second, status: api.RunSucceeded, reason: "the agent exited 0, /workspace/done.txt exists, the check passed",
			artifacts: []string{"/workspace/done.txt", "/workspace/sub/a.txt"}, outputTail: "finished",
		},
		{
			name:   "check fails",
			task:   taskYAML("echo done > done.txt", "1m", "echo the tests fail; exit 3", "1m", "30s"),
			within: 20 * time.Second, status: api.RunFailed, reason: "the check exited 3: the tests fail",
			artifacts: []string{"/workspace/done.txt"},
		},
		{
			name:   "no success file",
			task:   taskYAML("echo hi > x.txt", "1m", "true", "1m", "30s"),
			within: 20 * time.Second, status: api.RunFailed, reason: "the success file /workspace/done.txt does not exist",
			artifacts: []string{"/workspace/x.txt"},
		},
		{
			name:   "agent fails",
			task:   taskYAML("echo partial > p.txt; echo oops >&2; exit 7", "1m", "true", "1m", "30s"),
			within: 20 * time.Second, status: api.RunFailed, reason: "the agent exited 7, not 0",
			artifacts: []string{"/workspace/p.txt"}, outputTail: "oops",
		},
		{
			// The agent sleeps: no output, no CPU, no file change. It
			// ends within its idle window, long before its timeout.
			name:   "hung",
			task:   taskYAML("echo started > s.txt; sleep 300", "10m", "true", "1s", "30s"),
			within: 15 * time.Second, status: api.RunHung, reason: "no progress for 1s",
			artifacts: []string{"/workspace/s.txt"},
		},
		{
			// Files changing in the workdir keep a silent agent alive
			// until its timeout (the fake runtime measures no CPU).
			name:   "files change",
			task:   taskYAML("echo f > f.txt; i=0; while true; do i=$((i+1)); touch x$i; sleep 0.3; done", "3s", "true", "1s", "30s"),
			within: 15 * time.Second, status: api.RunTimeout, reason: "within its timeout of 3s",
			artifacts: []string{"/workspace/f.txt"},
		},
		{
			// Output keeps the run alive until its timeout.
			name:   "timeout",
			task:   taskYAML("echo t > t.txt; while true; do echo tick; sleep 0.1; done", "2s", "true", "1m", "30s"),
			within: 15 * time.Second, status: api.RunTimeout, reason: "within its timeout of 2s",
			artifacts: []string{"/workspace/t.txt"},
		},
		{
			// The dead sandbox kept its files: it is started again to
			// give its artifacts back.
			name:   "sandbox lost",
			task:   taskYAML("echo l > l.txt; sleep 300", "10m", "true", "1m", "1s"),
			within: 15 * time.Second, kill: true, status: api.RunSandboxLost, reason: "the sandbox",
			artifacts: []string{"/workspace/l.txt"},
		},
		{
			// On a runtime whose sandboxes lose their files when they
			// stop, the result says the artifacts could not be collected.
			name:   "sandbox lost with its files",
			task:   taskYAML("echo l > l.txt; sleep 300", "10m", "true", "1m", "1s"),
			within: 15 * time.Second, kill: true, loseFiles: true, status: api.RunSandboxLost, reason: "the sandbox",
			artifactsErr: "cannot be started again to read its files",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.loseFiles {
				caps := e.Rt.Capabilities()
				e.Rt.SetCapabilities(sandbox.Capabilities{})
				defer e.Rt.SetCapabilities(caps)
			}
			start := time.Now()
			b := e.submit(t, tt.task, api.RunSubmitRequest{})
			if tt.kill {
				sb := waitPhase(t, e, b.Runs[0].ID, api.PhaseAgent)
				time.Sleep(200 * time.Millisecond)
				if err := e.Rt.Kill(sb); err != nil {
					t.Fatal(err)
				}
			}
			runs := e.wait(t, b, tt.within)
			r := runs[0]
			t.Logf("%s in %s: %s", r.Status, time.Since(start).Round(time.Millisecond), r.Reason)
			if r.Status != tt.status || !strings.Contains(r.Reason, tt.reason) {
				t.Errorf("status %s %q, want %s %q", r.Status, r.Reason, tt.status, tt.reason)
			}
			var got []string
			for _, a := range r.Artifacts {
				got = append(got, a.Path)
			}
			if diff := cmp.Diff(tt.artifacts, got); diff != "" {
				t.Errorf("artifacts (-want +got):\n%s", diff)
			}
			if (tt.artifactsErr == "") != (r.ArtifactsError == "") || !strings.Contains(r.ArtifactsError, tt.artifactsErr) {
				t.Errorf("artifacts error %q, want %q", r.ArtifactsError, tt.artifactsErr)
			}
			if tt.outputTail != "" && !slices.Contains(r.OutputTail, tt.outputTail) {
				t.Errorf("output tail %q lacks %q", r.OutputTail, tt.outputTail)
			}
			for _, p := range []string{api.PhaseCreate, api.PhaseInputs} {
				if _, ok := r.Timings[p]; !ok {
					t.Errorf("no timing of %s: %v", p, r.Timings)
				}
			}
			if r.EndedAt == nil || r.StartedAt == nil || r.Phase != api.PhaseDone || r.SandboxID == "" {
				t.Errorf("record %+v", r)
			}
			// The event log ends with the run's end.
			var evs []api.RunEvent
			if err := e.svc.Follow(bg, r.ID, 0, func(ev api.RunEvent) error { evs = append(evs, ev); return nil }); err != nil {
				t.Fatal(err)
			}
			if len(evs) == 0 || evs[len(evs)-1].Type != api.RunEventEnd || evs[len(evs)-1].Status != tt.status {
				t.Errorf("events end with %+v", evs[len(evs)-1:])
			}
			// The task's /workspace/missing matched no file: the artifacts'
			// phase says so.
			if i := slices.IndexFunc(evs, func(ev api.RunEvent) bool {
				return ev.Type == api.RunEventPhase && ev.Phase == api.PhaseArtifacts && ev.Text != ""
			}); tt.artifactsErr == "" &&
				(i < 0 || !strings.HasSuffix(evs[i].Text, "; no file for /workspace/missing")) {
				t.Errorf("no artifacts phase saying what matched no file: %+v", evs)
			}
			e.noSandboxes(t)
		})
	}
}

// waitOutput waits for run id's output log to hold text.
func waitOutput(t *testing.T, e *env, id, text string) {
	t.Helper()
	for range 500 {
		rc, err := e.svc.Logs(bg, id)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), text) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("run %s never printed %q", id, text)
}

// waitPhase waits for run id to reach phase and returns its sandbox.
func waitPhase(t *testing.T, e *env, id, phase string) string {
	t.Helper()
	for range 500 {
		r, err := e.svc.Get(bg, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Phase == phase {
			return r.SandboxID
		}
		if r.Status.Final() {
			t.Fatalf("run ended before %s: %+v", phase, r)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("run never reached %s", phase)
	return ""
}

func TestCancel(t *testing.T) {
	e := newEnv(t, Config{MaxParallel: 1})
	b := e.submit(t, taskYAML("echo c > c.txt; echo wrote; sleep 300", "10m", "true", "1m", "30s"), api.RunSubmitRequest{Repeats: 2})
	// One runs, the other waits for the daemon-wide slot.
	var running, queued string
	for running == "" {
		for _, r := range b.Runs {
			if got, _ := e.svc.Get(bg, r.ID); got.Phase == api.PhaseAgent {
				running = r.ID
			} else {
				queued = r.ID
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r, err := e.svc.Cancel(bg, queued); err != nil || r.Status != api.RunCancelled {
		t.Fatalf("cancel queued: %+v, %v", r, err)
	}
	// The agent's phase starts before its command has run: under load the
	// file could be not yet written when the cancel came.
	waitOutput(t, e, running, "wrote")
	if _, err := e.svc.Cancel(bg, running); err != nil {
		t.Fatal(err)
	}
	runs := e.wait(t, b, 10*time.Second)
	for _, r := range runs {
		if r.Status != api.RunCancelled || r.Reason != reasonCancelled {
			t.Errorf("run %d: %s %q", r.Repeat, r.Status, r.Reason)
		}
	}
	r, _ := e.svc.Get(bg, running)
	if len(r.Artifacts) != 1 {
		t.Errorf("the cancelled run's artifacts: %+v", r.Artifacts)
	}
	// Cancelled already: it stays so, and says so.
	if r, err := e.svc.Cancel(bg, running); err != nil || r.Status != api.RunCancelled {
		t.Errorf("cancel a cancelled run: %+v, %v; want it as it is", r, err)
	}
	e.noSandboxes(t)
	if err := e.svc.Delete(bg, running); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Get(bg, running); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("get deleted: %v", err)
	}
	if _, err := os.Stat(e.svc.runDir(running)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the deleted run's files: %v", err)
	}
}

func TestDeleteActive(t *testing.T) {
	e := newEnv(t, Config{})
	b := e.submit(t, taskYAML("sleep 300", "10m", "true", "1m", "30s"), api.RunSubmitRequest{})
	waitPhase(t, e, b.Runs[0].ID, api.PhaseAgent)
	if err := e.svc.Delete(bg, b.Runs[0].ID); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("delete a running run: %v, want ErrFailedPrecondition", err)
	}
	e.svc.Cancel(bg, b.Runs[0].ID)
	e.wait(t, b, 10*time.Second)
}

// Twenty runs, ten at a time, all end and leave no sandbox.
func TestParallel(t *testing.T) {
	e := newEnv(t, Config{})
	peak := 0
	b := e.submit(t, taskYAML("echo done > done.txt", "1m", "true", "1m", "30s"), api.RunSubmitRequest{Repeats: 20, Parallel: 10})
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			peak = max(peak, len(e.Rt.IDs()))
		}
	}()
	runs := e.wait(t, b, 60*time.Second)
	close(stop)
	<-stopped
	for _, r := range runs {
		if r.Status != api.RunSucceeded {
			t.Errorf("run %d: %s %s", r.Repeat, r.Status, r.Reason)
		}
	}
	if peak > 10 {
		t.Errorf("%d sandboxes at once, want at most 10", peak)
	}
	e.noSandboxes(t)
}

func TestSubmitRefuses(t *testing.T) {
	e := newEnv(t, Config{Models: func() []string { return []string{"coder"} }, TasksDir: t.TempDir()})
	good := "name: t\nagent: custom\ngoal: g\nentrypoint: 'true'\n"
	tests := []struct {
		name string
		req  api.RunSubmitRequest
		want string
	}{
		{"nothing", api.RunSubmitRequest{}, "task is required"},
		{"not yaml", api.RunSubmitRequest{Task: "{"}, "not YAML or JSON"},
		{"unknown agent", api.RunSubmitRequest{Task: "name: t\nagent: nope\ngoal: g\n"}, `agent: unknown agent "nope"`},
		{"missing goal", api.RunSubmitRequest{Task: "name: t\nagent: custom\nentrypoint: x\n"}, "goal: is required"},
		{"bad duration", api.RunSubmitRequest{Task: good + "end: {timeout: soon}\n"}, "end.timeout"},
		{"unknown model", api.RunSubmitRequest{Task: "name: t\nagent: codex\nmodel: gpt\ngoal: g\n"}, `model: unknown model "gpt"`},
		{"input escapes", api.RunSubmitRequest{Task: good + "inputs: [{source: ../x, destination: /workspace/x}]\n"}, "inputs[0].source"},
		{"artifact escapes", api.RunSubmitRequest{Task: good + "artifacts: [/workspace/../etc/passwd]\n"}, "artifacts[0]"},
		{"override agent", api.RunSubmitRequest{Task: good, Agents: []string{"claude"}}, `agents: unknown agent "claude"`},
		{"override model", api.RunSubmitRequest{Task: good, Agents: []string{"codex"}, Models: []string{"x"}}, `models: unknown model "x"`},
		{"agent needs model", api.RunSubmitRequest{Task: good, Agents: []string{"codex"}}, "model: is required for agent codex"},
		{"a model twice", api.RunSubmitRequest{Task: good, Models: []string{"m1", "m1"}}, `models: "m1" is listed twice`},
		{"an agent twice", api.RunSubmitRequest{Task: good, Agents: []string{"custom", "custom"}}, `agents: "custom" is listed twice`},
		{"repeats", api.RunSubmitRequest{Task: good, Repeats: -1}, "repeats"},
		{"parallel", api.RunSubmitRequest{Task: good, Parallel: -1}, "parallel"},
		{"both", api.RunSubmitRequest{Task: good, TaskName: "t"}, "not both"},
		{"task name path", api.RunSubmitRequest{TaskName: "../etc/passwd"}, "task_name"},
		{"inputs without archive", api.RunSubmitRequest{Task: good + "inputs: [{source: x, destination: /workspace/x}]\n"}, "inputs"},
		{"huge", api.RunSubmitRequest{Task: good + "# " + strings.Repeat("x", 10<<20) + "\n"}, "larger than"},
		{"bad archive", api.RunSubmitRequest{Task: good, Inputs: base64.StdEncoding.EncodeToString([]byte("not gzip"))}, "inputs: not a gzipped tar"},
		{"archive escapes", api.RunSubmitRequest{Task: good, Inputs: tarGz(t, map[string]string{"../x": "x"})}, "leaves the task's directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.svc.Submit(bg, tt.req)
			if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("submit: %v, want ErrInvalidArgument naming %q", err, tt.want)
			}
		})
	}
	if list, err := e.svc.List(bg, ListOptions{}); err != nil || len(list.Items) != 0 {
		t.Errorf("refused submissions recorded runs: %+v, %v", list, err)
	}
	if _, err := e.svc.Submit(bg, api.RunSubmitRequest{TaskName: "absent"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("unknown task name: %v", err)
	} // A task name on a daemon without a tasks directory: the message
	// names the setting that gives it one.
	noDir := newEnv(t, Config{Models: func() []string { return []string{"coder"} }})
	if _, err := noDir.svc.Submit(bg, api.RunSubmitRequest{TaskName: "t"}); !errors.Is(err, errdefs.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "serve --tasks-dir") {
		t.Errorf("task name without a tasks directory: %v, want ErrInvalidArgument naming serve --tasks-dir", err)
	}
}

// A task whose sandbox can never be made is refused at submission with
// a 4xx naming the field, as the sandbox service would refuse the create,
// and nothing is recorded.
func TestSubmitRefusesSandbox(t *testing.T) {
	host := manager.Host{MilliCPU: 2000, MemoryBytes: 4 << 30}
	e := newEnv(t, Config{}, manager.Config{Host: host, CPUOvercommit: 1, MemoryOvercommit: 1})
	good := "name: t\nagent: custom\ngoal: g\nentrypoint: 'true'\n"
	tests := []struct {
		name  string
		task  string
		class error
		want  string
	}{
		{"image not a reference", good + "image: 'UPPER CASE!!'\n", errdefs.ErrInvalidArgument, `image: invalid image reference "UPPER CASE!!"`},
		{"unknown template", good + "template: nosuchtpl\n", errdefs.ErrNotFound, `template: template "nosuchtpl" not found`},
		{"cpu beyond the host", good + "resources: {cpu: '1000000'}\n", errdefs.ErrInvalidArgument, "resources: cpu 1000000 and memory 1Gi: more than the host's whole capacity of 2 cpu"},
		{"memory beyond the host", good + "resources: {memory: 5Gi}\n", errdefs.ErrInvalidArgument, "resources: cpu 1 and memory 5Gi: more than the host's whole capacity of 2 cpu and 4096Mi"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.svc.Submit(bg, api.RunSubmitRequest{Task: tt.task})
			if !errors.Is(err, tt.class) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("submit: %v, want %v naming %q", err, tt.class, tt.want)
			}
		})
	}
	if list, err := e.svc.List(bg, ListOptions{}); err != nil || len(list.Items) != 0 {
		t.Errorf("refused submissions recorded runs: %+v, %v", list, err)
	}
	// The whole host fits: it is refused only while others hold the room.
	if _, err := e.svc.Submit(bg, api.RunSubmitRequest{Task: good + "resources: {cpu: '2', memory: 4Gi}\n"}); err != nil {
		t.Errorf("a task the size of the host: %v", err)
	}
}

// A queued run whose sandbox no longer fits the host at all (its
// capacity shrank since the submission) fails at once rather than waiting
// for room until ReadyTimeout.
func TestCreateNeverFits(t *testing.T) {
	e := newEnv(t, Config{}, manager.Config{Host: manager.Host{MilliCPU: 1000, MemoryBytes: 4 << 30}, CPUOvercommit: 1, MemoryOvercommit: 1})
	e.stop()
	l, err := e.svc.openLog("run-x")
	if err != nil {
		t.Fatal(err)
	}
	x := &execution{s: e.svc, j: &job{id: "run-x"}, log: l}
	ctx, cancel := context.WithTimeout(bg, 5*time.Second)
	defer cancel()
	req := service.ManagedRequest{CreateSandboxRequest: api.CreateSandboxRequest{Image: tasks.DefaultImage, CPU: "2"}, ManagedBy: ManagedBy}
	if _, err := x.createWhenRoom(ctx, req); !errors.Is(err, errdefs.ErrInvalidArgument) || ctx.Err() != nil {
		t.Errorf("create: %v (context: %v), want ErrInvalidArgument at once", err, ctx.Err())
	}
}

func tarGz(t *testing.T, files map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, content := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(content))
	}
	tw.Close()
	zw.Close()
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// Inputs come from the submission's archive, or from beside a named
// task's file; a matrix of agents × models runs each combination k times.
func TestInputsAndMatrix(t *testing.T) {
	tasks := t.TempDir()
	e := newEnv(t, Config{TasksDir: tasks})
	content := "name: in\nagent: custom\ngoal: g\nentrypoint: 'cat repo/a.txt repo/sub/b.txt > out.txt'\n" +
		"inputs: [{source: ./repo, destination: /workspace/repo}]\nend: {check: 'grep -q AB out.txt'}\nartifacts: [/workspace/out.txt]\n"
	b := e.submit(t, content, api.RunSubmitRequest{Inputs: tarGz(t, map[string]string{"repo/a.txt": "A", "repo/sub/b.txt": "B\n"}), Repeats: 2})
	for _, r := range e.wait(t, b, 20*time.Second) {
		if r.Status != api.RunSucceeded {
			t.Errorf("archive inputs: %s %s %q", r.Status, r.Reason, r.OutputTail)
		}
	}
	// A run that ended otherwise cannot end cancelled: 409 naming its
	// status, and it stays as it was.
	done := b.Runs[0].ID
	if _, err := e.svc.Cancel(bg, done); !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "is succeeded") {
		t.Errorf("cancel a succeeded run: %v, want ErrFailedPrecondition naming its status", err)
	}
	if r, _ := e.svc.Get(bg, done); r.Status != api.RunSucceeded {
		t.Errorf("after the refused cancel: %s, want succeeded", r.Status)
	}
	// The submission's inputs go once its runs have ended.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(e.svc.batchesDir(), b.ID)); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the inputs of batch %s are still there", b.ID)
		}
	}
	if err := os.MkdirAll(filepath.Join(tasks, "repo", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(tasks, "repo", "a.txt"), []byte("A"), 0o644)
	os.WriteFile(filepath.Join(tasks, "repo", "sub", "b.txt"), []byte("B"), 0o644)
	os.WriteFile(filepath.Join(tasks, "in.yaml"), []byte(content), 0o644)
	b, err := e.svc.Submit(bg, api.RunSubmitRequest{TaskName: "in", Agents: []string{"custom"}, Models: []string{"m1", "m2"}, Repeats: 2})
	if err != nil {
		t.Fatal(err)
	}
	var combos []string
	for _, r := range e.wait(t, b, 20*time.Second) {
		combos = append(combos, r.Agent+"/"+r.Model)
		if r.Status != api.RunSucceeded {
			t.Errorf("named task: %s %s", r.Status, r.Reason)
		}
	}
	slices.Sort(combos)
	if diff := cmp.Diff([]string{"custom/m1", "custom/m1", "custom/m2", "custom/m2"}, combos); diff != "" {
		t.Errorf("matrix (-want +got):\n%s", diff)
	}
	// The artifacts come back as a tar and one by one.
	id := b.Runs[0].ID
	var buf bytes.Buffer
	if err := e.svc.ArtifactsTar(bg, id, &buf); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(&buf)
	h, err := tr.Next()
	if err != nil || h.Name != "workspace/out.txt" {
		t.Fatalf("tar: %+v, %v", h, err)
	}
	rc, _, err := e.svc.Artifact(bg, id, "/workspace/out.txt")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(rc)
	rc.Close()
	if string(data) != "AB" {
		t.Errorf("artifact = %q", data)
	}
	if _, _, err := e.svc.Artifact(bg, id, "/../../etc/passwd"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("artifact outside: %v", err)
	}
	e.noSandboxes(t)
}

// leftSandbox makes a run's sandbox as a stopped daemon leaves it, with a
// file that leftSpec's artifacts take.
func (e *env) leftSandbox(t *testing.T) *store.Sandbox {
	t.Helper()
	sb, err := e.M.Create(bg, manager.CreateRequest{Image: "agent2env/agent", ManagedBy: ManagedBy})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.M.Upload(bg, sb.ID, "/workspace/report.txt", 0o644, strings.NewReader("half done")); err != nil {
		t.Fatal(err)
	}
	return sb
}

// leftSpec is the task of the runs a stopped daemon left.
const leftSpec = `{"name":"t","agent":"custom","goal":"g","workdir":"/workspace","artifacts":["/workspace/*.txt"]}`

// A run a previous daemon left running ends failed with reason "daemon
// restarted", its artifacts collected from the sandbox that survived,
// and the sandbox deleted; a queued one whose submission was never
// recorded whole (no batch.json) ends the same way.
func TestRecover(t *testing.T) {
	e := newEnv(t, Config{})
	e.stop() // the loop recovers at its start: start it by hand
	sb := e.leftSandbox(t)
	now := time.Now().UTC()
	spec := []byte(leftSpec)
	for _, r := range []*store.Run{
		{ID: "run-a", BatchID: "b", Task: "t", Spec: spec, Agent: "custom", Status: "running", Phase: "agent", SandboxID: sb.ID, CreatedAt: now, UpdatedAt: now, StartedAt: &now},
		{ID: "run-b", BatchID: "b", Task: "t", Spec: spec, Agent: "custom", Status: "queued", Phase: "queued", CreatedAt: now, UpdatedAt: now},
		{ID: "run-c", BatchID: "b", Task: "t", Spec: spec, Agent: "custom", Status: "running", Phase: "agent", SandboxID: "gone", CreatedAt: now, UpdatedAt: now},
	} {
		if err := e.St.CreateRun(bg, r); err != nil {
			t.Fatal(err)
		}
	}
	svc, err := New(e.svc.cfg, service.NewSandboxes(e.M, ""), e.St, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	e.start(t)
	runs := e.wait(t, &api.RunBatch{ID: "b", Runs: make([]api.Run, 3)}, 10*time.Second)
	for _, r := range runs {
		if r.Status != api.RunFailed || r.Reason != ReasonRestarted {
			t.Errorf("%s: %s %q", r.ID, r.Status, r.Reason)
		}
	}
	if len(runs[0].Artifacts) != 1 || runs[0].Artifacts[0].Path != "/workspace/report.txt" {
		t.Errorf("artifacts of the run whose sandbox survived: %+v", runs[0].Artifacts)
	}
	e.noSandboxes(t)
}

// Following a run from its submission sees every event up to its end,
// whenever the follower starts.
func TestFollowFromSubmission(t *testing.T) {
	e := newEnv(t, Config{})
	for i := range 10 {
		b := e.submit(t, taskYAML("echo done > done.txt", "1m", "true", "1m", "30s"), api.RunSubmitRequest{})
		if i%2 == 1 {
			time.Sleep(time.Duration(i) * time.Millisecond)
		}
		var last api.RunEvent
		if err := e.svc.Follow(bg, b.Runs[0].ID, 0, func(ev api.RunEvent) error { last = ev; return nil }); err != nil {
			t.Fatal(err)
		}
		if last.Type != api.RunEventEnd || last.Status != api.RunSucceeded {
			t.Fatalf("follow %d ended with %+v", i, last)
		}
	}
}

// Runs beyond the daemon's maximum of sandboxes wait for room instead of
// failing.
func TestWaitForRoom(t *testing.T) {
	e := newEnv(t, Config{}, manager.Config{MaxSandboxes: 2})
	b := e.submit(t, taskYAML("echo done > done.txt; sleep 0.3", "1m", "true", "1m", "30s"), api.RunSubmitRequest{Repeats: 6})
	for _, r := range e.wait(t, b, 30*time.Second) {
		if r.Status != api.RunSucceeded {
			t.Errorf("run %d: %s %s", r.Repeat, r.Status, r.Reason)
		}
	}
	e.noSandboxes(t)
}

// The tokens a run reports are the agent's per call, or its result's
// total when it gives none per call.
func TestAgentUsage(t *testing.T) {
	for _, tt := range []struct {
		name string
		evs  []agents.Event
		want api.RunLLMUsage
	}{
		{"per call", []agents.Event{
			{Kind: agents.KindLLMCall, Usage: &agents.Usage{InputTokens: 10, OutputTokens: 2}},
			{Kind: agents.KindLLMCall, Usage: &agents.Usage{InputTokens: 20, OutputTokens: 3, CachedTokens: 5}},
			{Kind: agents.KindResult, Usage: &agents.Usage{InputTokens: 999}},
		}, api.RunLLMUsage{Requests: 2, InputTokens: 30, OutputTokens: 5, CachedTokens: 5, Source: "agent"}},
		{"result only", []agents.Event{{Kind: agents.KindResult, Text: "done", Usage: &agents.Usage{InputTokens: 7, OutputTokens: 1}}},
			api.RunLLMUsage{InputTokens: 7, OutputTokens: 1, Source: "agent"}},
		{"none", []agents.Event{{Kind: agents.KindResult, Text: "done"}}, api.RunLLMUsage{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			// No loop: its recovery would end the hand-made running
			// record as restarted, racing with finish.
			e.stop()
			l, err := e.svc.openLog("run-x")
			if err != nil {
				t.Fatal(err)
			}
			if err := e.St.CreateRun(bg, &store.Run{ID: "run-x", BatchID: "b", Task: "t", Agent: "custom", Status: "running"}); err != nil {
				t.Fatal(err)
			}
			x := &execution{s: e.svc, j: &job{id: "run-x", task: &tasks.Task{Name: "t"}}, log: l}
			x.events(tt.evs, false)
			e.svc.finish(bg, x, api.RunSucceeded, "ok")
			r, err := e.svc.Get(bg, "run-x")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, r.LLM); diff != "" {
				t.Errorf("usage (-want +got):\n%s", diff)
			}
		})
	}
}

// Artifacts past the per-run limit are left out, and the result says so.
func TestArtifactLimit(t *testing.T) {
	e := newEnv(t, Config{ArtifactLimit: 10})
	b := e.submit(t, taskYAML("printf 1234 > a.txt; printf 12345678901234567890 > b.txt; echo > done.txt", "1m", "true", "1m", "30s"), api.RunSubmitRequest{})
	r := e.wait(t, b, 20*time.Second)[0]
	var got []string
	for _, a := range r.Artifacts {
		got = append(got, a.Path)
	}
	if diff := cmp.Diff([]string{"/workspace/a.txt", "/workspace/done.txt"}, got); diff != "" || !r.ArtifactsTruncated {
		t.Errorf("artifacts %v, truncated %v; want b.txt left out (-want +got):\n%s", got, r.ArtifactsTruncated, diff)
	}
}

// Every command of a run (setup, agent, check) has the run's id in
// AGENT2ENV_RUN_ID, and the daemon finds the run of its sandbox.
func TestRunIDInCommands(t *testing.T) {
	e := newEnv(t, Config{})
	content := "name: id\nagent: custom\ngoal: g\nsetup: ['echo $AGENT2ENV_RUN_ID > setup.txt']\n" +
		"entrypoint: 'echo $AGENT2ENV_RUN_ID > agent.txt; echo done > done.txt; sleep 0.3'\n" +
		"end: {check: 'test -n \"$AGENT2ENV_RUN_ID\" && test \"$(cat agent.txt)\" = \"$AGENT2ENV_RUN_ID\" && test \"$(cat setup.txt)\" = \"$AGENT2ENV_RUN_ID\"'}\n"
	b := e.submit(t, content, api.RunSubmitRequest{})
	id := b.Runs[0].ID
	found := false
	for deadline := time.Now().Add(30 * time.Second); !found && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		r, err := e.svc.Get(bg, id)
		if err != nil || r.Status.Final() {
			break
		}
		if r.SandboxID != "" && r.Phase == api.PhaseAgent {
			got, ok := e.svc.RunOfSandbox(r.SandboxID)
			found = ok && got == id
		}
	}
	if !found {
		t.Error("RunOfSandbox never named the run while its agent ran")
	}
	r := e.wait(t, b, time.Minute)[0]
	if r.Status != api.RunSucceeded {
		t.Errorf("run %s: %s (the commands did not have their run's id)", r.Status, r.Reason)
	}
}

// The models a task may name are those Config.Models gives at each
// submission (the LLM proxy's, reloaded; none when it has no
// configuration); a model override is checked instead of the task's own.
func TestSubmitModelsFollowTheProxy(t *testing.T) {
	models := []string{"coder"}
	e := newEnv(t, Config{Models: func() []string { return models }})
	task := "name: t\nagent: codex\nmodel: coder\ngoal: g\n"
	b, err := e.svc.Submit(bg, api.RunSubmitRequest{Task: task})
	if err != nil {
		t.Fatalf("a model of the proxy: %v", err)
	}
	e.svc.Cancel(bg, b.Runs[0].ID)
	models = []string{"replay-x"}
	if _, err := e.svc.Submit(bg, api.RunSubmitRequest{Task: task}); !errors.Is(err, errdefs.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), `model: unknown model "coder"`) {
		t.Errorf("a model the proxy no longer has: %v", err)
	}
	b, err = e.svc.Submit(bg, api.RunSubmitRequest{Task: task, Models: []string{"replay-x"}})
	if err != nil {
		t.Fatalf("the task's model overridden by one of the proxy: %v", err)
	}
	e.svc.Cancel(bg, b.Runs[0].ID)
	// No proxy configured: an agent CLI reaches no model but the proxy's,
	// so none is known, and the refusal says how to make one.
	models = nil
	for _, req := range []api.RunSubmitRequest{{Task: task}, {Task: task, Models: []string{"coder"}}} {
		if _, err := e.svc.Submit(bg, req); !errors.Is(err, errdefs.ErrInvalidArgument) ||
			!strings.Contains(err.Error(), `unknown model "coder": the LLM proxy has no models, and agent codex reaches none`) ||
			!strings.Contains(err.Error(), "--llm-config FILE") {
			t.Errorf("no proxy, models %v: %v", req.Models, err)
		}
	}
	// A custom agent's model is its entrypoint's to use: without a proxy
	// to check it against, it passes.
	custom := "name: t\nagent: custom\nmodel: coder\ngoal: g\nentrypoint: 'true'\n"
	for _, req := range []api.RunSubmitRequest{{Task: custom}, {Task: custom, Models: []string{"m1", "m2"}}} {
		b, err = e.svc.Submit(bg, req)
		if err != nil {
			t.Fatalf("no proxy, a custom agent, models %v: %v", req.Models, err)
		}
		for _, r := range b.Runs {
			e.svc.Cancel(bg, r.ID)
		}
	}
}

// A task's resources are its sandbox's limits: cpu, memory and disk.
func TestResources(t *testing.T) {
	e := newEnv(t, Config{})
	b := e.submit(t, "name: r\nagent: custom\ngoal: g\nentrypoint: sleep 300\nresources: {cpu: 500m, memory: 256Mi, disk: 2Gi}\n", api.RunSubmitRequest{})
	sb := waitPhase(t, e, b.Runs[0].ID, api.PhaseAgent)
	spec, err := e.Rt.Spec(sb)
	if err != nil {
		t.Fatal(err)
	}
	got := spec.Resources
	if got.MilliCPU != 500 || got.MemoryBytes != 256<<20 || got.DiskBytes != 2<<30 {
		t.Errorf("the sandbox's limits %+v, want 500m cpu, 256Mi memory, 2Gi disk", got)
	}
	e.svc.Cancel(bg, b.Runs[0].ID)
	e.wait(t, b, 10*time.Second)
	e.noSandboxes(t)
}

// Runs a stopped daemon left queued are queued again by the next one,
// with their submission's parallelism and inputs, and succeed; the one
// it left running in its agent phase is carried on first, its agent
// still running, and succeeds too; no two of them overlap.
func TestRecoverRequeues(t *testing.T) {
	e := newEnv(t, Config{})
	content := "name: q\nagent: custom\ngoal: g\nentrypoint: 'cat in/a.txt > out.txt; echo done > done.txt; sleep 0.5'\n" +
		"inputs: [{source: ./in, destination: /workspace/in}]\nend: {success_file: /workspace/done.txt, check: 'grep -q A out.txt'}\n" +
		"artifacts: [/workspace/out.txt]\n"
	b := e.submit(t, content, api.RunSubmitRequest{Inputs: tarGz(t, map[string]string{"in/a.txt": "A"}), Repeats: 3, Parallel: 1})
	waitPhase(t, e, b.Runs[0].ID, api.PhaseAgent)
	e.stop() // the daemon stops: one run running, two queued
	for i, r := range b.Runs {
		got, err := e.svc.Get(bg, r.ID)
		if want := []api.RunStatus{api.RunRunning, api.RunQueued, api.RunQueued}[i]; err != nil || got.Status != want {
			t.Fatalf("run %d after the stop: %+v, %v; want %s", i, got, err, want)
		}
	}
	svc, err := New(e.svc.cfg, service.NewSandboxes(e.M, ""), e.St, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	e.start(t)
	// In the order they were submitted.
	byID := map[string]api.Run{}
	for _, r := range e.wait(t, b, 30*time.Second) {
		byID[r.ID] = r
	}
	runs := []api.Run{byID[b.Runs[0].ID], byID[b.Runs[1].ID], byID[b.Runs[2].ID]}
	if r := runs[0]; r.Status != api.RunSucceeded || len(r.Artifacts) != 1 {
		t.Errorf("the running run: %s %q, artifacts %+v; want succeeded, carried on", r.Status, r.Reason, r.Artifacts)
	}
	for _, r := range runs[1:] {
		if r.Status != api.RunSucceeded || len(r.Artifacts) != 1 {
			t.Errorf("a queued run: %s %q, artifacts %+v; want succeeded, with its inputs", r.Status, r.Reason, r.Artifacts)
		}
	}
	// Parallel 1 still holds: one ran after the other.
	for i := range runs {
		for _, b := range runs[i+1:] {
			if a := runs[i]; a.StartedAt != nil && b.StartedAt != nil && a.EndedAt != nil && b.EndedAt != nil &&
				b.StartedAt.Before(*a.EndedAt) && a.StartedAt.Before(*b.EndedAt) {
				t.Errorf("runs overlapped: %v–%v and %v–%v", a.StartedAt, a.EndedAt, b.StartedAt, b.EndedAt)
			}
		}
	}
	e.noSandboxes(t)
	// The submission's files go once its runs have ended.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(e.svc.batchesDir(), b.ID)); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the files of batch %s are still there", b.ID)
		}
	}
}

// A daemon sharing the store takes over the runs whose claim lapsed (their
// daemon died): it ends the running ones, collecting the artifacts of
// those whose sandbox survived, and the queued ones whose inputs were in
// the dead daemon's directory; it carries out the other queued ones. It
// leaves alone the runs another daemon holds, even at its start. The
// same whether the claims lapsed while it ran or before it started.
func TestTakeOver(t *testing.T) {
	for _, atStart := range []bool{false, true} {
		t.Run(map[bool]string{false: "while running", true: "at start"}[atStart], func(t *testing.T) {
			testTakeOver(t, atStart)
		})
	}
}

func testTakeOver(t *testing.T, atStart bool) {
	e := newEnv(t, Config{Lease: 600 * time.Millisecond})
	sb := e.leftSandbox(t)
	if atStart {
		e.stop()
	}
	now := time.Now().UTC()
	lapsed, held := now.Add(-time.Second), now.Add(time.Hour)
	spec := []byte(leftSpec)
	queued, err := tasks.Load("t", []byte(taskYAML("echo done > done.txt", "1m", "true", "1m", "30s")))
	if err != nil {
		t.Fatal(err)
	}
	queuedSpec, err := json.Marshal(queued)
	if err != nil {
		t.Fatal(err)
	}
	queued.Inputs = []tasks.Input{{Source: "data.txt", Destination: "/workspace/data.txt"}}
	withInputs, err := json.Marshal(queued)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*store.Run{
		{ID: "run-a", BatchID: "b", Task: "t", Spec: spec, Agent: "custom", Status: "running", Phase: "agent", SandboxID: sb.ID,
			CreatedAt: now, UpdatedAt: now, StartedAt: &now, ClaimedBy: "dead", LeaseUntil: &lapsed},
		{ID: "run-b", BatchID: "b", Task: "t", Spec: queuedSpec, Agent: "custom", Status: "queued", Phase: "queued",
			CreatedAt: now, UpdatedAt: now, ClaimedBy: "dead", LeaseUntil: &lapsed},
		{ID: "run-d", BatchID: "b", Task: "t", Spec: withInputs, Agent: "custom", Status: "queued", Phase: "queued",
			CreatedAt: now, UpdatedAt: now, ClaimedBy: "dead", LeaseUntil: &lapsed},
		{ID: "run-c", BatchID: "c", Task: "t", Spec: spec, Agent: "custom", Status: "running", Phase: "agent", SandboxID: "elsewhere",
			CreatedAt: now, UpdatedAt: now, StartedAt: &now, ClaimedBy: "alive", LeaseUntil: &held},
	} {
		if err := e.St.CreateRun(bg, r); err != nil {
			t.Fatal(err)
		}
	}
	if atStart {
		svc, err := New(e.svc.cfg, service.NewSandboxes(e.M, ""), e.St, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		e.svc = svc
		e.start(t)
	}
	runs := e.wait(t, &api.RunBatch{ID: "b", Runs: make([]api.Run, 3)}, 10*time.Second)
	byID := map[string]api.Run{}
	for _, r := range runs {
		byID[r.ID] = r
	}
	for id, want := range map[string]api.RunStatus{"run-a": api.RunFailed, "run-b": api.RunSucceeded, "run-d": api.RunFailed} {
		r := byID[id]
		if r.Status != want || want == api.RunFailed && r.Reason != ReasonOrphaned {
			t.Errorf("%s: %s %q, want %s", id, r.Status, r.Reason, want)
		}
	}
	if a := byID["run-a"].Artifacts; len(a) != 1 || a[0].Path != "/workspace/report.txt" {
		t.Errorf("artifacts of the run whose sandbox survived: %+v", a)
	}
	// Another daemon starting on the store leaves the held run too.
	cfg := e.svc.cfg
	cfg.Dir = filepath.Join(t.TempDir(), "runs")
	other, err := New(cfg, service.NewSandboxes(e.M, ""), e.St, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	done := make(chan struct{})
	go func() { defer close(done); other.Run(ctx) }()
	time.Sleep(time.Second) // past a start and several renewals of both
	cancel()
	<-done
	if r, err := e.St.GetRun(bg, "run-c"); err != nil || r.Status != "running" || r.ClaimedBy != "alive" {
		t.Errorf("the run another daemon holds: %+v, %v; want it running, its", r, err)
	}
	e.noSandboxes(t)
}

// unrenewable is a store whose RenewRunLeases fails once told to, as when
// the daemon loses the store.
type unrenewable struct {
	store.Runs
	fail atomic.Bool
}

func (u *unrenewable) RenewRunLeases(ctx context.Context, owner string, until time.Time) (int, error) {
	if u.fail.Load() {
		return 0, errors.New("the store is out of reach")
	}
	return u.Runs.RenewRunLeases(ctx, owner, until)
}

// A daemon that cannot renew its claims for longer than the lease ends
// the runs it carries out (another daemon may have taken them over); and
// it does not start a queued run another daemon has claimed.
func TestClaimLapsed(t *testing.T) {
	e := newEnv(t, Config{Lease: 600 * time.Millisecond})
	e.stop()
	st := &unrenewable{Runs: e.St}
	svc, err := New(e.svc.cfg, service.NewSandboxes(e.M, ""), st, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	e.start(t)
	long := "name: long\nagent: custom\ngoal: g\nentrypoint: sleep 30\nend: {timeout: 1m}\n"
	b := e.submit(t, long, api.RunSubmitRequest{Repeats: 2, Parallel: 1})
	waitPhase(t, e, b.Runs[0].ID, api.PhaseAgent)
	// The second, still queued, is another daemon's now.
	held := time.Now().Add(time.Hour)
	if _, err := e.St.UpdateRun(bg, b.Runs[1].ID, func(r *store.Run) error {
		r.ClaimedBy, r.LeaseUntil = "other", &held
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	st.fail.Store(true)
	r, err := e.svc.Get(bg, b.Runs[0].ID)
	for deadline := time.Now().Add(10 * time.Second); err == nil && !r.Status.Final() && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		r, err = e.svc.Get(bg, b.Runs[0].ID)
	}
	if err != nil || r.Status != api.RunFailed || !strings.Contains(r.Reason, "could not renew its claim") {
		t.Fatalf("the running run: %+v, %v; want it failed, its claim not renewed", r, err)
	}
	time.Sleep(500 * time.Millisecond) // the slot is free: the queued run would start now
	if r, err := e.St.GetRun(bg, b.Runs[1].ID); err != nil || r.Status != string(api.RunQueued) || r.ClaimedBy != "other" {
		t.Errorf("the run another daemon claimed: %+v, %v; want it queued, the other's", r, err)
	}
}
