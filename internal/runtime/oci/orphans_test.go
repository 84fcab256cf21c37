package oci

import (
	"bufio"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestReapStray: an agent killed while the runtime's helper that cloned
// it still runs is that helper's zombie when reap looks, and the
// daemon's (a child subreaper) once the helper exits: it is reaped then,
// not left a zombie for as long as the daemon runs. The helper here is a
// shell that starts the "agent" and becomes a sleep, which never waits.
func TestReapStray(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatalf("become subreaper: %v", err)
	}
	for i := range 3 {
		helper := exec.Command("sh", "-c", "sleep 600 & echo $!; exec sleep 600")
		out, err := helper.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := helper.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			t.Fatalf("read the agent's pid: %v", err)
		}
		agent, err := strconv.Atoi(strings.TrimSpace(line))
		if err != nil {
			t.Fatal(err)
		}
		// The shell reaps its children until it has become the sleep.
		waitFor(t, func() bool { comm, _, _ := procState(helper.Process.Pid); return comm == "sleep" })
		if err := syscall.Kill(agent, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		waitState(t, agent, func(state string, err error) bool { return err == nil && state == "Z" })
		reap(agent) // the helper's child yet: left for later
		if err := helper.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = helper.Wait()
		// Now the daemon's zombie, reaped within a reapDelay or two.
		waitState(t, agent, func(_ string, err error) bool { return err != nil })
		t.Logf("stray %d (agent %d) reaped", i, agent)
	}
}

// waitFor waits up to 5 s for cond; it fails the test when it never holds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting")
		}
	}
}

// waitState waits up to 5 s until done holds for the state of process pid
// (or the error of reading it); it fails the test when it never does,
// and reaps pid then, to leave no zombie.
func waitState(t *testing.T, pid int, done func(state string, err error) bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if state, _, err := processStat(pid); done(state, err) {
			return
		}
	}
	state, _, err := processStat(pid)
	var ws unix.WaitStatus
	_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
	t.Fatalf("process %d: state %q (%v) after 5 s", pid, state, err)
}
