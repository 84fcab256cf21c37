package oci

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// agentState reports the host pid of the sandbox's agent if it runs, and
// whether it was ever started (since the last Create or Delete of the
// container). A dead agent is reaped if it was our child.
func (r *Runtime) agentState(dir string) (pid int, started bool) {
	b, err := os.ReadFile(filepath.Join(dir, filePid))
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, true
	}
	pid, _ = strconv.Atoi(f[0])
	want, _ := strconv.ParseUint(f[1], 10, 64)
	if pid <= 0 {
		return 0, true
	}
	if start, err := processStart(pid); err != nil || start != want {
		if errors.Is(err, errZombie) {
			reap(pid)
		}
		return 0, true
	}
	return pid, true
}

var errZombie = errors.New("process exited")

// processStart returns the start time of a live process in clock ticks
// since boot (field 22 of /proc/PID/stat).
func processStart(pid int) (uint64, error) {
	state, start, err := processStat(pid)
	if err != nil {
		return 0, err
	}
	if state == "Z" || state == "X" {
		return 0, errZombie
	}
	return start, nil
}

// processStat returns the state and the start time in clock ticks since
// boot of process pid, live or not (fields 3 and 22 of /proc/PID/stat).
func processStat(pid int) (state string, start uint64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, err
	}
	// The command name in parentheses may hold spaces: split after it.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return "", 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return "", 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("parse /proc/%d/stat: %w", pid, err)
	}
	return f[0], start, nil
}

// reap collects the exit status of pid if it is a child of the daemon. A
// dead agent that is not (yet) one is left to reapStrays.
func reap(pid int) {
	var ws unix.WaitStatus
	if _, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); errors.Is(err, unix.ECHILD) {
		awaitStray(pid)
	}
}

// waitPidfd waits up to d for the process of pidfd to exit.
func waitPidfd(ctx context.Context, pidfd int, d time.Duration) (bool, error) {
	deadline := time.Now().Add(d)
	for {
		// Poll in slices to notice a cancelled context.
		left := min(time.Until(deadline), 50*time.Millisecond)
		if left < 0 {
			left = 0
		}
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(left.Milliseconds()))
		if err != nil && !errors.Is(err, unix.EINTR) {
			return false, fmt.Errorf("wait for agent: %w", err)
		}
		if n > 0 {
			return true, nil
		}
		if err := ctx.Err(); err != nil {
			return false, err
		}
		if left == 0 {
			return false, nil
		}
	}
}
