package oci

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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
// reapOrphans collects those, off the command's path: a runtime command
// schedules it (scheduleReap), and it runs reapDelay later, once for all
// the commands of that while, when their helpers have exited. What it
// must not collect is an exit that os/exec is about to wait for: a
// runtime command the daemon started itself, or another package's
// command. So it takes only zombie children named as the runtime binary
// or criu (only this package runs them; a failed CRIU leaves its own
// orphans) that are not in started, the pids of the
// runtime commands this process has started and not yet waited for (every
// Runtime of the process: tests run several). A command is registered
// between its fork and its wait, its start under reapMu read-locked (so
// starts run side by side), the scan under reapMu locked.
var (
	reapMu    sync.RWMutex
	startedMu sync.Mutex
	started   = map[int]bool{}
	// reapPending holds, per runtime binary, whether a reap is scheduled.
	reapPending sync.Map // string → *atomic.Bool
)

// reapDelay is how long after a runtime command its helpers are looked
// for: a second, so that a burst of creates scans once a second, not ten
// times (a scan reads the state of every child, hundreds of agents among
// them, and holds off new runtime commands while it does; at 100 ms the
// scans were 1 % of a crun burst's CPU). A zombie costs a pid meanwhile.
const reapDelay = time.Second

// runTracked runs cmd, its pid registered in started from its start
// until it has been waited for.
func runTracked(cmd *exec.Cmd) error {
	reapMu.RLock()
	err := cmd.Start()
	if err == nil {
		startedMu.Lock()
		started[cmd.Process.Pid] = true
		startedMu.Unlock()
	}
	reapMu.RUnlock()
	if err != nil {
		return err
	}
	err = cmd.Wait()
	startedMu.Lock()
	delete(started, cmd.Process.Pid)
	startedMu.Unlock()
	return err
}

// scheduleReap has reapOrphans(bin) run reapDelay from now, unless it is
// already due.
func scheduleReap(bin string) {
	v, _ := reapPending.LoadOrStore(bin, new(atomic.Bool))
	pending := v.(*atomic.Bool)
	if pending.Swap(true) {
		return
	}
	time.AfterFunc(reapDelay, func() {
		pending.Store(false)
		reapOrphans(bin)
	})
}

// reapOrphans waits for the zombie children of the daemon named bin's
// base name, or criu, that it did not start itself (see above).
func reapOrphans(bin string) {
	name := filepath.Base(bin)
	reapMu.Lock()
	defer reapMu.Unlock()
	startedMu.Lock()
	defer startedMu.Unlock()
	for _, pid := range childPids() {
		if started[pid] {
			continue
		}
		if comm, state, ok := procState(pid); ok && (comm == name || comm == "criu") && state == "Z" {
			var ws unix.WaitStatus
			_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		}
	}
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

// An agent killed before the runtime binary's helper that cloned it has
// exited (crun's outlives the crun the daemon ran by a moment: a delete
// right after a create can come first) is that helper's zombie, not the
// daemon's, when reap looks: it becomes the daemon's when the helper
// exits, later, and, being no runtime binary's, reapOrphans leaves it:
// one pid for as long as the daemon runs. So reap records such a zombie
// as a stray, by pid and start time (a zombie's pid is not reused), and
// reapStrays collects it once it is the daemon's, looking every
// reapDelay for strayWait at most (a helper that waits for it leaves
// none to collect).
var (
	straysMu      sync.Mutex
	strays        = map[int]stray{} // by pid
	straysPending bool              // a reapStrays is scheduled
)

// stray is a dead agent that was not the daemon's child when reaped.
type stray struct {
	start uint64    // its start time (processStat)
	since time.Time // when reap found it
}

// strayWait is how long reapStrays looks for a stray.
const strayWait = time.Minute

// awaitStray records pid, if it is a zombie, for reapStrays.
func awaitStray(pid int) {
	state, start, err := processStat(pid)
	if err != nil || state != "Z" {
		return // gone, or not dead
	}
	straysMu.Lock()
	defer straysMu.Unlock()
	strays[pid] = stray{start: start, since: time.Now()}
	if !straysPending {
		straysPending = true
		time.AfterFunc(reapDelay, reapStrays)
	}
}

// reapStrays waits for the strays that have become the daemon's children,
// forgets those gone and those looked for strayWait, and runs again
// reapDelay later while any is left.
func reapStrays() {
	straysMu.Lock()
	defer straysMu.Unlock()
	for pid, s := range strays {
		if state, start, err := processStat(pid); err != nil || state != "Z" || start != s.start {
			delete(strays, pid) // its parent reaped it
			continue
		}
		var ws unix.WaitStatus
		if got, _ := unix.Wait4(pid, &ws, unix.WNOHANG, nil); got == pid || time.Since(s.since) > strayWait {
			delete(strays, pid)
		}
	}
	if straysPending = len(strays) > 0; straysPending {
		time.AfterFunc(reapDelay, reapStrays)
	}
}
