// Package policy is the sandbox's system-call policy (package seccomp
// says what it is and why) and its compilation into a BPF filter for each
// architecture, with the system-call tables of
// github.com/elastic/go-seccomp-bpf. The filters are generated into
// package seccomp, which the agent links: the agent neither compiles the
// policy nor links the library, whose init (the tables of every
// architecture) cost an agent's start more than the compile did.
package policy

import (
	"fmt"
	"slices"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Denied lists the system calls that fail with EPERM. Names an
// architecture does not have are left out of its filter.
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

// x32Bit marks the system calls of x86-64's x32 ABI, which share its audit
// architecture.
const x32Bit = 0x40000000

// Arches are the GOARCHes whose system calls the library knows by name:
// those the policy has a filter for. All are little-endian, where the low
// word of clone's 64-bit flags argument comes first.
var Arches = []string{"386", "amd64", "arm", "arm64"}

// Program returns the filter as BPF instructions for goarch: another
// ABI's calls and clone3 get ENOSYS, a clone with a namespace flag and the
// denied calls EPERM, the rest is allowed. It is written here rather than
// by the library's Policy, which assembles for the machine it runs on only;
// the library's tables give each architecture's numbers.
func Program(goarch string) ([]bpf.Instruction, error) {
	info, err := arch.GetInfo(goarch)
	if err != nil || !slices.Contains(Arches, goarch) {
		return nil, fmt.Errorf("seccomp policy: no system-call table for %s (%v)", goarch, err)
	}
	clone, ok := info.SyscallNames["clone"]
	if !ok {
		return nil, fmt.Errorf("seccomp policy: %s has no clone", goarch)
	}
	var denied []uint32
	for _, name := range Denied {
		if nr, ok := info.SyscallNames[name]; ok {
			denied = append(denied, uint32(nr))
		}
	}
	slices.Sort(denied)
	if len(denied) > 255 { // a jump skips at most 255 instructions
		return nil, fmt.Errorf("seccomp policy: %d denied calls for %s, more than one jump spans", len(denied), goarch)
	}
	var nsFlags uint32
	for _, f := range NamespaceCloneFlags {
		nsFlags |= uint32(f)
	}
	var (
		allow  = bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW}
		eperm  = bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)}
		enosys = bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)}
	)
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // seccomp_data.arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		enosys,
		bpf.LoadAbsolute{Off: 0, Size: 4}, // seccomp_data.nr
	}
	if info.ID == arch.X86_64.ID {
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32Bit, SkipFalse: 1}, enosys)
	}
	if nr, ok := info.SyscallNames[clone3]; ok {
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(nr), SkipFalse: 1}, enosys)
	}
	prog = append(prog,
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(clone), SkipFalse: 4},
		bpf.LoadAbsolute{Off: 16, Size: 4}, // seccomp_data.args[0], its low word
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: nsFlags, SkipFalse: 1},
		eperm,
		allow)
	// Each denied number jumps over the rest and allow, to eperm.
	for i, nr := range denied {
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr, SkipTrue: uint8(len(denied) - i)})
	}
	return append(prog, allow, eperm), nil
}
