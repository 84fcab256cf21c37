// Command probe tries, from inside a sandbox, what a sandbox must not
// allow, and prints the outcome for the conformance suite in runtimetest.
//
//	probe syscall NAME   try system call NAME; print "ok" or the errno name
//	probe ids            print "uid euid gid egid" after trying setuid(0)
//	probe connect ADDR   connect to host:port over TCP within 3 s; print
//	                     "ok", "timeout" or the errno name
package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: probe syscall NAME | ids | connect ADDR")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "ids":
		_ = unix.Setuid(0)
		fmt.Println(unix.Getuid(), unix.Geteuid(), unix.Getgid(), unix.Getegid())
	case "syscall":
		try, ok := calls[os.Args[2]]
		if !ok {
			fmt.Fprintln(os.Stderr, "unknown call", os.Args[2])
			os.Exit(2)
		}
		if err := try(); err != nil {
			fmt.Println(unix.ErrnoName(err.(syscall.Errno)))
			return
		}
		fmt.Println("ok")
	case "connect":
		fmt.Println(connect(os.Args[2]))
	default:
		os.Exit(2)
	}
}

// connect tries a TCP connection to addr and says how it went.
func connect(addr string) string {
	conn, err := net.DialTimeout("tcp", addr, 3*time.Second)
	var errno syscall.Errno
	switch {
	case err == nil:
		conn.Close()
		return "ok"
	case errors.As(err, &errno):
		return unix.ErrnoName(errno)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return "timeout"
	default:
		return err.Error()
	}
}

// socket opens a socket of domain, type and protocol and closes it.
func socket(domain, typ, proto int) error {
	fd, err := unix.Socket(domain, typ, proto)
	if err == nil {
		unix.Close(fd)
	}
	return err
}

func errno(_, _ uintptr, e syscall.Errno) error {
	if e != 0 {
		return e
	}
	return nil
}

func raw(nr uintptr, args ...uintptr) error {
	var a [6]uintptr
	copy(a[:], args)
	return errno(unix.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5]))
}

// calls try each dangerous system call in a way that succeeds (or fails
// with a different errno) when nothing forbids it.
var calls = map[string]func() error{
	"ptrace": func() error { return raw(unix.SYS_PTRACE, unix.PTRACE_TRACEME) },
	"mount": func() error {
		return unix.Mount("none", "/tmp", "tmpfs", 0, "")
	},
	"umount2":    func() error { return unix.Unmount("/tmp", unix.MNT_DETACH) },
	"pivot_root": func() error { return unix.PivotRoot("/tmp", "/tmp") },
	"unshare-user": func() error {
		return unix.Unshare(unix.CLONE_NEWUSER)
	},
	"unshare-net": func() error { return unix.Unshare(unix.CLONE_NEWNET) },
	"setns":       func() error { return unix.Setns(0, unix.CLONE_NEWNET) },
	"clone-newuser": func() error {
		// A child that got through exits at once, before touching Go state.
		r1, _, e := unix.RawSyscall6(unix.SYS_CLONE, unix.CLONE_NEWUSER|uintptr(unix.SIGCHLD), 0, 0, 0, 0, 0)
		if e == 0 && r1 == 0 {
			unix.RawSyscall(unix.SYS_EXIT_GROUP, 0, 0, 0)
		}
		if e != 0 {
			return e
		}
		return nil
	},
	// size 0 is invalid: an unfiltered clone3 fails with EINVAL, not ENOSYS.
	"clone3":          func() error { return raw(unix.SYS_CLONE3, 0, 0) },
	"bpf":             func() error { return raw(unix.SYS_BPF, 0, 0, 0) },
	"perf_event_open": func() error { return raw(unix.SYS_PERF_EVENT_OPEN, 0, 0, ^uintptr(0), ^uintptr(0), 0) },
	"keyctl": func() error {
		return raw(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, negOne(unix.KEY_SPEC_SESSION_KEYRING), 0)
	},
	"add_key": func() error {
		typ, desc := cstr("user"), cstr("probe")
		return raw(unix.SYS_ADD_KEY, ptr(typ), ptr(desc), ptr(desc), 1, negOne(unix.KEY_SPEC_PROCESS_KEYRING))
	},
	"userfaultfd": func() error { return raw(unix.SYS_USERFAULTFD, 0) },
	"name_to_handle_at": func() error {
		var h [128 + 8]byte
		h[0] = 128
		var mnt int32
		p := cstr("/")
		return raw(unix.SYS_NAME_TO_HANDLE_AT, negOne(unix.AT_FDCWD), ptr(p), uintptr(unsafe.Pointer(&h[0])), uintptr(unsafe.Pointer(&mnt)), 0)
	},
	"open_by_handle_at": func() error { return raw(unix.SYS_OPEN_BY_HANDLE_AT, 0, 0, 0) },
	"process_vm_readv": func() error {
		var buf [8]byte
		iov := unix.Iovec{Base: &buf[0], Len: 8}
		return raw(unix.SYS_PROCESS_VM_READV, uintptr(os.Getpid()), uintptr(unsafe.Pointer(&iov)), 1, uintptr(unsafe.Pointer(&iov)), 1, 0)
	},
	"kexec_load":    func() error { return raw(unix.SYS_KEXEC_LOAD, 0, 0, 0, 0) },
	"init_module":   func() error { return raw(unix.SYS_INIT_MODULE, 0, 0, 0) },
	"delete_module": func() error { return raw(unix.SYS_DELETE_MODULE, 0, 0) },
	"swapon":        func() error { return raw(unix.SYS_SWAPON, 0, 0) },
	"reboot":        func() error { return raw(unix.SYS_REBOOT, 0, 0, 0, 0) },
	"acct":          func() error { return raw(unix.SYS_ACCT, 0) },
	"syslog":        func() error { return raw(unix.SYS_SYSLOG, 10, 0, 0) },
	"settimeofday":  func() error { return raw(unix.SYS_SETTIMEOFDAY, 0, 0) },
	"clock_settime": func() error { return raw(unix.SYS_CLOCK_SETTIME, 0, 0) },
	// Raw and packet sockets need CAP_NET_RAW: with it, a sandbox could
	// forge packets on whatever network it has.
	"socket-raw":    func() error { return socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP) },
	"socket-packet": func() error { return socket(unix.AF_PACKET, unix.SOCK_RAW, 0) },
	"io_uring_setup": func() error {
		var params [120]byte
		return raw(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params[0])))
	},
}

func cstr(s string) []byte { return append([]byte(s), 0) }
func ptr(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }
func negOne(v int) uintptr { return uintptr(int64(v)) }
