package agent

//go:generate sh -c "oomexec/gen.sh > oomexec_code.go"

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agent2env/agent2env/internal/memexec"
)

// userOOMScore is the oom_score_adj of every user command: whatever the
// agent's own, the out-of-memory killer takes a command before the agent.
// The killer's score of a process is its resident pages plus adj/1000 of
// the cgroup's limit: at 1000 a command always outscores the agent, whose
// resident size (its binary's mapped pages included) is below the limit;
// at 500 the agent of a 64 MiB sandbox outscored commands of 16 MB and was
// killed (seen in CI once the binary grew).
const userOOMScore = 1000

// procOOMScore is the agent's own out-of-memory score adjustment.
const procOOMScore = "/proc/self/oom_score_adj"

// A user command has userOOMScore from its first instruction, so that
// nothing it forks, however quickly, has the agent's score; and the agent
// never holds that score itself. A child's score is its parent's at the
// fork, so the agent's fork execs the OOM trampoline first: a static
// program of a few dozen instructions (oomexec/*.asm, in memory as a
// memfd) that raises its own score and execs the command. It costs one
// exec of a page of code (≈ 40 µs here; a Go program would take a
// millisecond, most of it the runtime's start).
//
// The agent used to raise its own score around the fork instead, for the
// child to inherit; a fork that waited on reclaim in a sandbox at its
// memory limit left the agent at 1000 while the killer chose, and the
// killer took the agent (seen in CI's memory-bomb test). That remains the
// fallback where no trampoline can run: an architecture without one, a
// host that forbids executable memfds (vm.memfd_noexec=2) or an exec of it
// refused, which the agent logs once.
//
// The trampoline's protocol: argv is [report fd as one digit, path, argv0,
// argv1, ...]. It sets the report fd close-on-exec, so a successful exec
// leaves it at EOF; when setting the score or the exec fails it writes 8
// bytes, the stage and the errno as little-endian uint32s, and exits 127.
type oomExec struct {
	// file is the trampoline's sealed memfd, held open for every child
	// to see at path, /proc/self/fd/N, until its exec closes it.
	file *os.File
	fd   int // file's descriptor; forkExec keeps the child's files off it
	path string
	// off is set once the trampoline was found not to run: from then on
	// commands start through forkRaised.
	off atomic.Bool
}

// The trampoline's report stages.
const (
	oomStageScore = 1
	oomStageExec  = 2
)

// oomExecFD is the lowest descriptor the trampoline's memfd takes: above
// the child's files, 0 to at most 9 (the report fd is one digit), and
// below 64, the size of a process's first descriptor table: growing the
// table of a process with threads waits for an RCU grace period (9 ms
// here; at 256 it made every sandbox's first command that much slower).
// That nothing else a child's fork renumbers lands on it is forkExec's
// doing.
const oomExecFD = 32

// processOOMExec is the process's OOM trampoline, made on first use (a
// sandbox's first command: its start has no use for it): one memfd, held
// for the life of the process, for every Server in it (the fake runtime
// and tests run many in one process).
var processOOMExec = sync.OnceValues(newOOMExec)

// newOOMExec loads the trampoline for this architecture into a sealed
// memfd.
func newOOMExec() (*oomExec, error) {
	elfFile, ok := oomExecELF(runtime.GOARCH)
	if !ok {
		return nil, fmt.Errorf("no OOM trampoline for %s", runtime.GOARCH)
	}
	f, err := memexec.New("agent2env-oomexec", bytes.NewReader(elfFile), oomExecFD)
	if err != nil {
		return nil, fmt.Errorf("load the OOM trampoline: %w", err)
	}
	return &oomExec{file: f, fd: int(f.Fd()), path: memexec.Path(f)}, nil
}

