package testenv

import (
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// TestStartBound: a process started by StartBound from a goroutine that
// locked its thread and then ended (the thread ended with it) keeps
// running, while one that goroutine started itself is killed; and its
// exit is reported.
func TestStartBound(t *testing.T) {
	var bound, direct *exec.Cmd
	var exited <-chan struct{}
	var err error
	// A goroutine that ends locked on the main thread wedges it rather than
	// ending it: try again until one ran on another thread.
	for onMain := true; onMain; {
		done := make(chan struct{})
		go func() {
			defer close(done)
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			if onMain = syscall.Gettid() == syscall.Getpid(); onMain {
				return
			}
			bound = exec.Command("sleep", "30")
			if exited, err = StartBound(bound, syscall.SIGKILL); err != nil {
				return
			}
			direct = exec.Command("sleep", "30")
			direct.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			err = direct.Start()
		}()
		<-done
	}
	if err != nil {
		t.Fatal(err)
	}
	// The control: the process the ended thread started itself dies.
	if err := direct.Wait(); err == nil {
		t.Fatal("the control process was not killed with its thread: the test proves nothing here")
	}
	select {
	case <-exited:
		t.Fatalf("the process ended with the thread of its caller: %v", bound.ProcessState)
	case <-time.After(100 * time.Millisecond):
	}
	cmd := bound
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("exit not reported")
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGTERM {
		t.Errorf("exit = %v, want killed by SIGTERM", cmd.ProcessState)
	}
}

func TestStartBoundError(t *testing.T) {
	if _, err := StartBound(exec.Command("/nonexistent/binary"), syscall.SIGKILL); err == nil {
		t.Fatal("started a binary that does not exist")
	}
}
