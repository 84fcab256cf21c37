package agent

import (
	"bufio"
	"cmp"
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

// handleExec starts the sandbox's main process (ExecRequest.Main) and
// answers its ExecResult in a result frame. Every other command runs
// through handleExecAttach.
func (s *Server) handleExec(w http.ResponseWriter, r *http.Request) {
	req, _, ok := readExecRequest(w, r)
	if !ok {
		return
	}
	if !req.Main {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", errors.New("a command other than the main process runs through POST /v1/exec/attach"))
		return
	}
	cwd := cmp.Or(req.Cwd, s.cwd)
	if err := s.checkDir(cwd); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_CWD", err)
		return
	}
	res := s.startMain(req, cwd)
	w.Header().Set("Content-Type", "application/x-agent2env-frames")
	w.WriteHeader(http.StatusOK)
	fw := &frameWriter{w: w, flush: http.NewResponseController(w).Flush}
	if res.Error != "" {
		_ = fw.frame(frameStderr, []byte("agent2env: "+res.Error+"\n"))
	}
	b, _ := json.Marshal(res)
	_ = fw.frame(frameResult, b)
}

// handleExecAttach runs one command as a detached process of its own
// (an exec's: see detachedProc.exec) and attaches the request to it as
// its writer, with flow control: the body is the ExecRequest's JSON line,
// then the frames of an attachment's input (stdin, its end, a
// suspension); the response is a frameStarted with the process's id,
// then its output stream (streamOutput) to its ProcInfo. A command that
// cannot start answers, instead, why on stderr and its ExecResult. The
// end of the body ends the exchange: after the ProcInfo, as the client
// does once it has it; before, the command is killed, unless a
// frameSuspend came first (a checkpoint's: the client attaches again
// from where its output stopped, GET /v1/procs/{id}/attach).
func (s *Server) handleExecAttach(w http.ResponseWriter, r *http.Request) {
	// Input is read while output is written: both directions at once.
	rc, ok := fullDuplex(w)
	if !ok {
		return
	}
	answered := false
	defer func() {
		if answered {
			r.Body.Close()
		}
	}()
	req, body, ok := readExecRequest(w, r)
	if !ok {
		return
	}
	if req.Main {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", errors.New("a main process starts through POST /v1/exec"))
		return
	}
	p, err := s.procs.start(&ProcRequest{Command: req.Command, Shell: req.Shell, Env: req.Env, Cwd: req.Cwd,
		Stdin: req.Stdin, Timeout: req.Timeout, OutputLimit: execOutputRing,
		FlowControl: true, AwaitWriter: true, EndWithWriter: true}, true)
	var failed *startFailed
	if err != nil && !errors.As(err, &failed) {
		writeProcError(w, err)
		return
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	a := &attachment{cancel: cancel}
	if failed == nil {
		if err := p.claimWriter(a, false); err != nil {
			s.procs.remove(p)
			writeProcError(w, err)
			return
		}
	}
	fw := answerFrames(w, rc)
	answered = true
	if failed != nil {
		// A command that could not start says why where its user looks
		// first.
		_ = fw.frame(frameStderr, []byte("agent2env: "+failed.res.Error+"\n"))
		b, _ := json.Marshal(failed.res)
		_ = fw.frame(frameResult, b)
		return
	}
	started, _ := json.Marshal(ProcInfo{ID: p.id, Pid: p.pid, Started: p.started, Running: true})
	_ = fw.frame(frameStarted, started) // a failure ends the output too
	s.serveAttachment(ctx, p, a, true, 0, body, fw, nil)
}

// execOutputRing is the ring of an exec's process: with flow control, it
// bounds only what the agent holds for a client that reads slowly.
const execOutputRing = 256 << 10

// readExecRequest reads and checks the ExecRequest that opens the body
// of r; it answers the error and returns false when it is not one to
// run. body reads the rest.
func readExecRequest(w http.ResponseWriter, r *http.Request) (req *ExecRequest, body *bufio.Reader, ok bool) {
	body = bufio.NewReaderSize(r.Body, 64<<10)
	line, err := readLine(body, maxExecHeader)
	if err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", fmt.Errorf("read exec request: %w", err))
		return nil, nil, false
	}
	req = new(ExecRequest)
	if err := json.Unmarshal(line, req); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", fmt.Errorf("decode exec request: %w", err))
		return nil, nil, false
	}
	if err := req.Validate(); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", err)
		return nil, nil, false
	}
	return req, body, true
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

// startMain starts the sandbox's main process with the agent's own stdout
// and stderr (the console log) and records how it ends.
func (s *Server) startMain(req *ExecRequest, cwd string) ExecResult {
	argv := req.Command
	if req.Shell != "" {
		argv = []string{"/bin/sh", "-c", req.Shell}
	}
	env := mergeEnv(s.env, req.Env)
	path, err := lookPath(argv[0], env)
	if err != nil {
		return ExecResult{ExitCode: 127, Error: err.Error()}
	}
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