// oomExecMachine is the ELF machine of each GOARCH oomexecCode has.
var oomExecMachine = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// oomExecELF is the trampoline of arch as a static executable: one
// segment, loaded at 4 MiB, holding the headers and then the code, its
// entry.
func oomExecELF(arch string) ([]byte, bool) {
	code, ok := oomexecCode[arch]
	machine, known := oomExecMachine[arch]
	if !ok || !known {
		return nil, false
	}
	const base = 0x400000
	const headers = 64 + 2*56 // the ELF header and two program headers
	var b bytes.Buffer
	hdr := elf.Header64{
		Type: uint16(elf.ET_EXEC), Machine: uint16(machine), Version: uint32(elf.EV_CURRENT),
		Entry: base + headers, Phoff: 64, Ehsize: 64, Phentsize: 56, Phnum: 2,
	}
	copy(hdr.Ident[:], elf.ELFMAG)
	hdr.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	hdr.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	hdr.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	size := uint64(headers + len(code))
	progs := []elf.Prog64{
		{Type: uint32(elf.PT_LOAD), Flags: uint32(elf.PF_R | elf.PF_X), Vaddr: base, Paddr: base,
			Filesz: size, Memsz: size, Align: 0x10000},
		// A stack that is not executable.
		{Type: uint32(elf.PT_GNU_STACK), Flags: uint32(elf.PF_R | elf.PF_W), Align: 16},
	}
	// Writes to a bytes.Buffer do not fail.
	_ = binary.Write(&b, binary.LittleEndian, hdr)
	_ = binary.Write(&b, binary.LittleEndian, progs)
	b.Write(code)
	return b.Bytes(), true
}

// forkExec starts path with argv through the trampoline: the command runs
// with userOOMScore, and an error is the one the command's own exec (or
// the score's write) met. The exec is done when it returns.
func (o *oomExec) forkExec(path string, argv []string, attr *syscall.ProcAttr) (int, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return 0, fmt.Errorf("create the OOM trampoline's pipe: %w", err)
	}
	defer r.Close()
	// Before its exec, Go's child moves its own pipe, and each of its
	// files below its place, to just above the highest of its files, over
	// whatever is there (syscall's forkAndExecInChild1): over the
	// trampoline's memfd when the highest was just below it, and the exec
	// found a pipe (EACCES). The report end, one of the child's files, is
	// moved above the memfd, and with it all that.
	high, err := unix.FcntlInt(w.Fd(), unix.F_DUPFD_CLOEXEC, o.fd+1)
	w.Close()
	if err != nil {
		return 0, fmt.Errorf("move the OOM trampoline's pipe: %w", err)
	}
	w = os.NewFile(uintptr(high), "|1")
	a := *attr
	a.Files = append(attr.Files[:len(attr.Files):len(attr.Files)], w.Fd())
	report := len(a.Files) - 1
	if report > 9 {
		w.Close()
		return 0, fmt.Errorf("the OOM trampoline's report fd %d is not one digit", report)
	}
	pid, err := syscall.ForkExec(o.path, append([]string{strconv.Itoa(report), path}, argv...), &a)
	w.Close()
	if err != nil {
		return 0, &oomExecError{err}
	}
	var rep [8]byte
	switch n, err := io.ReadFull(r, rep[:]); {
	case n == 0:
		return pid, nil // closed by the command's exec
	case err != nil:
		// Killed before its exec (the pid is the command's, which the
		// reaper reports) or after part of a report: none of this is the
		// command's doing, and a command killed there never ran.
		return 0, fmt.Errorf("the OOM trampoline ended after %d bytes of its report", n)
	}
	// The trampoline exits 127; the reaper collects it, as it collects
	// every child it does not wait for.
	errno := syscall.Errno(binary.LittleEndian.Uint32(rep[4:]))
	if binary.LittleEndian.Uint32(rep[:4]) == oomStageScore {
		return 0, fmt.Errorf("set the command's oom_score_adj: %w", errno)
	}
	return 0, errno
}

// oomExecError is a failed exec of the trampoline itself, not of the
// command.
type oomExecError struct{ err error }

func (e *oomExecError) Error() string { return "exec the OOM trampoline: " + e.err.Error() }
func (e *oomExecError) Unwrap() error { return e.err }

