package agent

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// procKillGrace is how long a process that DELETE signalled may take to
// end before everything it started is killed.
const procKillGrace = 2 * time.Second

// maxEndedProcs bounds the ended processes kept for their status and
// output; past it the oldest is forgotten.
const maxEndedProcs = 64

// procs is the agent's registry of detached processes.
type procs struct {
	srv *Server
	// lives counts the supervisors of running processes.
	lives sync.WaitGroup

	mu     sync.Mutex
	m      map[string]*detachedProc // by id
	seq    int
	closed bool // the agent is ending: nothing starts
}

// detachedProc is one process of the registry.
type detachedProc struct {
	id, tag string
	seq     int
	argv    []string
	tty     bool
	// flow: the output waits for the writer attachment (FlowControl).
	flow bool
	// endWithWriter: the end of a writer's attachment ends it
	// (EndWithWriter).
	endWithWriter bool
	// exec: an exec's (POST /v1/exec/attach), which its client alone
	// knows: it is not listed, its result does not repeat its command,
	// and its end (its timeout's, its client's) kills it at once, as a
	// command's always did.
	exec    bool
	pid     int
	started time.Time
	// since is when it started in process start-time ticks, and run its
	// time in the agent's activity, for procScope.
	since   uint64
	run     *run
	adopted func(proc) bool
	out     *ring
	log     *slog.Logger
	// stdin is where input goes (nil: it reads /dev/null), master its pty.
	stdin, master *os.File
	// exited is closed once its status is recorded, done once its output
	// has ended too.
	exited, done chan struct{}

	// killing is held while end kills what it started: its time in the
	// agent's activity lasts until then, or what others started would
	// look like what it left (procScope's adopted).
	killing sync.Mutex

	// inMu serializes writes to stdin.
	inMu      sync.Mutex
	stdinShut bool

	mu         sync.Mutex
	rows, cols uint16
	ended      time.Time
	exitCode   int
	signal     string
	reason     string
	killed     bool // by the agent: not the out-of-memory killer's
	timedOut   bool
	writer     *attachment
	writers    int // how many have been its writer
}

func newProcs(srv *Server) *procs {
	return &procs{srv: srv, m: make(map[string]*detachedProc)}
}

// startFailed is the error of a command that could not start: res is
// the result an exec answers for it (exit code 127 or 126, and why).
type startFailed struct {
	res   ExecResult
	class error
}

func (e *startFailed) Error() string { return e.res.Error }

func (e *startFailed) Unwrap() error { return e.class }

