package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// drainGrace is how long output is still collected after the command has
// exited, for descendants that keep its stdout open.
const drainGrace = 100 * time.Millisecond

// maxExecHeader bounds the JSON line that opens an exec request.
const maxExecHeader = 1 << 20

// handleExec runs one command and streams its output as frames.
func (s *Server) handleExec(w http.ResponseWriter, r *http.Request) {
	body := bufio.NewReaderSize(r.Body, 64<<10)
	line, err := readLine(body, maxExecHeader)
	if err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", fmt.Errorf("read exec request: %w", err))
		return
	}
	var req ExecRequest
	if err := json.Unmarshal(line, &req); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", fmt.Errorf("decode exec request: %w", err))
		return
	}
	if err := req.Validate(); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", err)
		return
	}
	cwd := req.Cwd
	if cwd == "" {
		cwd = s.cwd
	}
	if err := s.checkDir(cwd); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_CWD", err)
		return
	}
	// Stdin is read while output is written: both directions at once.
	if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
		writeError(w, http.StatusInternalServerError, "INTERNAL", err)
		return
	}
	// With full duplex, a body left unread (stdin the command never read)
	// must be closed before the handler returns, or the server panics on
	// the connection (golang/go#68560).
	defer r.Body.Close()
	w.Header().Set("Content-Type", "application/x-agent2env-frames")
	w.WriteHeader(http.StatusOK)
	// The status goes out now, before any output: it tells the client
	// that the command was accepted, so a surface may start its stream.
	fw := &frameWriter{w: w, flush: http.NewResponseController(w).Flush}
	_ = fw.flush()
	var stdin io.Reader
	if req.Stdin {
		stdin = body
	}
	res := s.run(r.Context(), &req, cwd, stdin, fw)
	// A command that could not start, or that the kernel killed, says
	// why where its user looks first.
	if why := res.Error; why != "" || res.OOMKilled {
		if res.OOMKilled {
			why = "the command was killed by the out-of-memory killer: the sandbox reached its memory limit"
		}
		_ = fw.frame(frameStderr, []byte("agent2env: "+why+"\n"))
	}
	b, _ := json.Marshal(res)
	_ = fw.frame(frameResult, b)
}

// cwdError is a working directory that cannot be used.
type cwdError struct{ dir, why string }

func (e *cwdError) Error() string { return "working directory " + e.dir + " " + e.why }

// checkDir reports, in words naming it, why dir cannot be a working
// directory of the sandbox's commands: it must be a directory they may
// enter (a command's start changes to it as the command's user).
func (s *Server) checkDir(dir string) error {
	var fi os.FileInfo
	err := s.asUser(func() (err error) {
		if fi, err = os.Stat(dir); err == nil && fi.IsDir() {
			err = unix.Faccessat(unix.AT_FDCWD, dir, unix.X_OK, unix.AT_EACCESS)
		}
		return err
	})
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &cwdError{dir, "does not exist"}
	case errors.Is(err, fs.ErrPermission):
		return &cwdError{dir, "cannot be entered by the sandbox's user"}
	case err != nil:
		return &cwdError{dir, "cannot be used: " + err.Error()}
	case !fi.IsDir():
		return &cwdError{dir, "is not a directory"}
	}
	return nil
}

// startFailure is the result of a command that could not be started.
func startFailure(name string, err error) ExecResult {
	switch {
	case errors.Is(err, syscall.ENOENT):
		return ExecResult{ExitCode: 127, Error: fmt.Sprintf("start %s: %v", name, err)}
	case errors.Is(err, syscall.EAGAIN):
		return ExecResult{ExitCode: 126, Reason: ReasonPidsExhausted,
			Error: fmt.Sprintf("cannot start %s: the sandbox has reached its process limit (%v)", name, err)}
	}
	return ExecResult{ExitCode: 126, Error: fmt.Sprintf("start %s: %v", name, err)}
}

