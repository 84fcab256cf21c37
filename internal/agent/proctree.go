package agent

import (
	"bytes"
	"cmp"
	"math"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// An execution that times out or is cancelled must end everything it
// started, including processes that left its process group or session
// (setsid, setpgid). Without a cgroup per execution (the sandbox's cgroup
// file system is read-only) the agent finds them in /proc: the execution's
// process tree, the groups and sessions its processes lead, and the
// processes the agent adopted (their parent died: as PID 1 it inherits
// every orphan) that started while this execution was the only one running.
// It stops them with SIGSTOP, round after round until no new one appears —
// a stopped process cannot fork — and then kills them all.
//
// An orphan that started while other executions ran too cannot be told
// apart and is spared; so is one that a process outside any execution (the
// main process, what an earlier command left running) made by a double
// fork while this execution was the only one running — it is killed.

// proc is one process as /proc/<pid>/stat describes it.
type proc struct {
	pid, ppid, pgid, sid int
	start                uint64 // clock ticks after boot
	state                byte   // R, S, D, T (stopped)...
}

// readProcs returns the live processes of the pid namespace by pid.
// Zombies are left out: they are already dead.
func readProcs() map[int]proc {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	procs := make(map[int]proc, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readProc(pid); ok {
			procs[pid] = p
		}
	}
	return procs
}

// readProc parses /proc/<pid>/stat: "pid (comm) state ppid pgrp session
// ... starttime ...", where comm may hold spaces and parentheses.
func readProc(pid int) (proc, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return proc{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return proc{}, false
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 of proc(5) (state), f[19] field 22 (starttime).
	if len(f) < 20 || f[0][0] == 'Z' {
		return proc{}, false
	}
	num := func(i int) int { n, _ := strconv.Atoi(string(f[i])); return n }
	start, _ := strconv.ParseUint(string(f[19]), 10, 64)
	return proc{pid: pid, ppid: num(1), pgid: num(2), sid: num(3), start: start, state: f[0][0]}, true
}

// procScope says which processes belong to one execution.
type procScope struct {
	// root is where the execution's process tree starts: a command, or
	// the kernel that runs an execution's code.
	root int
	// spareRoot keeps root itself alive (a kernel outlives its
	// executions).
	spareRoot bool
	// group is a process group whose members started at or after since
	// belong to the execution even once their parent is gone.
	group int
	// since is when the execution started: nothing older is part of it.
	since uint64
	// spared are processes (pid → start) whose trees are not the
	// execution's: a kernel's children from earlier executions.
	spared map[int]uint64
	// adopted reports whether a process the agent adopted is the
	// execution's; nil claims none.
	adopted func(p proc) bool
	// also are processes (pid → start) that belong to the execution
	// wherever they are now: members found before a signal ended their
	// parents.
	also map[int]uint64
}

// members returns the processes of procs that belong to the scope: its
// tree (less spared subtrees), the members of its group started since the
// execution began, and of the groups and sessions its processes lead, with
// their trees in turn.
func (sc procScope) members(procs map[int]proc) map[int]proc {
	children := make(map[int][]proc, len(procs))
	for _, p := range procs {
		children[p.ppid] = append(children[p.ppid], p)
	}
	self := os.Getpid()
	excluded := map[int]bool{self: true}
	var exclude func(pid int)
	exclude = func(pid int) {
		excluded[pid] = true
		for _, c := range children[pid] {
			exclude(c.pid)
		}
	}
	for pid, start := range sc.spared {
		if p, ok := procs[pid]; ok && p.start == start {
			exclude(pid)
		}
	}
	if sc.spareRoot {
		excluded[sc.root] = true
	}
	out := make(map[int]proc)
	var add func(p proc)
	add = func(p proc) {
		if _, seen := out[p.pid]; seen || excluded[p.pid] || p.start < sc.since {
			return
		}
		out[p.pid] = p
		for _, c := range children[p.pid] {
			add(c)
		}
	}
	if root, ok := procs[sc.root]; ok {
		if sc.spareRoot {
			for _, c := range children[sc.root] {
				add(c)
			}
		} else {
			add(root)
		}
	}
	for pid, start := range sc.also {
		if p, ok := procs[pid]; ok && p.start == start {
			add(p)
		}
	}
	if sc.adopted != nil {
		for _, p := range children[self] {
			if p.start >= sc.since && sc.adopted(p) {
				add(p)
			}
		}
	}
	// Groups and sessions: the scope's own group, and those its members
	// created (a group's or session's id is its creator's pid).
	for {
		n := len(out)
		for _, p := range procs {
			if _, in := out[p.pid]; in {
				continue
			}
			leader, ok := out[p.pgid]
			if p.pgid == sc.group || (ok && leader.pgid == leader.pid) {
				add(p)
				continue
			}
			if leader, ok := out[p.sid]; ok && leader.sid == leader.pid {
				add(p)
			}
		}
		if len(out) == n {
			return out
		}
	}
}

// stopWait bounds the stopping before the kill: each round stops what the
// previous ones missed, until every process found has stopped (one stops
// only once out of the kernel — a fork in progress, whose child the next
// round finds) and none is new.
const stopWait = 2 * time.Second

// killPasses bounds how often kill starts over while the scope still has
// processes (those that outran a stopWait).
const killPasses = 3

// kill stops every process of the scope, then kills them all. A scope
// whose root goes too stops and kills its group at once as well: that
// takes a fork bomb in one group in one step, and is all there is to do
// without /proc.
func (sc procScope) kill() {
	whole := !sc.spareRoot && sc.group > 0
	for range killPasses {
		if whole {
			_ = syscall.Kill(-sc.group, syscall.SIGSTOP)
		}
		stopped := sc.stop()
		for pid := range stopped {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if whole {
			_ = syscall.Kill(-sc.group, syscall.SIGKILL)
		}
		if len(stopped) == 0 || len(sc.members(readProcs())) == 0 {
			return
		}
	}
}

// stop sends SIGSTOP to the scope's processes, round after round, and
// returns those it stopped (pid → start).
func (sc procScope) stop() map[int]uint64 {
	stopped := make(map[int]uint64)
	deadline := time.Now().Add(stopWait)
	for time.Now().Before(deadline) {
		fresh, stopping := 0, 0
		for pid, p := range sc.members(readProcs()) {
			if start, ok := stopped[pid]; ok && start == p.start {
				if p.state != 'T' && p.state != 't' {
					stopping++
				}
				continue
			}
			if syscall.Kill(pid, syscall.SIGSTOP) == nil {
				stopped[pid] = p.start
				fresh++
			}
		}
		switch {
		case fresh+stopping == 0:
			return stopped
		case fresh == 0:
			time.Sleep(time.Millisecond)
		}
	}
	return stopped
}

// children returns the children of pid (pid → start), from the children
// files of its threads.
func children(pid int) map[int]uint64 {
	out := make(map[int]uint64)
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, _ := os.ReadDir(dir)
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range bytes.Fields(b) {
			c, err := strconv.Atoi(string(f))
			if err != nil {
				continue
			}
			if p, ok := readProc(c); ok && p.ppid == pid {
				out[c] = p.start
			}
		}
	}
	return out
}

// nowTicks returns the time since boot in the clock ticks of
// /proc/<pid>/stat's start times (USER_HZ, 100 a second on Linux), rounded
// down, or 0 if it cannot be read.
func nowTicks() uint64 {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return 0
	}
	f := bytes.Fields(b)
	if len(f) == 0 {
		return 0
	}
	secs, frac, _ := bytes.Cut(f[0], []byte{'.'})
	s, err := strconv.ParseUint(string(secs), 10, 64)
	if err != nil {
		return 0
	}
	cs, _ := strconv.ParseUint(string(append(frac, '0', '0')[:2]), 10, 64)
	return s*100 + cs
}

// activity records when executions ran, so that a process the agent
// adopted can be traced to the one execution that could have started it.
// It is safe for concurrent use.
type activity struct {
	mu   sync.Mutex
	runs map[*run]bool
}

// run is one execution's time: from since to until (0 while it runs), in
// process start-time ticks.
type run struct{ since, until uint64 }

// begin records an execution that starts at since.
func (a *activity) begin(since uint64) *run {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.runs == nil {
		a.runs = make(map[*run]bool)
	}
	r := &run{since: since}
	a.runs[r] = true
	return r
}

// end records that r is over, and forgets the runs that no running one
// can be confused with any more.
func (a *activity) end(r *run) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r.until = max(nowTicks(), r.since)
	oldest := uint64(math.MaxUint64)
	for o := range a.runs {
		if o.until == 0 {
			oldest = min(oldest, o.since)
		}
	}
	var ended []*run
	for o := range a.runs {
		switch {
		case o.until == 0:
		case o.until < oldest:
			delete(a.runs, o)
		default:
			ended = append(ended, o)
		}
	}
	// A run that lasts (a detached process: a terminal open for days)
	// keeps every run since; past maxEndedRuns the oldest two ended ones
	// become one that spans both, and the time between them. That can
	// only make an adopted process look less sole: spared, never killed.
	if len(ended) <= maxEndedRuns {
		return
	}
	slices.SortFunc(ended, func(x, y *run) int { return cmp.Compare(x.since, y.since) })
	for ; len(ended) > maxEndedRuns; ended = ended[1:] {
		ended[1].since, ended[1].until = ended[0].since, max(ended[0].until, ended[1].until)
		delete(a.runs, ended[0])
	}
}

// maxEndedRuns bounds the ended runs an activity keeps.
const maxEndedRuns = 1024

// sole reports whether r is the only execution that ran at start.
func (a *activity) sole(r *run, start uint64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for o := range a.runs {
		if o != r && o.since <= start && (o.until == 0 || o.until >= start) {
			return false
		}
	}
	return true
}