// start starts the process req describes, an exec's when exec is set.
// The registry's lock is held throughout, so that a tag is taken by one
// start only. A command that cannot start is a startFailed.
func (ps *procs) start(req *ProcRequest, exec bool) (*detachedProc, error) {
	s := ps.srv
	cwd := cmp.Or(req.Cwd, s.cwd)
	if err := s.checkDir(cwd); err != nil {
		return nil, errdefs.WithCode(errdefs.Invalid("%v", err), "INVALID_CWD")
	}
	env := s.env
	if req.TTY {
		env = mergeEnv(env, []string{ttyTerm})
	}
	env = mergeEnv(env, req.Env)
	argv := req.Command
	switch {
	case req.Shell != "":
		argv = []string{"/bin/sh", "-c", req.Shell}
	case len(argv) == 0:
		uid := s.uid
		if uid < 0 {
			uid = os.Getuid()
		}
		argv = []string{loginShell(uid)}
	}
	path, err := lookPath(argv[0], env)
	if err != nil {
		return nil, errdefs.WithCode(&startFailed{ExecResult{ExitCode: 127, Error: err.Error()}, errdefs.ErrInvalidArgument}, "COMMAND_NOT_FOUND")
	}

	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed {
		return nil, errdefs.Unavailable("the agent is shutting down")
	}
	if req.Tag != "" {
		if old := ps.byTag(req.Tag); old != nil {
			if !old.hasEnded() {
				return nil, errdefs.Conflict("a running process has tag %q", req.Tag)
			}
			delete(ps.m, old.id) // an ended one gives its tag up
		}
	}
	pio, err := ps.openIO(req)
	if err != nil {
		return nil, err
	}
	sys := s.procAttr()
	if req.TTY {
		// A session of its own, whose controlling terminal is the pty;
		// its leader leads its process group too.
		sys.Setpgid, sys.Setsid, sys.Setctty, sys.Ctty = false, true, true, 0
	}
	attr := &syscall.ProcAttr{Dir: cwd, Env: env, Sys: sys,
		Files: []uintptr{pio.child[0].Fd(), pio.child[1].Fd(), pio.child[2].Fd()}}
	since, oomBefore := nowTicks(), oomKills()
	r := s.activity.begin(since)
	pid, waitc, err := s.startUser(path, argv, attr)
	pio.closeChild()
	if err != nil {
		s.activity.end(r)
		pio.closeAll()
		res := startFailure(argv[0], err)
		if res.Reason == ReasonPidsExhausted {
			return nil, errdefs.WithCode(&startFailed{res, errdefs.ErrResourceExhausted}, "PIDS_EXHAUSTED")
		}
		return nil, errdefs.WithCode(&startFailed{res, errdefs.ErrInvalidArgument}, "START_FAILED")
	}
	s.track(1)
	ps.seq++
	p := &detachedProc{
		id: procIDPrefix + strconv.Itoa(ps.seq), tag: req.Tag, seq: ps.seq, argv: argv, tty: req.TTY, flow: req.FlowControl,
		endWithWriter: req.EndWithWriter, exec: exec,
		pid: pid, started: time.Now(), since: since, run: r, adopted: s.adoptedBy(r),
		out: newRing(cmp.Or(req.OutputLimit, DefaultProcOutput)), log: s.log,
		stdin: pio.stdin, master: pio.master,
		exited: make(chan struct{}), done: make(chan struct{}),
		rows: req.Rows, cols: req.Cols,
	}
	ps.m[p.id] = p
	if req.FlowControl && req.AwaitWriter {
		p.out.hold(p, 0) // until the first writer holds it instead
	}
	var pumps sync.WaitGroup
	read := make([]atomic.Int64, len(pio.outs))
	for i, f := range pio.outs {
		stream := []byte{frameStdout, frameStderr}[i]
		pumps.Add(1)
		go pumpFile(&pumps, f, &read[i], func(b []byte) { p.out.write(stream, b) })
	}
	var timeout *time.Timer
	if req.Timeout > 0 {
		timeout = time.AfterFunc(req.Timeout, p.timeOut)
	}
	ps.lives.Add(1)
	go ps.supervise(p, waitc, timeout, oomBefore, &pumps, pio.outs, read)
	s.log.Debug("process started", "id", p.id, "tag", p.tag, "pid", pid, "tty", p.tty)
	return p, nil
}

// openIO makes the standard streams of the process req describes.
func (ps *procs) openIO(req *ProcRequest) (*procIO, error) {
	if !req.TTY {
		return pipeIO(req.Stdin)
	}
	if req.Rows == 0 {
		req.Rows = DefaultRows
	}
	if req.Cols == 0 {
		req.Cols = DefaultCols
	}
	return ptyIO(req.Rows, req.Cols, ps.srv.uid, ps.srv.gid)
}

// supervise waits for p to exit, records how, waits for its output and
// closes its ends. timeout, if not nil, is stopped at the exit.
func (ps *procs) supervise(p *detachedProc, waitc <-chan syscall.WaitStatus, timeout *time.Timer, oomBefore int64, pumps *sync.WaitGroup, outs []*os.File, read []atomic.Int64) {
	defer ps.lives.Done()
	ws := <-waitc
	if timeout != nil {
		timeout.Stop()
	}
	p.mu.Lock()
	p.ended = time.Now()
	switch {
	case ws.Exited():
		p.exitCode = ws.ExitStatus()
	case ws.Signaled():
		p.signal = unixSignalName(ws.Signal())
		p.exitCode = 128 + int(ws.Signal())
	}
	if !p.killed && oomKilled(ws, oomBefore) {
		p.reason = ReasonOutOfMemory
	}
	p.mu.Unlock()
	close(p.exited)
	ps.srv.track(-1)
	awaitOutput(pumps, outs, read)
	if p.stdin != nil {
		p.stdin.Close() // ends a write in progress
	}
	p.out.close()
	p.killing.Lock()
	ps.srv.activity.end(p.run)
	p.killing.Unlock()
	close(p.done)
	ps.srv.log.Debug("process ended", "id", p.id, "pid", p.pid, "exit_code", p.exitCode, "signal", p.signal)
	ps.forgetOldest()
}

