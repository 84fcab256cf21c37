package seccomp

import (
	"encoding/binary"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// data is a seccomp_data as bpf.VM reads it: the kernel loads its words
// in the machine's order, the VM in network order, so each 32-bit word is
// written big-endian; a 64-bit argument's words are where the machine
// keeps them (on a little-endian one, the low word first).
func data(nr int, auditArch uint32, args ...uint64) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[0:], uint32(nr))
	binary.BigEndian.PutUint32(b[4:], auditArch)
	lo, hi := 0, 4
	if binary.NativeEndian.Uint16([]byte{0, 1}) == 1 {
		lo, hi = 4, 0
	}
	for i, a := range args {
		binary.BigEndian.PutUint32(b[16+8*i+lo:], uint32(a))
		binary.BigEndian.PutUint32(b[16+8*i+hi:], uint32(a>>32))
	}
	return b
}

// TestProgram runs the filter in a BPF interpreter: every call the policy
// names is EPERM, clone3 and other ABIs ENOSYS, a clone making a
// namespace EPERM, and what a program needs is allowed.
func TestProgram(t *testing.T) {
	info, err := arch.GetInfo("")
	if err != nil {
		t.Fatal(err)
	}
	prog, err := Program()
	if err != nil {
		t.Fatal(err)
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	const (
		allow  = unix.SECCOMP_RET_ALLOW
		eperm  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
		enosys = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	)
	native := uint32(info.ID)
	nr := func(name string) int {
		n, ok := info.SyscallNames[name]
		if !ok {
			t.Fatalf("no system call %s here", name)
		}
		return n
	}
	type call struct {
		name string
		in   []byte
		want uint32
	}
	var tests []call
	for _, name := range Denied {
		if n, ok := info.SyscallNames[name]; ok {
			tests = append(tests, call{name, data(n, native), eperm})
		}
	}
	for _, flag := range NamespaceCloneFlags {
		tests = append(tests, call{"clone with a namespace flag", data(nr("clone"), native, flag|uint64(unix.SIGCHLD)), eperm})
	}
	tests = append(tests,
		call{"clone3", data(nr("clone3"), native), enosys},
		call{"fork by clone", data(nr("clone"), native, uint64(unix.SIGCHLD)), allow},
		call{"thread by clone", data(nr("clone"), native, unix.CLONE_VM|unix.CLONE_FS|unix.CLONE_FILES|unix.CLONE_SIGHAND|unix.CLONE_THREAD), allow},
		call{"read", data(nr("read"), native), allow},
		call{"openat", data(nr("openat"), native), allow},
		call{"execve", data(nr("execve"), native), allow},
		call{"setuid", data(nr("setuid"), native), allow},
		call{"another ABI", data(nr("read"), native^0x1), enosys},
	)
	if info.ID == arch.X86_64.ID {
		tests = append(tests,
			call{"i386's ptrace", data(26, uint32(arch.I386.ID)), enosys},
			call{"x32's ptrace", data(0x40000000|521, native), enosys})
	}
	for _, tc := range tests {
		got, err := vm.Run(tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if uint32(got) != tc.want {
			t.Errorf("%s: %#x, want %#x", tc.name, uint32(got), tc.want)
		}
	}
}

// envChild makes the test binary the child of TestInstall.
const envChild = "AGENT2ENV_SECCOMP_TEST_CHILD"

// TestInstall installs the filter in a child process, which then tries
// calls the policy denies and runs a program: the denied ones fail with
// the policy's errno, the program runs.
func TestInstall(t *testing.T) {
	if os.Getenv(envChild) != "" {
		child()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestInstall$")
	cmd.Env = append(os.Environ(), envChild+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.Contains(k, " ") {
			got[k] = v
		}
	}
	for call, want := range map[string]string{
		"ptrace": "operation not permitted", "unshare": "operation not permitted",
		"io_uring_setup": "operation not permitted", "keyctl": "operation not permitted",
		"clone3": "function not implemented", "true": "ok", "no_new_privs": "1",
	} {
		if got[call] != want {
			t.Errorf("%s: %q, want %q\n%s", call, got[call], want, out)
		}
	}
}

// child is TestInstall's child: it installs the filter and prints the
// outcome of each attempt as name=outcome.
func child() {
	if err := Install(); err != nil {
		println("install=" + err.Error())
		os.Exit(1)
	}
	outcome := func(errno unix.Errno) string {
		if errno == 0 {
			return "ok"
		}
		return errno.Error()
	}
	raw := func(nr uintptr, a ...uintptr) string {
		a = append(a, 0, 0, 0)
		_, _, errno := unix.Syscall(nr, a[0], a[1], a[2])
		return outcome(errno)
	}
	// Each so that it would succeed or fail otherwise if allowed.
	os.Stdout.WriteString("ptrace=" + raw(unix.SYS_PTRACE, unix.PTRACE_PEEKDATA, 1) + "\n")
	os.Stdout.WriteString("unshare=" + raw(unix.SYS_UNSHARE, 0x80000000) + "\n") // no such flag: EINVAL if allowed
	os.Stdout.WriteString("io_uring_setup=" + raw(unix.SYS_IO_URING_SETUP, 0, 0) + "\n")
	os.Stdout.WriteString("keyctl=" + raw(unix.SYS_KEYCTL, 0xffff) + "\n")
	os.Stdout.WriteString("clone3=" + raw(unix.SYS_CLONE3, 0, 0) + "\n")
	if err := exec.Command("true").Run(); err != nil {
		os.Stdout.WriteString("true=" + err.Error() + "\n")
	} else {
		os.Stdout.WriteString("true=ok\n")
	}
	v, _ := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	os.Stdout.WriteString("no_new_privs=" + string(rune('0'+v)) + "\n")
	os.Exit(0)
}
