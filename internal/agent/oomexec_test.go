package agent

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agent2env/agent2env/internal/testenv"
)

// qemuUser names the qemu user-mode emulator of each GOARCH.
var qemuUser = map[string]string{"amd64": "qemu-x86_64", "arm64": "qemu-aarch64"}

// The trampoline of every architecture raises its score and execs the
// command, or reports what failed on its report fd; the host's own runs
// natively, the others under qemu's user-mode emulator.
func TestOOMExecTrampoline(t *testing.T) {
	testenv.RequireRoot(t) // the missing /proc is a mount namespace's
	if own := strings.TrimSpace(readFile(t, procOOMScore)); own == strconv.Itoa(userOOMScore) {
		testenv.Skip(t, "this test runs at oom_score_adj %s already: a raise cannot be seen", own)
	}
	dir := t.TempDir()
	notExec := filepath.Join(dir, "not-executable")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for arch := range oomexecCode {
		t.Run(arch, func(t *testing.T) {
			file, ok := oomExecELF(arch)
			if !ok {
				t.Fatalf("no ELF for %s", arch)
			}
			tramp := filepath.Join(dir, "oomexec-"+arch)
			if err := os.WriteFile(tramp, file, 0o755); err != nil {
				t.Fatal(err)
			}
			// start runs the trampoline on path and argv, its report fd 3.
			start := func(path string, argv ...string) *exec.Cmd {
				args := append([]string{"3", path}, argv...)
				if arch == runtime.GOARCH {
					return &exec.Cmd{Path: tramp, Args: args}
				}
				qemu, err := exec.LookPath(qemuUser[arch])
				if err != nil {
					qemu, err = exec.LookPath(qemuUser[arch] + "-static")
				}
				if err != nil {
					testenv.Missing(t, "%s runs the %s trampoline: scripts/deps.sh --tests installs qemu-user", qemuUser[arch], arch)
				}
				return exec.Command(qemu, append([]string{"-0", "3", tramp}, args[1:]...)...)
			}
			for _, tc := range []struct {
				name      string
				cmd       *exec.Cmd
				noProc    bool   // run with an empty /proc
				wantOut   string // the command's output
				wantStage uint32 // 0: the exec succeeds
				wantErrno syscall.Errno
			}{
				{name: "runs the command", wantOut: "1000\nname bar\n",
					cmd: start("/bin/sh", "name", "-c", `cat /proc/self/oom_score_adj; echo "$0 $FOO"`)},
				{name: "no such command", cmd: start("/nonexistent/cmd", "cmd"), wantStage: oomStageExec, wantErrno: syscall.ENOENT},
				{name: "not executable", cmd: start(notExec, "x"), wantStage: oomStageExec, wantErrno: syscall.EACCES},
				{name: "a directory", cmd: start("/", "/"), wantStage: oomStageExec, wantErrno: syscall.EACCES},
				{name: "no /proc", cmd: start("/bin/true", "true"), noProc: true, wantStage: oomStageScore, wantErrno: syscall.ENOENT},
			} {
				t.Run(tc.name, func(t *testing.T) {
					cmd := tc.cmd
					if tc.noProc {
						// The trampoline (qemu too) under a mount of its
						// own, over an empty /proc.
						script := `mount -t tmpfs none /proc && exec -a "$0" "$@"`
						args := append([]string{"-m", "bash", "-c", script, cmd.Args[0], cmd.Path}, cmd.Args[1:]...)
						cmd = exec.Command("unshare", args...)
					}
					cmd.Env = []string{"FOO=bar", "PATH=/usr/bin:/bin"}
					var out bytes.Buffer
					cmd.Stdout, cmd.Stderr = &out, &out
					r, w, err := os.Pipe()
					if err != nil {
						t.Fatal(err)
					}
					defer r.Close()
					cmd.ExtraFiles = []*os.File{w}
					report, err := withoutReaping(func() ([]byte, error) {
						if err := cmd.Start(); err != nil {
							return nil, err
						}
						w.Close()
						report, err := io.ReadAll(r)
						// Not its exit status: a failed exec exits 127.
						_ = cmd.Wait()
						return report, err
					})
					if err != nil {
						t.Fatal(err)
					}
					if tc.wantStage == 0 {
						if len(report) != 0 || out.String() != tc.wantOut {
							t.Errorf("report %x, output %q; want no report and %q", report, out.String(), tc.wantOut)
						}
						return
					}
					if len(report) != 8 {
						t.Fatalf("report %x (output %q), want 8 bytes", report, out.String())
					}
					stage, errno := binary.LittleEndian.Uint32(report), syscall.Errno(binary.LittleEndian.Uint32(report[4:]))
					if stage != tc.wantStage || errno != tc.wantErrno {
						t.Errorf("report stage %d errno %v, want %d %v", stage, errno, tc.wantStage, tc.wantErrno)
					}
				})
			}
		})
	}
}

