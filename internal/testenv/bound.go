package testenv

import (
	"fmt"
	"os/exec"
	"runtime"
	"syscall"
)

// StartBound starts cmd so that it gets sig should the test binary die
// without stopping it, and returns a channel that is closed once cmd has
// been waited for (cmd.ProcessState then holds its exit).
//
// The parent-death signal (Pdeathsig) comes when the thread that started
// a process ends, not the process, and the Go runtime ends threads: any
// a goroutine locked and left. A process started from an arbitrary
// goroutine can so be killed mid-test by an unrelated locked goroutine
// returning. StartBound starts cmd and waits for it on a thread locked
// for as long as cmd runs, which ends only after cmd has exited.
func StartBound(cmd *exec.Cmd, sig syscall.Signal) (<-chan struct{}, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = sig
	exited := make(chan struct{})
	started := make(chan error, 1)
	go func() {
		defer close(exited)
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := cmd.Start(); err != nil {
			started <- fmt.Errorf("start %s: %w", cmd.Path, err)
			return
		}
		started <- nil
		_ = cmd.Wait() // the exit is in cmd.ProcessState
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return exited, nil
}
