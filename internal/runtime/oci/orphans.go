package oci

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// The daemon is a child subreaper (New), so every process orphaned below
// it becomes its child: the agents, as meant, but also the runtime
// binary's own helpers. crun run --detach leaves one per container (the
// process that clones the container's init exits after its parent, the
// crun the daemon ran, has gone), a zombie of the daemon's that nothing
// waits for: one pid per create, for as long as the daemon runs. runc's
// helpers are waited for by runc itself.
//
// reapOrphans collects those. What it must not collect is an exit that
// os/exec is about to wait for: a runtime command the daemon started
// itself, or another package's command. So it takes only zombie children
// named as the runtime binary (only this package runs it) that are not
// among started, the pids of the runtime commands this process has
// started and not yet waited for (every Runtime of the process: tests
// run several), registered under startedMu between fork and wait.
var (
	startedMu sync.Mutex
	started   = map[int]bool{}
)

// runTracked runs cmd, its pid registered in started from its start
// until it has been waited for.
func runTracked(cmd *exec.Cmd) error {
	startedMu.Lock()
	err := cmd.Start()
	if err == nil {
		started[cmd.Process.Pid] = true
	}
	startedMu.Unlock()
	if err != nil {
		return err
	}
	err = cmd.Wait()
	startedMu.Lock()
	delete(started, cmd.Process.Pid)
	startedMu.Unlock()
	return err
}

// outputTracked is cmd.Output through runTracked.
func outputTracked(cmd *exec.Cmd) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := runTracked(cmd)
	if ee, ok := err.(*exec.ExitError); ok {
		ee.Stderr = stderr.Bytes()
	}
	return stdout.Bytes(), err
}

// reapOrphans waits for the zombie children of the daemon named bin's
// base name that it did not start itself (see above), and returns how many
// it collected.
func reapOrphans(bin string) int {
	name := filepath.Base(bin)
	startedMu.Lock()
	defer startedMu.Unlock()
	n := 0
	for _, pid := range childPids() {
		if started[pid] {
			continue
		}
		comm, state, ok := procState(pid)
		if !ok || comm != name || state != "Z" {
			continue
		}
		var ws unix.WaitStatus
		if got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); err == nil && got == pid {
			n++
		}
	}
	return n
}

// childPids returns the children of every thread of this process.
func childPids() []int {
	files, _ := filepath.Glob("/proc/self/task/*/children")
	var pids []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, s := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(s); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// procState returns the command name and state of process pid from
// /proc/<pid>/stat.
func procState(pid int) (comm, state string, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", "", false
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open || end+3 > len(s) {
		return "", "", false
	}
	return s[open+1 : end], s[end+2 : end+3], true
}
