package agent

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// reaper collects the exit status of every child of the agent. As PID 1 the
// agent inherits every orphan in the sandbox, so it must wait for all of
// them; the commands it started itself are handed their status through the
// channel registered for their pid.
//
// Starting a process and registering it happen under mu, and so does every
// wait, so a process that exits at once cannot be reaped before its waiter
// exists. There is one reaper per process (waiting for any child is a
// process-wide act), so the agent must not also use os/exec.
type reaper struct {
	mu      sync.Mutex
	waiters map[int]chan syscall.WaitStatus
}

var (
	theReaper     *reaper
	theReaperOnce sync.Once
)

// processReaper returns the process's reaper, starting it on first use.
func processReaper() *reaper {
	theReaperOnce.Do(func() { theReaper = newReaper() })
	return theReaper
}

func newReaper() *reaper {
	r := &reaper{waiters: make(map[int]chan syscall.WaitStatus)}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	go func() {
		for range sigs {
			r.reap()
		}
	}()
	return r
}

// start runs fork under the reaper's lock and registers the new pid.
func (r *reaper) start(fork func() (int, error)) (int, <-chan syscall.WaitStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pid, err := fork()
	if err != nil {
		return 0, nil, err
	}
	ch := make(chan syscall.WaitStatus, 1)
	r.waiters[pid] = ch
	return pid, ch, nil
}

// started reports whether pid is a process the agent started and has not
// reaped: a command, a kernel, the main process.
func (r *reaper) started(pid int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.waiters[pid]
	return ok
}

// reap waits for every exited child without blocking.
func (r *reaper) reap() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
		if ch, ok := r.waiters[pid]; ok {
			ch <- ws
			delete(r.waiters, pid)
		}
	}
}