// trampolineFailed reports whether err says the trampoline's own exec
// failed; not a fork refused for want of pids or memory, which says
// nothing of the trampoline.
func trampolineFailed(err error) bool {
	var te *oomExecError
	return errors.As(err, &te) && !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.ENOMEM)
}

// startUser starts a user command (a command, a kernel, the main process)
// once the agent holds its spare threads (a fork bomb must not take the
// threads the agent keeps), as spawnUser does.
func (s *Server) startUser(path string, argv []string, attr *syscall.ProcAttr) (int, <-chan syscall.WaitStatus, error) {
	s.waitSpareThreads()
	return s.spawnUser(path, argv, attr)
}

// waitSpareThreads returns once the agent holds its spare threads.
func (s *Server) waitSpareThreads() {
	if s.spare != nil {
		<-s.spare
	}
}

// spawnUser starts a process as the user commands run as, through the
// reaper, with userOOMScore from its first instruction (see oomExec),
// whether the agent runs commands as another user (the oci runtime) or as
// its own (the kubernetes runtime, where the kubelet gives the agent's
// container its score and commands must still be the killer's first
// choice). Whatever runs user code must not start before the agent holds
// its spare threads: startUser.
func (s *Server) spawnUser(path string, argv []string, attr *syscall.ProcAttr) (int, <-chan syscall.WaitStatus, error) {
	return s.reaper.start(func() (int, error) {
		o := s.oomExec()
		if o == nil || o.off.Load() {
			return s.forkRaised(path, argv, attr)
		}
		pid, err := o.forkExec(path, argv, attr)
		if !trampolineFailed(err) {
			return pid, err // started, failed for the command's reasons, or no fork
		}
		// A child's steps before its exec (its directory, its user) fail
		// as an exec can: whether the trampoline runs at all is told by
		// one that must run it and fail on the command's exec.
		if _, perr := o.forkExec("/", []string{"/"}, &syscall.ProcAttr{Dir: "/", Sys: s.procAttr()}); !trampolineFailed(perr) {
			return 0, err
		}
		o.off.Store(true)
		s.log.Error("the OOM trampoline cannot run: commands now start with the agent's own score raised around their fork", "err", err)
		return s.forkRaised(path, argv, attr)
	})
}

// forkRaised starts a command without the trampoline: the agent raises its
// own score for the fork, which the child inherits, and lowers it after.
// Lowering back needs no privilege, as the kernel lets a process return to
// the lowest score a privileged writer gave it; forks are one at a time
// under the reaper's lock. An agent whose score is already at least
// userOOMScore (a best-effort Pod) leaves it: its commands inherit it.
func (s *Server) forkRaised(path string, argv []string, attr *syscall.ProcAttr) (int, error) {
	own, raised := s.raiseOOMScore()
	pid, err := syscall.ForkExec(path, argv, attr)
	if raised {
		if err := s.writeOOMScore(own); err != nil {
			// The command runs; the agent is now as likely a victim as
			// a command, which its operator must hear of.
			s.log.Error("restore the agent's own oom_score_adj", "err", err)
		}
	}
	return pid, err
}

// raiseOOMScore sets the agent's score to userOOMScore when it is lower and
// returns the score to restore.
func (s *Server) raiseOOMScore() (own []byte, raised bool) {
	own, err := os.ReadFile(procOOMScore)
	if err != nil {
		s.log.Warn("read the agent's oom_score_adj", "err", err)
		return nil, false
	}
	own = bytes.TrimSpace(own)
	if n, err := strconv.Atoi(string(own)); err != nil || n >= userOOMScore {
		return nil, false
	}
	if err := s.writeOOMScore([]byte(strconv.Itoa(userOOMScore))); err != nil {
		s.log.Warn("raise the oom_score_adj for a command", "err", err)
		return nil, false
	}
	return own, true
}

// writeOOMScore sets the agent's own score, through ServerConfig.OOMScore
// when it was given.
func (s *Server) writeOOMScore(score []byte) error {
	if s.oomScore != nil {
		_, err := s.oomScore.WriteAt(score, 0)
		return err
	}
	return os.WriteFile(procOOMScore, score, 0)
}
