package oci

import (
	"runtime"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// The default seccomp profile allows every system call except a deny list,
// where Docker's profile allows a list and denies the rest. A deny list keeps
// working when the image's libc starts using a new harmless call; the price
// is that the list must name every dangerous call, including new ones. The
// calls below are those Docker's profile leaves out for a container without
// CAP_SYS_ADMIN, CAP_SYS_PTRACE and friends, plus the new mount API and
// io_uring. Most of them fail without capabilities anyway; the list makes
// sure they fail even where a capability check has a hole (user namespaces
// above all) and keeps kernel attack surface small.
var deniedSyscalls = []string{
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

// namespaceCloneFlags are the clone flags that make new namespaces.
var namespaceCloneFlags = []uint64{
	unix.CLONE_NEWNS, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC, unix.CLONE_NEWUSER,
	unix.CLONE_NEWPID, unix.CLONE_NEWNET, unix.CLONE_NEWCGROUP,
}

// seccompArchitectures lists the native architecture and its compat ones, so
// that a 32-bit system call cannot slip past the filter.
var seccompArchitectures = map[string][]specs.Arch{
	"amd64":   {specs.ArchX86_64, specs.ArchX86, specs.ArchX32},
	"arm64":   {specs.ArchAARCH64, specs.ArchARM},
	"ppc64le": {specs.ArchPPC64LE},
	"riscv64": {specs.ArchRISCV64},
}

// cloneFlagsArg is the index of clone's flags argument on the architectures
// above (s390 alone puts it second).
const cloneFlagsArg = 0

// seccompProfile returns the default profile of every sandbox.
func seccompProfile() *specs.LinuxSeccomp {
	eperm, enosys := uint(unix.EPERM), uint(unix.ENOSYS)
	p := &specs.LinuxSeccomp{
		DefaultAction: specs.ActAllow,
		Architectures: seccompArchitectures[runtime.GOARCH],
		Syscalls: []specs.LinuxSyscall{
			{Names: deniedSyscalls, Action: specs.ActErrno, ErrnoRet: &eperm},
			// clone3 passes its flags in memory, out of a filter's reach:
			// ENOSYS makes libc fall back to clone, whose flags are checked.
			{Names: []string{"clone3"}, Action: specs.ActErrno, ErrnoRet: &enosys},
		},
	}
	// One rule per flag: rules for one call are ORed, the arguments of one
	// rule ANDed, and a masked compare tests a single bit pattern.
	for _, flag := range namespaceCloneFlags {
		p.Syscalls = append(p.Syscalls, specs.LinuxSyscall{
			Names:    []string{"clone"},
			Action:   specs.ActErrno,
			ErrnoRet: &eperm,
			Args:     []specs.LinuxSeccompArg{{Index: cloneFlagsArg, Value: flag, ValueTwo: flag, Op: specs.OpMaskedEqual}},
		})
	}
	return p
}
