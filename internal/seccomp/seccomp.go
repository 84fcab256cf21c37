// Package seccomp is the sandbox's system-call policy, one table for every
// runtime, and the filter that enforces it. The in-sandbox agent installs
// the filter on itself when it starts (Install), before it runs anything,
// so every process of the sandbox — user commands, kernels, whatever they
// start — inherits it, whatever the container runtime's own profile is: a
// runc bundle's, a Pod's RuntimeDefault. The policy is package policy;
// its filter for each architecture is compiled ahead of time into this
// package (zfilters.go, go generate), so an agent's start compiles
// nothing and runc's per-start libseccomp compile is gone.
//
// The policy allows every system call but a deny list, where Docker's
// profile allows a list and denies the rest. A deny list keeps working
// when an image's libc starts using a new harmless call; the price is that
// the list must name every dangerous call, new ones included. The calls
// are those Docker's profile leaves out for a container without
// CAP_SYS_ADMIN, CAP_SYS_PTRACE and friends, plus the new mount API and
// io_uring. Most of them fail without capabilities anyway; the list makes
// sure they fail even where a capability check has a hole (user
// namespaces above all) and keeps the kernel's attack surface small.
//
// Only the native architecture's calls are filtered; a call through
// another ABI (32-bit x86's int 0x80, x32) is refused with ENOSYS, so a
// deny list written in native numbers cannot be walked around, and 32-bit
// programs do not run in a sandbox. An architecture without a filter
// (one whose system calls the compiler does not know) gets no agent: Install
// fails.
package seccomp

//go:generate go test . -run TestFilters -update

import (
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Install sets the calling process's no_new_privs bit and installs the
// filter on all its threads (SECCOMP_FILTER_FLAG_TSYNC); every process it
// starts afterwards inherits both. It cannot be undone.
func Install() error {
	filter, ok := filters[runtime.GOARCH]
	if !ok {
		return fmt.Errorf("seccomp: no filter for %s", runtime.GOARCH)
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	// no_new_privs is a thread's, and the filter's install needs it on the
	// thread that asks (TSYNC then sets it on the others): both on one
	// thread, which the goroutine could otherwise leave between them (a
	// process without CAP_SYS_ADMIN, an agent in a Pod, then got EACCES).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("seccomp: set no_new_privs: %w", err)
	}
	tid, _, errno := syscall.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	switch {
	case errno != 0:
		return fmt.Errorf("seccomp: install the filter: %w", errno)
	case tid != 0:
		return fmt.Errorf("seccomp: thread %d could not take the filter", tid)
	}
	return nil
}
