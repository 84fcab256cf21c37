// Package seccomp is the sandbox's system-call policy, one table for every
// runtime, and the filter that enforces it. The in-sandbox agent installs
// the filter on itself when it starts (Install), before it runs anything,
// so every process of the sandbox — user commands, kernels, whatever they
// start — inherits it, whatever the container runtime's own profile is: a
// runc bundle's, a Pod's RuntimeDefault. The filter is compiled in Go
// (github.com/elastic/go-seccomp-bpf), once per agent start, in
// microseconds; runc's per-start libseccomp compile is gone.
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
// programs do not run in a sandbox.
package seccomp

import (
	"fmt"
	"syscall"
	"unsafe"

	gs "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Denied lists the system calls that fail with EPERM. Names the native
// architecture does not have are left out.
var Denied = []string{
	// Namespaces and mounts: the escape routes.
	"unshare", "setns", "mount", "umount", "umount2", "pivot_root", "chroot",
	"fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
	// Tracing and reading other processes.
	"ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
	// The kernel itself.
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"create_module", "get_kernel_syms", "query_module", "bpf", "perf_event_open",
	"lookup_dcookie", "syslog", "iopl", "ioperm", "reboot", "swapon", "swapoff",
	"acct", "quotactl", "quotactl_fd", "nfsservctl", "_sysctl", "uselib", "vhangup",
	"userfaultfd", "fanotify_init", "io_uring_setup", "io_uring_enter", "io_uring_register",
	// Keyrings are not namespaced.
	"keyctl", "add_key", "request_key",
	// File handles bypass the mount namespace.
	"open_by_handle_at", "name_to_handle_at",
	// The clock is the host's.
	"settimeofday", "stime", "clock_settime", "clock_settime64", "clock_adjtime", "clock_adjtime64",
}

// NamespaceCloneFlags are the clone flags that make new namespaces: a
// clone with any of them fails with EPERM.
var NamespaceCloneFlags = []uint64{
	unix.CLONE_NEWNS, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC, unix.CLONE_NEWUSER,
	unix.CLONE_NEWPID, unix.CLONE_NEWNET, unix.CLONE_NEWCGROUP,
}

// clone3 passes its flags in memory, out of a filter's reach: it fails
// with ENOSYS, which makes libc fall back to clone, whose flags are checked.
const clone3 = "clone3"

// cloneFlagsArg is the index of clone's flags argument on the
// architectures Go runs on (s390 alone puts it second).
const cloneFlagsArg = 0

// Program returns the filter as BPF instructions for the native
// architecture.
func Program() ([]bpf.Instruction, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	var names []string
	for _, n := range Denied {
		if _, ok := info.SyscallNames[n]; ok {
			names = append(names, n)
		}
	}
	clone := make([]gs.NameWithConditions, 0, len(NamespaceCloneFlags))
	for _, flag := range NamespaceCloneFlags {
		// Conditions of one entry are ANDed, entries ORed.
		clone = append(clone, gs.NameWithConditions{Name: "clone",
			Conditions: gs.ArgumentConditions{{Argument: cloneFlagsArg, Operation: gs.BitsSet, Value: flag}}})
	}
	policy := gs.Policy{DefaultAction: gs.ActionAllow, Syscalls: []gs.SyscallGroup{
		{Names: names, Action: gs.ActionErrno},
		{NamesWithCondtions: clone, Action: gs.ActionErrno},
	}}
	denied, err := policy.Assemble()
	if err != nil {
		return nil, fmt.Errorf("seccomp: assemble the policy: %w", err)
	}
	enosys := bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)}
	// Before the library's program, which allows what another ABI calls:
	// another ABI's calls and clone3 get ENOSYS.
	prefix := []bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // seccomp_data.arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		enosys,
	}
	if nr, ok := info.SyscallNames[clone3]; ok {
		prefix = append(prefix,
			bpf.LoadAbsolute{Off: 0, Size: 4}, // seccomp_data.nr
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(nr), SkipFalse: 1},
			enosys)
	}
	return append(prefix, denied...), nil
}

// Install sets the calling process's no_new_privs bit and installs the
// filter on all its threads (SECCOMP_FILTER_FLAG_TSYNC); every process it
// starts afterwards inherits both. It cannot be undone.
func Install() error {
	prog, err := Program()
	if err != nil {
		return err
	}
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return fmt.Errorf("seccomp: assemble the filter: %w", err)
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		filter[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
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