// The machine code in oomexec_code.go is what oomexec/gen.sh makes of the
// sources in oomexec/.
func TestOOMExecCode(t *testing.T) {
	for _, as := range []string{"x86_64-linux-gnu-as", "aarch64-linux-gnu-as"} {
		if _, err := exec.LookPath(as); err != nil {
			testenv.Missing(t, "%s assembles the OOM trampoline: scripts/deps.sh --tests installs binutils-x86-64-linux-gnu and binutils-aarch64-linux-gnu", as)
		}
	}
	out, err := withoutReaping(exec.Command("oomexec/gen.sh").Output)
	if err != nil {
		t.Fatalf("oomexec/gen.sh: %v", err)
	}
	if want := readFile(t, "oomexec_code.go"); string(out) != want {
		t.Errorf("oomexec_code.go is not what oomexec/gen.sh makes of oomexec/*.asm: run go generate ./internal/agent")
	}
}

// Every way a command starts gives it userOOMScore, whether it runs as
// another user or as the agent's own, and the agent never holds that
// score itself while commands start (with the trampoline; the fallback
// raises it around each fork).
func TestCommandOOMScore(t *testing.T) {
	testenv.RequireRoot(t)
	own := readFile(t, procOOMScore)
	if strings.TrimSpace(own) == strconv.Itoa(userOOMScore) {
		testenv.Skip(t, "this test runs at oom_score_adj %s already: a raise cannot be seen", own)
	}
	for _, tc := range []struct {
		name       string
		trampoline bool
		uid        int // commands' user; -1: the agent's own (the kubernetes runtime)
		// held: the fallback writes the score through a file opened
		// before, as Run gives an agent that is not root.
		held bool
	}{
		{"trampoline", true, 65534, false},
		{"fallback", false, 65534, false},
		{"fallback through the file held open", false, -1, true},
		{"as the agent's own user", true, -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ServerConfig{Cwd: "/", UID: tc.uid, GID: tc.uid, Env: []string{"PATH=/usr/bin:/bin"}}
			if tc.held {
				f, err := os.OpenFile(procOOMScore, os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				cfg.OOMScore = f
			}
			s := NewServer(cfg)
			switch {
			case !tc.trampoline:
				s.oomExec = func() *oomExec { return nil }
			case s.oomExec() == nil:
				t.Fatalf("no OOM trampoline on %s", runtime.GOARCH)
			}
			// Watch the agent's own score while commands start.
			var raised atomic.Bool
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() {
				for ctx.Err() == nil {
					if b, err := os.ReadFile(procOOMScore); err == nil && strings.TrimSpace(string(b)) == strconv.Itoa(userOOMScore) {
						raised.Store(true)
					}
				}
			})
			for range 20 {
				code, out := catOOMScore(t, s, "/")
				if code != 0 {
					t.Fatalf("exec: exit %d, output %q", code, out)
				}
				if !strings.Contains(out, strconv.Itoa(userOOMScore)) {
					t.Fatalf("the command's output %q has no oom_score_adj %d", out, userOOMScore)
				}
			}
			cancel()
			wg.Wait()
			if now := readFile(t, procOOMScore); now != own {
				t.Errorf("the agent's oom_score_adj is %s after the commands, want %s", now, own)
			}
			if tc.trampoline && raised.Load() {
				t.Errorf("the agent's own oom_score_adj was %d while commands started", userOOMScore)
			}
		})
	}
}

// The trampoline's memfd sits below 64, in the descriptor table every
// process starts with: growing the table waits for an RCU grace period,
// which each sandbox's first command paid (9 ms here) while it sat at 256.
func TestOOMExecDescriptor(t *testing.T) {
	o, err := newOOMExec()
	if err != nil {
		t.Fatal(err)
	}
	// Closed through its File: a raw close would leave the File's
	// finalizer to close the number again, whatever holds it by then (the
	// process's own trampoline, a command's report pipe).
	defer o.file.Close()
	fd, err := strconv.Atoi(strings.TrimPrefix(o.path, "/proc/self/fd/"))
	if err != nil {
		t.Fatal(err)
	}
	if fd < oomExecFD || fd >= 64 {
		t.Errorf("the trampoline is descriptor %d, want %d to 63", fd, oomExecFD)
	}
}

