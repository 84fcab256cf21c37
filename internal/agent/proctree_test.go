package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// tagged returns the pids of the live processes with tag among their
// arguments.
func tagged(t *testing.T, tag string) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		for _, arg := range bytes.Split(b, []byte{0}) {
			if string(arg) == tag {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// newTag returns an argument no other process has: a sleep duration
// around 1000 s. Processes that carry it are killed when the test ends,
// whatever it found.
func newTag(t *testing.T) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	tag := "1000." + strconv.FormatUint(uint64(b[0])<<24|uint64(b[1])<<16|uint64(b[2])<<8|uint64(b[3]), 10)
	t.Cleanup(func() {
		for _, pid := range tagged(t, tag) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return tag
}

// waitGone waits for the processes tagged with tag to end, and fails
// the test with those left after a while.
func waitGone(t *testing.T, tag, what string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		left := tagged(t, tag)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d processes survived, e.g. pid %d", what, len(left), left[0])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// bombScript forks a tree of processes, each in a session of its own,
// depth levels deep, each of which then keeps forking short-lived
// children: a fork bomb bounded so that the test host survives it.
const bombScript = `#!/bin/sh
d=$1
if [ "$d" -gt 0 ]; then
	setsid "$0" $((d - 1)) "$2" &
	setsid "$0" $((d - 1)) "$2" &
fi
while :; do sleep 0.05; done
`

// Nothing an execution started survives its timeout or cancellation,
// even what moved to a process group or session of its own.
func TestExecEndKillsEscapees(t *testing.T) {
	c, work := startAgent(t)
	bomb := filepath.Join(work, "bomb.sh")
	if err := os.WriteFile(bomb, []byte(bombScript), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		shell func(tag string) string
	}{
		{"setsid", func(tag string) string { return `setsid sh -c "sleep ` + tag + `" & sleep ` + tag }},
		{"new process group", func(tag string) string {
			return `python3 -c 'import os; os.setpgid(0, 0); os.execvp("sleep", ["sleep", "` + tag + `"])' & sleep ` + tag
		}},
		{"grandchild in a new session", func(tag string) string {
			return `sh -c 'setsid sleep ` + tag + ` & wait' & sleep ` + tag
		}},
		{"fork bomb in new sessions", func(tag string) string { return bomb + " 5 " + tag + " & sleep " + tag }},
	}
	for _, tt := range tests {
		for _, how := range []string{"timeout", "cancel"} {
			t.Run(tt.name+" "+how, func(t *testing.T) {
				tag := newTag(t)
				req := ExecRequest{Shell: tt.shell(tag)}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if how == "timeout" {
					req.Timeout = time.Second
				} else {
					time.AfterFunc(time.Second, cancel)
				}
				res, err := c.Exec(ctx, req, nil, nil, nil)
				if how == "timeout" && (err != nil || !res.TimedOut) {
					t.Fatalf("exec = %+v, %v; want timed out", res, err)
				}
				waitGone(t, tag, "after the "+how)
			})
		}
	}
}

// A command that ends by itself leaves what it detached running, as
// docker exec does.
func TestExecDetachedSurvives(t *testing.T) {
	c, _ := startAgent(t)
	tag := newTag(t)
	res, err := c.Exec(context.Background(), ExecRequest{Shell: "nohup sleep " + tag + " >/dev/null 2>&1 &"}, nil, nil, nil)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec = %+v, %v", res, err)
	}
	// Under load the background child may not have exec'd sleep yet when
	// the command ends: wait for it to appear, then for it to stay.
	deadline := time.Now().Add(10 * time.Second)
	for len(tagged(t, tag)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the detached process never appeared")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	if len(tagged(t, tag)) != 1 {
		t.Fatal("the detached process did not survive its command")
	}
}

// A kernel execution that times out kills what it started, however
// detached, and spares what earlier executions started.
func TestKernelTimeoutKillsEscapees(t *testing.T) {
	c := startKernelAgent(t)
	newKernel(t, c, "k", LangPython)
	kept, started := newTag(t), newTag(t)
	out := execute(t, c, "k", `import subprocess
subprocess.Popen(["sleep", "`+kept+`"], start_new_session=True)`, 10*time.Second)
	if out.res.Error != nil {
		t.Fatalf("first execution: %+v", out.res.Error)
	}
	out = execute(t, c, "k", `import subprocess, time
subprocess.Popen(["sleep", "`+started+`"], start_new_session=True)
subprocess.Popen(["sh", "-c", "sleep `+started+` & sleep `+started+`"])
time.sleep(100)`, time.Second)
	if !out.res.TimedOut || out.res.StateLost {
		t.Fatalf("second execution = %+v, want timed out with the kernel kept", out.res)
	}
	waitGone(t, started, "after the timeout")
	if len(tagged(t, kept)) != 1 {
		t.Error("a process an earlier execution started was killed")
	}
	if out := execute(t, c, "k", "print(1)", 10*time.Second); strings.TrimSpace(out.stdout) != "1" {
		t.Errorf("kernel after the timeout: %+v %q", out.res, out.stdout)
	}
}

// As PID 1 does in a sandbox, the test process adopts the orphans of what
// its agents start; with envRunAgent set it is an agent instead.
func TestMain(m *testing.M) {
	if os.Getenv(envRunAgent) != "" {
		os.Exit(runAgentProcess())
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

// An orphan (its parent gone before the kill) that started while the
// execution alone ran is the execution's; one that started while another
// ran too, or before, may be the other's and is spared.
func TestExecEndKillsOrphans(t *testing.T) {
	c, _ := startAgent(t)
	ctx := context.Background()
	// Left running by a command that ended by itself.
	detached := newTag(t)
	if res, err := c.Exec(ctx, ExecRequest{Shell: "(setsid sleep " + detached + " &)"}, nil, nil, nil); err != nil || res.ExitCode != 0 {
		t.Fatalf("exec = %+v, %v", res, err)
	}

	// A double fork into a new session, then a timeout.
	orphan := newTag(t)
	res, err := c.Exec(ctx, ExecRequest{Shell: "(setsid sleep " + orphan + " &); sleep " + orphan, Timeout: time.Second}, nil, nil, nil)
	if err != nil || !res.TimedOut {
		t.Fatalf("exec = %+v, %v; want timed out", res, err)
	}
	waitGone(t, orphan, "after the timeout")

	// The same while another command runs and detaches one too.
	both, other := newTag(t), newTag(t)
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, ExecRequest{Shell: "(setsid sleep " + both + " &); sleep " + both, Timeout: time.Second}, nil, nil, nil)
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	if res, err := c.Exec(ctx, ExecRequest{Shell: "(setsid sleep " + other + " &)"}, nil, nil, nil); err != nil || res.ExitCode != 0 {
		t.Fatalf("exec = %+v, %v", res, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if len(tagged(t, detached)) != 1 || len(tagged(t, other)) != 1 {
		t.Errorf("a timeout killed what another command detached: %d %d", len(tagged(t, detached)), len(tagged(t, other)))
	}
}

// threads returns the number of OS threads of the process.
func threads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	t.Fatal("no Threads line in /proc/self/status")
	return 0
}

// The reserved threads are started at once and kept, for a sandbox out of
// processes cannot start one more.
func TestReserveThreads(t *testing.T) {
	const n = 16
	reserveThreads(n)
	time.Sleep(100 * time.Millisecond)
	if got := threads(t); got <= n {
		t.Errorf("%d threads after reserving %d", got, n)
	}
	for limit, want := range map[int64]int{64: 8, 512: 16, math.MaxInt64: 16} {
		if got := spareThreads(limit); got != want {
			t.Errorf("spare threads for %d processes: %d, want %d", limit, got, want)
		}
	}
}

// While a run lasts, the ended runs kept stay bounded, and a merged run
// still covers the times its runs covered.
func TestActivityBounded(t *testing.T) {
	var a activity
	long := a.begin(1)
	first := a.begin(5)
	first.until = 6 // a run that ended at once, whatever nowTicks says
	for range 3 * maxEndedRuns {
		a.end(a.begin(10))
	}
	if n := len(a.runs); n > maxEndedRuns+1 {
		t.Errorf("%d runs kept, want at most %d", n, maxEndedRuns+1)
	}
	if a.sole(long, 5) || a.sole(long, 10) {
		t.Error("a start while other runs ran looks sole")
	}
	if !a.sole(long, 3) {
		t.Error("a start while the long run alone ran does not look sole")
	}
}