// forgetOldest forgets the ended processes beyond maxEndedProcs, oldest
// first.
func (ps *procs) forgetOldest() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var ended []*detachedProc
	for _, p := range ps.m {
		if p.hasEnded() {
			ended = append(ended, p)
		}
	}
	if len(ended) <= maxEndedProcs {
		return
	}
	slices.SortFunc(ended, func(a, b *detachedProc) int { return a.seq - b.seq })
	for _, p := range ended[:len(ended)-maxEndedProcs] {
		delete(ps.m, p.id)
	}
}

// byTag returns the process tagged tag, or nil. ps.mu is held.
func (ps *procs) byTag(tag string) *detachedProc {
	for _, p := range ps.m {
		if p.tag == tag {
			return p
		}
	}
	return nil
}

// get returns the process named by its id or tag.
func (ps *procs) get(name string) (*detachedProc, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p := ps.m[name]
	if p == nil {
		p = ps.byTag(name)
	}
	if p == nil {
		return nil, errdefs.NotFound("process %q not found", name)
	}
	return p, nil
}

// list returns every process, in the order they started.
func (ps *procs) list() []ProcInfo {
	ps.mu.Lock()
	all := make([]*detachedProc, 0, len(ps.m))
	for _, p := range ps.m {
		all = append(all, p)
	}
	ps.mu.Unlock()
	slices.SortFunc(all, func(a, b *detachedProc) int { return a.seq - b.seq })
	out := make([]ProcInfo, 0, len(all))
	for _, p := range all {
		if !p.exec {
			out = append(out, p.info())
		}
	}
	return out
}

// remove ends p, if it runs, waits for its output to end and forgets it.
func (ps *procs) remove(p *detachedProc) ProcInfo {
	p.end(p.killGrace())
	<-p.done
	ps.mu.Lock()
	delete(ps.m, p.id)
	ps.mu.Unlock()
	return p.info()
}

// shutdown ends every process, refuses new ones and returns once all
// have ended and their ends are closed.
func (ps *procs) shutdown() {
	ps.mu.Lock()
	ps.closed = true
	all := make([]*detachedProc, 0, len(ps.m))
	for _, p := range ps.m {
		all = append(all, p)
	}
	ps.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range all {
		wg.Go(func() { p.end(0) })
	}
	wg.Wait()
	ps.lives.Wait()
}

// end ends a running process: a signal to its process group (SIGHUP to a
// tty's, as a hang-up does, SIGTERM otherwise), and after grace, or at
// once when it ends sooner, SIGKILL to everything it started, however
// detached (proctree.go), found before the signal too, which may orphan
// some. A process that ended by itself keeps what it left running, as an
// exec does.
func (p *detachedProc) end(grace time.Duration) {
	if p.hasEnded() {
		return
	}
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	p.out.release(nil) // its last output waits for no one
	sc := procScope{root: p.pid, group: p.pid, since: p.since, adopted: p.adopted}
	if grace > 0 {
		sc.also = make(map[int]uint64)
		for pid, q := range sc.members(readProcs()) {
			sc.also[pid] = q.start
		}
		sig := syscall.SIGTERM
		if p.tty {
			sig = syscall.SIGHUP
		}
		_ = syscall.Kill(-p.pid, sig)
		t := time.NewTimer(grace)
		select {
		case <-p.exited:
		case <-t.C:
		}
		t.Stop()
	}
	p.killing.Lock()
	sc.kill()
	p.killing.Unlock()
	<-p.exited
}