// run starts the command, pumps its output into fw and waits for it.
func (s *Server) run(ctx context.Context, req *ExecRequest, cwd string, stdin io.Reader, fw *frameWriter) ExecResult {
	argv := req.Command
	if req.Shell != "" {
		argv = []string{"/bin/sh", "-c", req.Shell}
	}
	env := mergeEnv(s.env, req.Env)
	path, err := lookPath(argv[0], env)
	if err != nil {
		return ExecResult{ExitCode: 127, Error: err.Error()}
	}
	if req.Main {
		return s.startMain(path, argv, env, cwd)
	}

	outR, outW, err := os.Pipe()
	if err != nil {
		return ExecResult{ExitCode: 126, Error: fmt.Sprintf("create pipe: %v", err)}
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return ExecResult{ExitCode: 126, Error: fmt.Sprintf("create pipe: %v", err)}
	}
	var inR, inW *os.File
	if stdin != nil {
		if inR, inW, err = os.Pipe(); err != nil {
			outR.Close()
			outW.Close()
			errR.Close()
			errW.Close()
			return ExecResult{ExitCode: 126, Error: fmt.Sprintf("create pipe: %v", err)}
		}
	} else if inR, err = os.Open(os.DevNull); err != nil {
		return ExecResult{ExitCode: 126, Error: fmt.Sprintf("open %s: %v", os.DevNull, err)}
	}

	attr := &syscall.ProcAttr{
		Dir:   cwd,
		Env:   env,
		Files: []uintptr{inR.Fd(), outW.Fd(), errW.Fd()},
		Sys:   s.procAttr(),
	}
	start := time.Now()
	since, oomBefore := nowTicks(), oomKills()
	r := s.activity.begin(since)
	defer s.activity.end(r)
	pid, waitc, err := s.startUser(path, argv, attr)
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		if inW != nil {
			inW.Close()
		}
		return startFailure(argv[0], err)
	}
	s.track(1)
	defer s.track(-1)

	if inW != nil {
		go func() {
			_, _ = io.Copy(inW, stdin)
			inW.Close()
		}()
	}
	var pumps sync.WaitGroup
	var read [2]atomic.Int64 // what each pump has taken from its pipe
	pumps.Add(2)
	go pumpFile(&pumps, outR, &read[0], func(p []byte) { _ = fw.frame(frameStdout, p) })
	go pumpFile(&pumps, errR, &read[1], func(p []byte) { _ = fw.frame(frameStderr, p) })

	var timeout <-chan time.Time
	if req.Timeout > 0 {
		t := time.NewTimer(req.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var res ExecResult
	var ws syscall.WaitStatus
	killed := false
	select {
	case ws = <-waitc:
	case <-timeout:
		res.TimedOut = true
		killed = true
	case <-ctx.Done():
		killed = true
	}
	// After a timeout or cancellation nothing the command started may
	// survive: not its background jobs, nor what left its group.
	if killed || ctx.Err() != nil {
		procScope{root: pid, group: pid, since: since, adopted: s.adoptedBy(r)}.kill()
	}
	if killed {
		ws = <-waitc
	}
	res.Duration = time.Since(start)
	awaitOutput(&pumps, []*os.File{outR, errR}, read[:])
	switch {
	case ws.Exited():
		res.ExitCode = ws.ExitStatus()
	case ws.Signaled():
		res.Signal = unixSignalName(ws.Signal())
		res.ExitCode = 128 + int(ws.Signal())
	}
	if !killed && oomKilled(ws, oomBefore) {
		res.OOMKilled, res.Reason = true, ReasonOutOfMemory
	}
	return res
}

// startMain starts the sandbox's main process with the agent's own stdout
// and stderr (the console log) and records how it ends.
func (s *Server) startMain(path string, argv, env []string, cwd string) ExecResult {
	// Checking the slot and taking it are one step: two starts at once
	// must not both find it free.
	s.mu.Lock()
	if s.mainStarting || s.main != nil && !s.main.Exited {
		s.mu.Unlock()
		return ExecResult{ExitCode: 126, Error: "a main process is already running"}
	}
	s.mainStarting = true
	s.mu.Unlock()
	started := false
	defer func() {
		if !started {
			s.mu.Lock()
			s.mainStarting = false
			s.mu.Unlock()
		}
	}()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return ExecResult{ExitCode: 126, Error: fmt.Sprintf("open %s: %v", os.DevNull, err)}
	}
	defer devnull.Close()
	attr := &syscall.ProcAttr{
		Dir: cwd, Env: env,
		Files: []uintptr{devnull.Fd(), os.Stdout.Fd(), os.Stderr.Fd()},
		Sys:   s.procAttr(),
	}
	pid, waitc, err := s.startUser(path, argv, attr)
	if err != nil {
		return startFailure(argv[0], err)
	}
	st := &MainStatus{Pid: pid}
	s.mu.Lock()
	s.main, s.mainStarting, started = st, false, true
	s.mu.Unlock()
	go func() {
		ws := <-waitc
		s.mu.Lock()
		defer s.mu.Unlock()
		st.Exited = true
		switch {
		case ws.Exited():
			st.ExitCode = ws.ExitStatus()
		case ws.Signaled():
			st.Signal = unixSignalName(ws.Signal())
			st.ExitCode = 128 + int(ws.Signal())
		}
	}()
	return ExecResult{Pid: pid}
}

