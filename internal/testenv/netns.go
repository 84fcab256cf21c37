package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Netns makes a network namespace with loopback up, for as long as t
// runs, and returns its path (/proc/<pid>/ns/net): for nsenter --net, and
// for [ListenIn]. It stops t as [RequireRoot] does unless it runs as root.
//
// The namespace is a process's (unshare --net, ended by t's cleanup), not
// one of "ip netns add": that would make /run/netns a mount point of its
// own, on top of the Pods' namespaces that the Kubernetes node tests'
// containerd mounts there, which could then not be removed.
func Netns(t testing.TB) (string, error) {
	t.Helper()
	RequireRoot(t)
	holder := exec.Command("unshare", "--net", "--", "sleep", "infinity")
	exited, err := StartBound(holder, syscall.SIGKILL)
	if err != nil {
		return "", fmt.Errorf("unshare: %w", err)
	}
	t.Cleanup(func() {
		// The namespace goes with the holder and whatever else is in it
		// (a veth, listeners made by ListenIn, once closed).
		_ = holder.Process.Kill()
		<-exited
	})
	path := "/proc/" + strconv.Itoa(holder.Process.Pid) + "/ns/net"
	// unshare execs sleep once the namespace is made.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		self, _ := os.Readlink("/proc/self/ns/net")
		if got, err := os.Readlink(path); err == nil && got != self {
			break
		}
		if time.Now().After(deadline) {
			return "", errors.New("unshare did not make a network namespace")
		}
	}
	if out, err := exec.Command("nsenter", "--net="+path, "ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		return "", fmt.Errorf("loopback up in %s: %w: %s", path, err, bytes.TrimSpace(out))
	}
	return path, nil
}

// ListenIn listens on TCP addr in the network namespace at path: a socket
// stays in the namespace it was made in, whichever thread uses it. The
// thread that makes it goes back to its own namespace before it is
// unlocked; one that cannot is left to end with its goroutine, which
// processes started by [StartBound] survive (not ones started by whichever
// thread runs).
func ListenIn(path, addr string) (net.Listener, error) {
	type result struct {
		l   net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		own, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer unix.Close(own)
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("setns %s: %w", path, err)}
			return
		}
		l, err := net.Listen("tcp", addr)
		if unix.Setns(own, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{l, err}
	}()
	r := <-ch
	return r.l, r.err
}