// A command whose files sit just below the trampoline's descriptor
// starts: Go's child moves its own pipe to just above the highest of its
// files before its exec, which was over the trampoline's descriptor (seen
// in CI: "exec the OOM trampoline: permission denied" once the agent held
// as many descriptors).
func TestOOMExecFilesBelow(t *testing.T) {
	s := NewServer(ServerConfig{Cwd: "/", UID: -1, GID: -1, Env: []string{"PATH=/usr/bin:/bin"}})
	o := s.oomExec()
	if o == nil {
		t.Fatalf("no OOM trampoline on %s", runtime.GOARCH)
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	for below := o.fd - 3; below < o.fd; below++ {
		// The command's files are descriptor below: /dev/null put there
		// when it is free, whatever holds it otherwise.
		if _, err := unix.FcntlInt(uintptr(below), unix.F_GETFD, 0); err != nil {
			fd, err := unix.FcntlInt(devnull.Fd(), unix.F_DUPFD_CLOEXEC, below)
			if err != nil {
				t.Fatal(err)
			}
			f := os.NewFile(uintptr(fd), os.DevNull)
			defer f.Close()
			if fd != below {
				t.Fatalf("/dev/null took descriptor %d, not the free %d", fd, below)
			}
		}
		files := []uintptr{uintptr(below), uintptr(below), uintptr(below)}
		_, exited, err := s.spawnUser("/bin/true", []string{"true"}, &syscall.ProcAttr{Dir: "/", Files: files, Sys: s.procAttr()})
		if err != nil {
			t.Fatalf("a command whose files are descriptor %d (the trampoline's %d): %v", below, o.fd, err)
		}
		if ws := <-exited; ws.ExitStatus() != 0 {
			t.Errorf("a command whose files are descriptor %d: exit %d", below, ws.ExitStatus())
		}
	}
	if o.off.Load() {
		t.Error("the trampoline was turned off")
	}
}

// A trampoline that cannot run is found out on the first command, which
// then starts as before; a command whose own start fails leaves a working
// trampoline on.
func TestOOMExecFallback(t *testing.T) {
	testenv.RequireRoot(t)
	for _, tc := range []struct {
		name     string
		path     string // the trampoline's; "" the real one
		cwd      string
		wantExit int
		wantOff  bool
	}{
		{name: "cannot run", path: "/nonexistent/oomexec", cwd: "/", wantExit: 0, wantOff: true},
		{name: "the command's cwd is missing", cwd: "/nonexistent", wantExit: 127, wantOff: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewServer(ServerConfig{Cwd: "/", UID: 65534, GID: 65534, Env: []string{"PATH=/usr/bin:/bin"}})
			o := s.oomExec()
			if o == nil {
				t.Fatalf("no OOM trampoline on %s", runtime.GOARCH)
			}
			if tc.path != "" {
				o = &oomExec{path: tc.path}
				s.oomExec = func() *oomExec { return o }
			}
			code, out := catOOMScore(t, s, tc.cwd)
			if code != tc.wantExit {
				t.Fatalf("exec: exit %d (%q), want exit %d", code, out, tc.wantExit)
			}
			if tc.wantExit == 0 && !strings.Contains(out, strconv.Itoa(userOOMScore)) {
				t.Errorf("the command's output %q has no oom_score_adj %d", out, userOOMScore)
			}
			if got := o.off.Load(); got != tc.wantOff {
				t.Errorf("trampoline off = %v, want %v", got, tc.wantOff)
			}
		})
	}
}

// catOOMScore starts cat /proc/self/oom_score_adj in cwd as s starts
// every command (startUser), and returns its exit code (startFailure's
// when it cannot start; no directory is checked first) and output.
func catOOMScore(t *testing.T, s *Server, cwd string) (int, string) {
	t.Helper()
	path, err := lookPath("cat", s.env)
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	attr := &syscall.ProcAttr{Dir: cwd, Env: s.env, Files: []uintptr{devnull.Fd(), w.Fd(), w.Fd()}, Sys: s.procAttr()}
	_, waitc, err := s.startUser(path, []string{"cat", "/proc/self/oom_score_adj"}, attr)
	w.Close()
	if err != nil {
		return startFailure("cat", err).ExitCode, err.Error()
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return (<-waitc).ExitStatus(), string(out)
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