// procAttr is how every user command is started: in its own process group,
// as the sandbox user, with no capabilities.
func (s *Server) procAttr() *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true}
	if s.uid >= 0 {
		attr.Credential = &syscall.Credential{Uid: uint32(s.uid), Gid: uint32(s.gid), Groups: []uint32{}}
	}
	return attr
}

// frameWriter serializes frames from several goroutines onto one response.
type frameWriter struct {
	mu    sync.Mutex
	w     io.Writer
	flush func() error
	err   error
}

func (f *frameWriter) frame(kind byte, p []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	if f.err = writeFrame(f.w, kind, p); f.err == nil {
		f.err = f.flush()
	}
	return f.err
}

// pumpFile hands what it reads from r to emit until EOF or an error (a
// pty's EIO once its last slave is closed), counting it in read; r is
// closed by awaitOutput. emit must not keep p; it must not block for good
// (exec's frames fail once the client is gone), so the command never
// blocks on a full pipe.
func pumpFile(wg *sync.WaitGroup, r *os.File, read *atomic.Int64, emit func(p []byte)) {
	defer wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			read.Add(int64(n))
			emit(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// awaitOutput is called once a command has exited (and been reaped: a
// pty closed before would hang up, and a SIGHUP that comes while it exits
// replaces its exit status): it waits for the pumps reading pipes (read[i]
// counting what they took from pipes[i]) to end, and closes the pipes.
// What the pipes hold now the command is gone is its output, which is
// delivered however long the pumps take (a slow client, a loaded
// machine). Past that, and past drainGrace, whatever still holds a pipe
// open is a descendant, which is not waited for: closing the pipes ends
// the pumps.
func awaitOutput(pumps *sync.WaitGroup, pipes []*os.File, read []atomic.Int64) {
	made := make([]int64, len(pipes))
	for i, f := range pipes {
		made[i] = read[i].Load() + buffered(f)
	}
	drained := make(chan struct{})
	go func() { pumps.Wait(); close(drained) }()
	defer func() {
		for _, f := range pipes {
			f.Close()
		}
		<-drained
	}()
	select {
	case <-drained:
		return
	case <-time.After(drainGrace):
	}
	tick := time.NewTicker(drainGrace / 10)
	defer tick.Stop()
	for i := 0; i < len(pipes); {
		if read[i].Load() >= made[i] {
			i++
			continue
		}
		select {
		case <-drained:
			return
		case <-tick.C:
		}
	}
}

func readLine(r *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, isPrefix, err := r.ReadLine()
		if err != nil {
			return nil, err
		}
		line = append(line, chunk...)
		if len(line) > limit {
			return nil, fmt.Errorf("request line exceeds %d bytes", limit)
		}
		if !isPrefix {
			return line, nil
		}
	}
}

// mergeEnv returns base with extra applied; later entries win.
func mergeEnv(base, extra []string) []string {
	if len(extra) == 0 {
		return base
	}
	idx := make(map[string]int, len(base)+len(extra))
	out := make([]string, 0, len(base)+len(extra))
	for _, kv := range append(append([]string(nil), base...), extra...) {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := idx[k]; ok {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	return out
}

// lookPath resolves file against PATH from env, not the agent's own.
func lookPath(file string, env []string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	path := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, file)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w", file, exec.ErrNotFound)
}

func unixSignalName(sig syscall.Signal) string {
	if name := sigNames[sig]; name != "" {
		return name
	}
	return "SIG" + strconv.Itoa(int(sig))
}

var sigNames = map[syscall.Signal]string{
	syscall.SIGKILL: "SIGKILL", syscall.SIGTERM: "SIGTERM", syscall.SIGINT: "SIGINT",
	syscall.SIGSEGV: "SIGSEGV", syscall.SIGABRT: "SIGABRT", syscall.SIGHUP: "SIGHUP",
	syscall.SIGPIPE: "SIGPIPE", syscall.SIGBUS: "SIGBUS", syscall.SIGXCPU: "SIGXCPU",
}

// buffered returns how many bytes the pipe r holds unread (FIONREAD,
// named TIOCINQ on Linux), or 0 if it cannot tell or r is closed.
func buffered(r *os.File) int64 {
	rc, err := r.SyscallConn()
	if err != nil {
		return 0
	}
	var n int
	_ = rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ) })
	return int64(n)
}
