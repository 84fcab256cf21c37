package oci

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/image"
	"github.com/agent2env/agent2env/internal/runtime/runtimetest"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/testenv"
)

// testCRIU returns $AGENT2ENV_CRIU, or the criu that make test-deps built
// (scripts/criu.sh).
func testCRIU(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("AGENT2ENV_CRIU"); p != "" {
		return p
	}
	out, err := exec.Command("../../../scripts/criu.sh", "--path").Output()
	if err != nil {
		testenv.Missing(t, "the project's criu is not built: run make criu (scripts/criu.sh)")
	}
	return strings.TrimSpace(string(out))
}

// newCRIURuntime returns a runtime of binary (testBinary) in root with the
// project's criu, checked by New.
func newCRIURuntime(t testing.TB, root, binary string) *Runtime {
	t.Helper()
	return newCRIURuntimeOf(t, root, binary, agentBin)
}

// newCRIURuntimeOf is newCRIURuntime with the agent binary at agent.
func newCRIURuntimeOf(t testing.TB, root, binary, agent string) *Runtime {
	t.Helper()
	rt, err := New(Config{Root: root, AgentBinary: agent, Images: testImages{}, CRIU: testCRIU(t),
		RuntimeBinary: testBinary(t, binary), Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	deleteLeftOnCleanup(t, rt)
	if !rt.Capabilities().Checkpoint {
		t.Fatalf("the project's criu fails criu check here (see the warning above)")
	}
	return rt
}

func TestCheckCRIU(t *testing.T) {
	dir := t.TempDir()
	failing := filepath.Join(dir, "criu")
	if err := os.WriteFile(failing, []byte("#!/bin/sh\necho 'Looks bad.'; exit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	discard := slog.New(slog.DiscardHandler)
	for _, path := range []string{filepath.Join(dir, "missing"), failing} {
		if got := checkCRIU(path, nil, discard); got != "" {
			t.Errorf("checkCRIU(%s) = %q; want \"\" (checkpoints off)", path, got)
		}
	}
}

// A paused sandbox with a command of the daemon's still streaming (an
// exec from before the pause) is saved, and stays paused: the exec lets
// go of its connection, as an attachment does, and goes on once the
// sandbox is resumed.
func TestCheckpointPausedBusy(t *testing.T) {
	runtimetest.RequiresRoot(t)
	rt := newCRIURuntime(t, newRoot(t), testBinary(t, "crun"))
	ctx := context.Background()
	startSandbox(t, rt, "busy")
	c := rt.client("busy")
	execCtx, stopExec := context.WithCancel(ctx)
	execDone := make(chan error, 1)
	var out testenv.Buffer
	go func() {
		_, err := c.Exec(execCtx, agent.ExecRequest{Shell: "while :; do date +%s%N; sleep 0.02; done"}, nil, &out, io.Discard)
		execDone <- err
	}()
	time.Sleep(300 * time.Millisecond)
	if err := rt.Pause(ctx, "busy"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // what it wrote before the pause has come
	before := out.String()
	if before == "" {
		t.Fatal("the command wrote no ticks before the pause")
	}
	start := time.Now()
	if err := rt.Checkpoint(ctx, "busy", filepath.Join(t.TempDir(), "snap"), true); err != nil || time.Since(start) > connsClosedTimeout {
		t.Errorf("checkpoint of a paused sandbox with an exec in flight: %v after %v; want it saved at once", err, time.Since(start))
	}
	if st, err := rt.Status(ctx, "busy"); err != nil || st.State != sandbox.StatePaused {
		t.Errorf("Status after the checkpoint = %+v, %v; want paused", st, err)
	}
	if err := rt.Resume(ctx, "busy"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(out.String()) < len(before)+10*len("1765000000000000000\n") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if after := out.String(); !strings.HasPrefix(after, before) || len(after) == len(before) {
		t.Errorf("the exec after the checkpoint and the resume: %d bytes of ticks, then %d; want it going on", len(before), len(after))
	}
	stopExec()
	if err := <-execDone; !errors.Is(err, context.Canceled) {
		t.Errorf("exec = %v, want canceled", err)
	}
}

// A live checkpoint of a sandbox with an exec in flight is saved at once:
// the exec lets go of its connection, as an attachment does, and attaches
// again once the sandbox is saved; its caller gets all its output, once,
// in order, and its exit code.
func TestCheckpointExecInFlight(t *testing.T) {
	runtimetest.RequiresRoot(t)
	rt := newCRIURuntime(t, newRoot(t), testBinary(t, "crun"))
	ctx := context.Background()
	startSandbox(t, rt, "streaming")
	c := rt.client("streaming")
	type result struct {
		res agent.ExecResult
		err error
	}
	done := make(chan result, 1)
	var out testenv.Buffer
	go func() {
		// 6 s: past the 5 s a checkpoint waited for an exec to end.
		res, err := c.Exec(ctx, agent.ExecRequest{Shell: "for i in $(seq 1 30); do echo $i; sleep 0.2; done"}, nil, &out, io.Discard)
		done <- result{res, err}
	}()
	for !strings.Contains(out.String(), "5\n") {
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	if err := rt.Checkpoint(ctx, "streaming", filepath.Join(t.TempDir(), "snap"), true); err != nil {
		t.Fatalf("checkpoint with an exec in flight: %v", err)
	}
	took := time.Since(start)
	t.Logf("checkpoint with an exec in flight: %v", took)
	if took > connsClosedTimeout/2 {
		t.Errorf("checkpoint with an exec in flight took %v; want it well under %v", took, connsClosedTimeout)
	}
	r := <-done
	var want strings.Builder
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	if r.err != nil || r.res.ExitCode != 0 || out.String() != want.String() {
		t.Errorf("exec across the checkpoint = %+v, %v, output %q; want 1 to 30 and exit 0", r.res, r.err, out.String())
	}
}

func TestCheckpointRestore(t *testing.T) { forBinaries(t, testCheckpointRestore) }

func testCheckpointRestore(t *testing.T, bin string) {
	runtimetest.RequiresRoot(t)
	root := newRoot(t)
	rt := newCRIURuntime(t, root, bin)
	ctx := context.Background()
	startSandbox(t, rt, "parent")
	c := rt.client("parent")
	// A process holding a variable in memory only, which it writes out on
	// SIGUSR1; a file; and a file in /dev/shm, a tmpfs of the sandbox's
	// own, which CRIU saves (as the other tmpfs mounts: /dev, the cgroup
	// mounts' parent, the empty masked directories).
	if code, out := run(t, c, `echo hello > /workspace/f
echo shm > /dev/shm/f
setsid sh -c 'x=41; trap "echo \$x > /workspace/out" USR1; while :; do sleep 0.1; done' </dev/null >/dev/null 2>&1 &
echo $! > /workspace/pid`); code != 0 {
		t.Fatalf("setup: %d %s", code, out)
	}
	snap := filepath.Join(t.TempDir(), "snap")
	start := time.Now()
	if err := rt.Checkpoint(ctx, "parent", snap, true); err != nil {
		t.Fatal(err)
	}
	t.Logf("checkpoint (live) took %v", time.Since(start))
	// The parent runs on; what it writes now is not in the snapshot.
	if code, out := run(t, rt.client("parent"), `echo changed > /workspace/f; kill -0 $(cat /workspace/pid) && echo alive`); code != 0 || !strings.Contains(out, "alive") {
		t.Fatalf("parent after checkpoint: %d %q", code, out)
	}
	for _, id := range []string{"child1", "child2"} {
		start = time.Now()
		if err := rt.Restore(ctx, id, snap, map[string]string{"from": "parent"}); err != nil {
			t.Fatal(err)
		}
		t.Logf("restore %s to an answering agent took %v", id, time.Since(start))
		code, out := run(t, rt.client(id), `cat /workspace/f /dev/shm/f; test -c /dev/null && echo null; kill -USR1 $(cat /workspace/pid); sleep 0.5; cat /workspace/out`)
		if code != 0 || out != "hello\nshm\nnull\n41\n" {
			t.Errorf("%s: exit %d, output %q; want the snapshot's files, /dev, and variable (hello, shm, null, 41)", id, code, out)
		}
		st, err := rt.Status(ctx, id)
		if err != nil || st.Labels["from"] != "parent" {
			t.Errorf("Status(%s) = %+v, %v", id, st, err)
		}
	}
	if code, out := run(t, rt.client("parent"), `cat /workspace/f`); code != 0 || out != "changed\n" {
		t.Errorf("parent: %d %q; the children's writes must not reach it", code, out)
	}
	// A paused sandbox is saved as it is, and stays paused.
	if err := rt.Pause(ctx, "child2"); err != nil {
		t.Fatal(err)
	}
	snapPaused := filepath.Join(t.TempDir(), "snap-paused")
	if err := rt.Checkpoint(ctx, "child2", snapPaused, true); err != nil {
		t.Fatal(err)
	}
	if st, err := rt.Status(ctx, "child2"); err != nil || st.State != sandbox.StatePaused {
		t.Errorf("Status(child2) after a checkpoint of it paused = %+v, %v; want paused", st, err)
	}
	if err := rt.Resume(ctx, "child2"); err != nil {
		t.Fatal(err)
	}
	// What is restored from it runs.
	if err := rt.Restore(ctx, "child4", snapPaused, nil); err != nil {
		t.Fatal(err)
	}
	if st, err := rt.Status(ctx, "child4"); err != nil || st.State != sandbox.StateRunning {
		t.Errorf("Status(child4) restored from a paused sandbox = %+v, %v; want running", st, err)
	}
	// To disk: the sandbox stops once saved, and comes back from the save.
	snap2 := filepath.Join(t.TempDir(), "snap2")
	run(t, rt.client("child1"), `rm /workspace/out`)
	if err := rt.Checkpoint(ctx, "child1", snap2, false); err != nil {
		t.Fatal(err)
	}
	if st, err := rt.Status(ctx, "child1"); err != nil || st.State != sandbox.StateStopped {
		t.Errorf("Status(child1) after a checkpoint that stops it = %+v, %v; want stopped", st, err)
	}
	// A stopped sandbox starts afresh (a new agent, the same disk) in the
	// network namespace the daemon made for it.
	if err := rt.Start(ctx, "child1"); err != nil {
		t.Fatal(err)
	}
	if code, out := run(t, rt.client("child1"), `cat /workspace/f`); code != 0 || out != "hello\n" {
		t.Errorf("child1 started again: %d %q", code, out)
	}
	if err := rt.Restore(ctx, "child3", snap2, nil); err != nil {
		t.Fatal(err)
	}
	if code, out := run(t, rt.client("child3"), `kill -USR1 $(cat /workspace/pid); sleep 0.5; cat /workspace/out`); code != 0 || out != "41\n" {
		t.Errorf("child3: exit %d, output %q; want 41", code, out)
	}
	for _, id := range []string{"parent", "child1", "child2", "child3", "child4"} {
		if err := rt.Delete(ctx, id); err != nil {
			t.Error(err)
		}
	}
	runtimetest.AssertNoLeaks(t, root)
}

// TestCheckpointRestorePython checkpoints a sandbox of the real
// agent2env/python image in which a Python process holds a variable and
// 50 MB, and restores it: the process is there, with its memory.
func TestCheckpointRestorePython(t *testing.T) { forBinaries(t, testCheckpointRestorePython) }

func testCheckpointRestorePython(t *testing.T, bin string) {
	runtimetest.RequiresRoot(t)
	criu := testCRIU(t)
	if os.Getenv("AGENT2ENV_BUILD_TESTS") != "1" {
		testenv.Missing(t, "agent2env/python: set AGENT2ENV_BUILD_TESTS=1 (make test does) to build it from the image build cache")
	}
	images, err := image.Open(filepath.Join(t.TempDir(), "images"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const ref = "agent2env/python"
	start := time.Now()
	if _, err := images.Ensure(ctx, ref, nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("image ready in %v", time.Since(start))
	root := newRoot(t)
	rt, err := New(Config{Root: root, AgentBinary: agentBin, Images: images, CRIU: criu, RuntimeBinary: testBinary(t, bin),
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	deleteLeftOnCleanup(t, rt)
	if err := rt.Create(ctx, &sandbox.Spec{ID: "py", Image: ref}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx, "py"); err != nil {
		t.Fatal(err)
	}
	// x lives only in the process's memory; SIGUSR1 writes it out.
	script := `import os, signal, time
x = 41
blob = bytearray(os.urandom(1 << 20)) * 50
def dump(*_):
    open("/workspace/out", "w").write("%d %d" % (x + 1, len(blob)))
signal.signal(signal.SIGUSR1, dump)
open("/workspace/ready", "w").write(str(os.getpid()))
while True:
    time.sleep(1)
`
	if err := os.WriteFile(filepath.Join(root, "py", dirDisk, diskWorkspace, "hold.py"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := run(t, rt.client("py"), `setsid python3 /workspace/hold.py </dev/null >/dev/null 2>&1 &
for i in $(seq 100); do [ -s /workspace/ready ] && break; sleep 0.1; done; cat /workspace/ready`); code != 0 || out == "" {
		t.Fatalf("start python: %d %q", code, out)
	}
	snap := filepath.Join(t.TempDir(), "snap")
	start = time.Now()
	if err := rt.Checkpoint(ctx, "py", snap, true); err != nil {
		t.Fatal(err)
	}
	t.Logf("checkpoint (live, python holding 50 MB) took %v", time.Since(start))
	start = time.Now()
	if err := rt.Restore(ctx, "py2", snap, nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("restore to an answering agent took %v", time.Since(start))
	code, out := run(t, rt.client("py2"), `kill -USR1 $(cat /workspace/ready); for i in $(seq 50); do [ -s /workspace/out ] && break; sleep 0.1; done; cat /workspace/out`)
	if code != 0 || out != "42 52428800" {
		t.Errorf("restored python: exit %d, output %q; want 42 52428800", code, out)
	}
	for _, id := range []string{"py", "py2"} {
		if err := rt.Delete(ctx, id); err != nil {
			t.Error(err)
		}
	}
	runtimetest.AssertNoLeaks(t, root)
}

// BenchmarkCheckpointRestore measures a live checkpoint of a busybox
// sandbox with one shell process, and a restore from it to an answering
// agent; compare with BenchmarkCreateStart/runc of the same run.
func BenchmarkCheckpointRestore(b *testing.B) {
	runtimetest.RequiresRoot(b)
	for _, bin := range testBinaries {
		b.Run(bin, func(b *testing.B) { benchmarkCheckpointRestore(b, bin) })
	}
}

func benchmarkCheckpointRestore(b *testing.B, bin string) {
	ctx := context.Background()
	root := newRoot(b)
	rt := newCRIURuntime(b, root, bin)
	sp := newSpec(b, "parent")
	if err := rt.Create(ctx, sp); err != nil {
		b.Fatal(err)
	}
	if err := rt.Start(ctx, "parent"); err != nil {
		b.Fatal(err)
	}
	var dumps, restores []time.Duration
	for i := 0; b.Loop(); i++ {
		snap := filepath.Join(root, fmt.Sprintf("_snap%d", i))
		start := time.Now()
		if err := rt.Checkpoint(ctx, "parent", snap, true); err != nil {
			b.Fatal(err)
		}
		dumped := time.Now()
		id := fmt.Sprintf("child%d", i)
		if err := rt.Restore(ctx, id, snap, nil); err != nil {
			b.Fatal(err)
		}
		dumps, restores = append(dumps, dumped.Sub(start)), append(restores, time.Since(dumped))
		b.StopTimer()
		if err := rt.Delete(ctx, id); err != nil {
			b.Fatal(err)
		}
		if err := os.RemoveAll(snap); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	if err := rt.Delete(ctx, "parent"); err != nil {
		b.Fatal(err)
	}
	median := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds()) / 1000
	}
	b.ReportMetric(median(dumps), "checkpoint-p50-ms")
	b.ReportMetric(median(restores), "restore-p50-ms")
}

// TestRestoreParallel restores one snapshot into 8 sandboxes at once (a
// fork): each has the snapshot's state (a file, and a variable a process
// holds in memory only) and a hostname of its own, what one writes neither
// the others nor the parent see, its agent takes the restored call, and
// each is deleted without leaks.
func TestRestoreParallel(t *testing.T) { forBinaries(t, testRestoreParallel) }

func testRestoreParallel(t *testing.T, bin string) {
	runtimetest.RequiresRoot(t)
	root := newRoot(t)
	rt := newCRIURuntime(t, root, bin)
	ctx := context.Background()
	startSandbox(t, rt, "parent")
	if code, out := run(t, rt.client("parent"), `echo 7 > /workspace/n
setsid sh -c 'x=41; trap "echo \$x > /workspace/out" USR1; while :; do sleep 0.1; done' </dev/null >/dev/null 2>&1 &
echo $! > /workspace/pid`); code != 0 {
		t.Fatalf("setup: %d %s", code, out)
	}
	snap := filepath.Join(t.TempDir(), "snap")
	if err := rt.Checkpoint(ctx, "parent", snap, true); err != nil {
		t.Fatal(err)
	}
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = rt.Restore(ctx, fmt.Sprintf("fork%d", i), snap, nil)
		}()
	}
	wg.Wait()
	t.Logf("%d restores from one snapshot at once: %v wall", n, time.Since(start))
	for i, err := range errs {
		if err != nil {
			t.Fatalf("fork%d: %v", i, err)
		}
	}
	for i := range n {
		id := fmt.Sprintf("fork%d", i)
		if _, err := rt.client(id).Restored(ctx, agent.RestoredRequest{}); err != nil {
			t.Errorf("%s: restored call: %v", id, err)
		}
		script := fmt.Sprintf(`read n < /workspace/n; echo $((n + %d)) > /workspace/n; cat /workspace/n; hostname
kill -USR1 $(cat /workspace/pid); for i in $(seq 50); do [ -s /workspace/out ] && break; sleep 0.1; done; cat /workspace/out`, i)
		want := fmt.Sprintf("%d\n%s\n41\n", 7+i, id)
		if code, out := run(t, rt.client(id), script); code != 0 || out != want {
			t.Errorf("%s: exit %d, output %q; want %q (its own write on the snapshot's 7, its own hostname, the variable)", id, code, out, want)
		}
	}
	if code, out := run(t, rt.client("parent"), `cat /workspace/n; hostname`); code != 0 || out != "7\nparent\n" {
		t.Errorf("parent: exit %d, output %q; want its own 7 and hostname", code, out)
	}
	for i := range n {
		if err := rt.Delete(ctx, fmt.Sprintf("fork%d", i)); err != nil {
			t.Error(err)
		}
	}
	if err := rt.Delete(ctx, "parent"); err != nil {
		t.Error(err)
	}
	runtimetest.AssertNoLeaks(t, root)
}

// echoServices answers every request of a sandbox with its id and path.
type echoServices struct{}

func (echoServices) ServeSandbox(ctx context.Context, l net.Listener, id string) error {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s", id, r.URL.Path)
	})}
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	defer stop()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// TestCheckpointRestoreServices checkpoints a sandbox that has the
// daemon's services, as every sandbox the daemon makes has, and egress,
// while a connection to the services is open, which the checkpoint ends;
// the parent's services answer again after, and the restored sandbox reaches its own services at
// 127.0.0.1:4000 and the proxy at 127.0.0.1:3128 under the parent's
// policy.
func TestCheckpointRestoreServices(t *testing.T) { forBinaries(t, testCheckpointRestoreServices) }

func testCheckpointRestoreServices(t *testing.T, bin string) {
	runtimetest.RequiresRoot(t)
	root := newRoot(t)
	in := newTestInternet(t)
	rt, err := New(Config{Root: root, AgentBinary: agentBin, Images: testImages{}, CRIU: testCRIU(t), Services: echoServices{}, RuntimeBinary: testBinary(t, bin),
		Egress: in.proxy, Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	deleteLeftOnCleanup(t, rt)
	ctx := context.Background()
	sp := newSpec(t, "parent")
	sp.Resources.DiskBytes = 32 << 20
	sp.Network.Egress = &sandbox.Egress{AllowedDomains: []string{"allowed.test"}}
	if err := rt.Create(ctx, sp); err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx, sp.ID); err != nil {
		t.Fatal(err)
	}
	if code, out := run(t, rt.client("parent"), `wget -Y off -qO- http://127.0.0.1:4000/before`); code != 0 || out != "parent /before" {
		t.Fatalf("services before: %d %q", code, out)
	}
	// A connection held open: the dump would fail on it, so Checkpoint
	// ends it (its client sees it closed) and the parent's services are
	// served again once it is done.
	if code, out := run(t, rt.client("parent"), `setsid sh -c 'sleep 60 | nc 127.0.0.1 4000' </dev/null >/dev/null 2>&1 &
echo $! > /tmp/nc
for i in $(seq 50); do netstat -tn 2>/dev/null | grep -q '127.0.0.1:4000 *ESTABLISHED' && exit 0; sleep 0.1; done; exit 1`); code != 0 {
		t.Fatalf("open a connection to the services: %d %q", code, out)
	}
	snap := filepath.Join(t.TempDir(), "snap")
	if err := rt.Checkpoint(ctx, "parent", snap, true); err != nil {
		t.Fatalf("Checkpoint with a connection to the services open: %v", err)
	}
	if code, out := run(t, rt.client("parent"), `netstat -tn 2>/dev/null | grep '127.0.0.1:4000 *ESTABLISHED'; kill -- -$(cat /tmp/nc); wget -Y off -qO- http://127.0.0.1:4000/still`); code != 0 || out != "parent /still" {
		t.Fatalf("parent after a checkpoint that closed its connection: %d %q; want the connection gone and the services answering", code, out)
	}
	if err := rt.Restore(ctx, "child", snap, nil); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"parent", "child"} {
		if code, out := run(t, rt.client(id), `wget -Y off -qO- http://127.0.0.1:4000/after`); code != 0 || out != id+" /after" {
			t.Errorf("%s after the checkpoint: %d %q; want its own services", id, code, out)
		}
		if code, out := run(t, rt.client(id), `wget -qO- http://allowed.test/; env -u NO_PROXY -u no_proxy wget -qO- http://denied.test/ 2>&1`); code == 0 || !strings.HasPrefix(out, "hello from allowed.test") || !strings.Contains(out, "403") {
			t.Errorf("%s after the checkpoint: egress %d %q; want allowed.test and a 403 for denied.test", id, code, out)
		}
	}
	for _, id := range []string{"parent", "child"} {
		if err := rt.Delete(ctx, id); err != nil {
			t.Error(err)
		}
	}
	runtimetest.AssertNoLeaks(t, root)
}

// TestCheckpointWithExecs checkpoints a sandbox live, round after round,
// while commands keep starting in it: every checkpoint and every command
// succeeds (audit F2: a request that reached the agent between the wait
// for the daemon's connections and the freeze was in the dump, and CRIU
// failed on it).
func TestCheckpointWithExecs(t *testing.T) { forBinaries(t, testCheckpointWithExecs) }

func testCheckpointWithExecs(t *testing.T, bin string) {
	runtimetest.RequiresRoot(t)
	root := newRoot(t)
	rt := newCRIURuntime(t, root, bin)
	ctx := context.Background()
	startSandbox(t, rt, "busy")
	const rounds, workers = 10, 4
	for i := range rounds {
		saved := make(chan struct{})
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					if _, err := rt.client("busy").Exec(ctx, agent.ExecRequest{Shell: "true", Timeout: 20 * time.Second}, nil, io.Discard, io.Discard); err != nil {
						errs <- err
						return
					}
					select {
					case <-saved:
						return
					default:
					}
				}
			}()
		}
		time.Sleep(time.Duration(i) * time.Millisecond)
		err := rt.Checkpoint(ctx, "busy", filepath.Join(t.TempDir(), fmt.Sprint("snap", i)), true)
		close(saved)
		wg.Wait()
		close(errs)
		if err != nil {
			t.Fatalf("round %d: checkpoint with commands starting: %v", i, err)
		}
		for err := range errs {
			t.Errorf("round %d: a command started with the checkpoint: %v", i, err)
		}
	}
	if err := rt.Delete(ctx, "busy"); err != nil {
		t.Error(err)
	}
	runtimetest.AssertNoLeaks(t, root)
}

// TestCheckpointCRIUFails checkpoints with a CRIU that fails: the error is
// 503 UNAVAILABLE and names no host path (CRIU's own words, which do, are
// for the daemon's log), and the sandbox runs on.
func TestCheckpointCRIUFails(t *testing.T) {
	runtimetest.RequiresRoot(t)
	failing := filepath.Join(t.TempDir(), "criu")
	script := "#!/bin/sh\n[ \"$1\" = check ] && exit 0\necho \"Error: see the log file $PWD/dump.log\" >&2\nexit 1\n"
	if err := os.WriteFile(failing, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	root := newRoot(t)
	rt, err := New(Config{Root: root, AgentBinary: agentBin, Images: testImages{}, CRIU: failing,
		RuntimeBinary: testBinary(t, "runc"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	deleteLeftOnCleanup(t, rt)
	ctx := context.Background()
	startSandbox(t, rt, "sb")
	err = rt.Checkpoint(ctx, "sb", filepath.Join(t.TempDir(), "snap"), true)
	if !errors.Is(err, errdefs.ErrUnavailable) || strings.Contains(err.Error(), "/") {
		t.Errorf("checkpoint with a failing CRIU: %v; want 503 naming no host path", err)
	}
	if code, out := run(t, rt.client("sb"), "echo alive"); code != 0 || out != "alive\n" {
		t.Errorf("the sandbox after the failed checkpoint: %d %q", code, out)
	}
	if err := rt.Delete(ctx, "sb"); err != nil {
		t.Error(err)
	}
	runtimetest.AssertNoLeaks(t, root)
}

// TestRestoreFailsNoZombies makes a restore fail in CRIU (the snapshot's
// agent binary is not the one its images map): the criu processes that
// the failed restore orphans to the daemon, a subreaper, are collected.
func TestRestoreFailsNoZombies(t *testing.T) { forBinaries(t, testRestoreFailsNoZombies) }

func testRestoreFailsNoZombies(t *testing.T, bin string) {
	runtimetest.RequiresRoot(t)
	root := newRoot(t)
	rt := newCRIURuntime(t, root, bin)
	ctx := context.Background()
	startSandbox(t, rt, "sb")
	snap := filepath.Join(t.TempDir(), "snap")
	if err := rt.Checkpoint(ctx, "sb", snap, true); err != nil {
		t.Fatal(err)
	}
	installAgentFile(t, filepath.Join(snap, fileAgent), 4096)
	for _, id := range []string{"r1", "r2"} {
		if err := rt.Restore(ctx, id, snap, nil); err == nil {
			t.Fatalf("restore %s of a snapshot whose agent binary changed: no error", id)
		}
	}
	var left []int
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if left = zombieChildren("criu"); len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("zombie criu children of the daemon after failed restores: %v", left)
	}
	if err := rt.Delete(ctx, "sb"); err != nil {
		t.Error(err)
	}
	runtimetest.AssertNoLeaks(t, root)
}

// A dump CRIU refuses for a process that opened /dev/tty without an end
// of its terminal of its own is a FailedPrecondition saying so; any other
// failure is left to the caller's message.
func TestCRIURefusal(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, log string
		want      bool
	}{
		{"ctty", "(00.061101) Error (criu/tty.c:2286): tty: ctty inheritance detected sid/pgrp 23 (ctty pid_real 22793 pty pid_real 22761)\n(00.070863) Error (criu/cr-dump.c:2155): Dumping FAILED.\n", true},
		{"other", "(00.1) Error (criu/sk-inet.c:190): inet: Connected TCP socket, consider using --tcp-established option.\n", false},
		{"no log", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name+".log")
			if tc.log != "" {
				if err := os.WriteFile(p, []byte(strings.Repeat("(00.0) noise\n", 2000)+tc.log), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			err := criuRefusal(p)
			if got := err != nil; got != tc.want || (got && (!errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "/dev/tty"))) {
				t.Errorf("criuRefusal = %v, want a refusal: %v", err, tc.want)
			}
		})
	}
}
