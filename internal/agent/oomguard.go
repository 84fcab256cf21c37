package agent

import (
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The OOM guard. Every user command runs at userOOMScore, so the sandbox's
// out-of-memory killer takes one before the agent; but it takes the agent
// when no command is left to take. That happens even with memory to spare:
// a thread of the agent that began its OOM handling while the last
// victim's memory was still charged goes on to choose once that victim has
// been reaped — which the killer skips — and finds only the agent (seen in
// CI's memory bomb: the agent killed at 8 MB of a 64 MB limit, the bomb's
// last process chosen a moment before). Where the agent's own score is
// -1000 (a daemon with CAP_SYS_RESOURCE) the killer never takes it and
// no guard is needed; elsewhere the agent keeps a guard: the image's sleep
// for as long as sleep goes, started through the OOM trampoline, so at
// userOOMScore. The killer's score of a process is its resident pages plus
// adj/1000 of the limit, so a command with more memory than a sleep goes
// first, and the guard always before the agent. The agent starts a new one
// when it dies. (Not the trampoline itself pausing: CRIU cannot restore a
// process that runs a memfd, and sandboxes are checkpointed.)
type oomGuard struct {
	once sync.Once
	pid  atomic.Int64 // the running guard's; 0 while there is none
}

// theOOMGuard is the process's: one agent, one guard, however many
// Servers (tests) start commands.
var theOOMGuard oomGuard

// guardSleep is where images have sleep, and guardArgv what the guard runs:
// a sleep of 68 years (busybox's sleep has no "infinity"), named for ps.
var (
	guardSleep = []string{"/usr/bin/sleep", "/bin/sleep"}
	guardArgv  = []string{"agent2env-oom-guard", "2147483647"}
)

// Between two starts of the guard: the first wait after one that lived,
// the longest after starts that fail (a sandbox at its process limit).
const (
	guardRestart    = 100 * time.Millisecond
	guardMaxBackoff = 5 * time.Second
)

// keep starts the guard once, through s's trampoline o, when the agent's
// own score lets the killer take it and the image has a sleep.
func (g *oomGuard) keep(s *Server, o *oomExec) {
	g.once.Do(func() {
		own, err := os.ReadFile(procOOMScore)
		if err == nil && strings.TrimSpace(string(own)) == "-1000" {
			return
		}
		for _, path := range guardSleep {
			if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				go g.run(s, o, path)
				return
			}
		}
		s.log.Warn("no sleep in the image for the OOM guard: the out-of-memory killer may take the agent when it has taken every command",
			"looked_in", guardSleep)
	})
}

// run keeps a guard running, for the life of the process. The first
// starts a moment after the command that asked for it, which has the CPU
// to itself meanwhile (a new sandbox's first command is what its user
// waits for).
func (g *oomGuard) run(s *Server, o *oomExec, sleep string) {
	// Its own process group (procAttr's), so that no execution's kill
	// takes it; it dies with the agent outside a sandbox too (tests).
	sys := s.procAttr()
	sys.Pdeathsig = syscall.SIGKILL
	wait := guardRestart
	for {
		time.Sleep(wait)
		pid, exited, err := s.reaper.start(func() (int, error) {
			return o.forkExec(sleep, guardArgv, &syscall.ProcAttr{Dir: "/", Sys: sys})
		})
		if err != nil {
			wait = min(2*wait, guardMaxBackoff)
			s.log.Warn("start the OOM guard", "err", err, "retry_in", wait)
			continue
		}
		wait = guardRestart
		g.pid.Store(int64(pid))
		<-exited
		g.pid.Store(0)
	}
}

// running returns the guard's pid, 0 when none runs.
func (g *oomGuard) running() int { return int(g.pid.Load()) }