// timeOut ends p, which its Timeout ended, unless it has exited.
func (p *detachedProc) timeOut() {
	p.mu.Lock()
	p.timedOut = p.ended.IsZero()
	p.mu.Unlock()
	p.end(p.killGrace())
}

// killGrace is the grace end gives p when DELETE, its timeout or the end
// of its writer ends it: none for an exec's.
func (p *detachedProc) killGrace() time.Duration {
	if p.exec {
		return 0
	}
	return procKillGrace
}

func (p *detachedProc) hasEnded() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// info describes p.
func (p *detachedProc) info() ProcInfo {
	start, end := p.out.held()
	p.mu.Lock()
	defer p.mu.Unlock()
	info := ProcInfo{
		ID: p.id, Tag: p.tag, Pid: p.pid, TTY: p.tty, Rows: p.rows, Cols: p.cols,
		Started: p.started, Running: p.ended.IsZero(), Ended: p.ended,
		ExitCode: p.exitCode, Signal: p.signal, Reason: p.reason, TimedOut: p.timedOut,
		OutputStart: start, Output: end, Writer: p.writer != nil,
	}
	if !p.exec {
		info.Command = p.argv
	}
	return info
}

// errEnded is the error of input, signals and resizes to a process
// that has ended.
func (p *detachedProc) errEnded() error {
	return errdefs.WithCode(errdefs.Precondition("process %s has ended", p.id), "PROC_ENDED")
}

// writeStdin copies r to p's input until r ends or ctx is done.
func (p *detachedProc) writeStdin(ctx context.Context, r io.Reader) error {
	if p.stdin == nil {
		return errdefs.WithCode(errdefs.Precondition("process %s takes no input (started without stdin)", p.id), "NO_STDIN")
	}
	p.inMu.Lock()
	defer p.inMu.Unlock()
	if p.stdinShut {
		return errdefs.WithCode(errdefs.Precondition("the input of process %s is closed", p.id), "STDIN_CLOSED")
	}
	if p.hasEnded() {
		return p.errEnded()
	}
	stop := context.AfterFunc(ctx, func() { _ = p.stdin.SetWriteDeadline(time.Unix(1, 0)) })
	_, err := io.Copy(p.stdin, r)
	if !stop() {
		_ = p.stdin.SetWriteDeadline(time.Time{})
		return ctx.Err()
	}
	var pe *os.PathError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, os.ErrClosed), errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.EIO):
		return p.errEnded()
	case errors.As(err, &pe):
		return fmt.Errorf("write to the input of process %s: %w", p.id, err)
	}
	// What failed is reading r: the client's request body.
	return errdefs.Invalid("read input for process %s: %v", p.id, err)
}

// closeStdin ends p's input: its pipe is closed; a tty, which cannot be
// half-closed, is sent its end-of-file character (^D), which ends the
// input of a program reading a line.
func (p *detachedProc) closeStdin() error {
	if p.master != nil {
		return p.writeStdin(context.Background(), bytes.NewReader([]byte{4}))
	}
	if p.stdin == nil {
		return nil
	}
	p.inMu.Lock()
	defer p.inMu.Unlock()
	if !p.stdinShut {
		p.stdinShut = true
		return p.stdin.Close()
	}
	return nil
}

// sendSignal sends sig to p's process group.
func (p *detachedProc) sendSignal(sig syscall.Signal) error {
	if p.hasEnded() {
		return p.errEnded()
	}
	if err := syscall.Kill(-p.pid, sig); err != nil {
		return fmt.Errorf("signal process %s: %w", p.id, err)
	}
	return nil
}

// resize sets the size of p's terminal, which signals SIGWINCH to its
// foreground process group.
func (p *detachedProc) resize(rows, cols uint16) error {
	if p.master == nil {
		return errdefs.Invalid("process %s has no tty to resize", p.id)
	}
	if rows == 0 || cols == 0 {
		return errdefs.Invalid("a terminal of %d x %d", rows, cols)
	}
	if p.hasEnded() {
		return p.errEnded()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := setSize(p.master, rows, cols); err != nil {
		return fmt.Errorf("resize the tty of process %s: %w", p.id, err)
	}
	p.rows, p.cols = rows, cols
	return nil
}
