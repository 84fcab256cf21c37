package agent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

//go:generate go test . -run TestPythonDriverCode -update

// A kernel process is driven through two extra pipes: it reads requests on
// fd 3 and writes control messages on fd 4; fds 1 and 2 carry the user's
// output as it is produced. A request is a header line "<marker> <n> <k>
// <m>", n bytes of code, then m bytes of k "NAME=value\x00" entries the
// driver sets in its environment for the run (see send). The driver
// answers with "display" messages
// (rich outputs) while the code runs and, when it ends, writes the marker
// to fd 1 and fd 2 and a "done" message on fd 4. The markers tell the agent
// where this execution's output ends in each stream, whatever wrote to it
// (print, a subprocess, C code). The drivers are in kernels/.

var (
	//go:embed kernels/python.py
	pythonDriver string
	// pythonDriverCode is python.py compiled by CPython 3.11, the Python
	// of the built-in images: its bytecode's magic number (4 bytes), then
	// the module's code object in marshal format. TestPythonDriverCode
	// checks it against the source (with -update, writes it).
	//go:embed kernels/python.marshal
	pythonDriverCode []byte
	//go:embed kernels/node.js
	nodeDriver string
	//go:embed kernels/bash.sh
	bashDriver string
)

// pythonBootstrap, the Python kernel's command line, reads its stdin to
// the end and runs the loader at its head (pythonLoader, up to a NUL byte),
// which finds the rest in d. Its comment tells the kernel in ps.
const pythonBootstrap = "import os;l,_,d=b''.join(iter(lambda:os.read(0,65536),b'')).partition(b'\\0');exec(l)#<agent2env kernel>"

// pythonLoader runs the driver: compiled ahead (pythonDriverCode) when the
// interpreter's bytecode has its magic number, else from its source (the
// compile takes 3 ms of a kernel's 11 ms start in a sandbox; loading the
// compiled code 0.1 ms). It keeps no copy of either.
const pythonLoader = `import marshal, sys
def load(data):
    header, _, data = data.partition(b"\n")
    magic, size = header.split()
    external = sys.modules.get("_frozen_importlib_external")
    if magic == getattr(external, "MAGIC_NUMBER", b"").hex().encode():
        return marshal.loads(data[: int(size)])
    return compile(data[int(size) :], "<agent2env kernel>", "exec")
code = load(d)
del l, _, d, load
exec(code)
`

// pythonDriverInput is the Python kernel's stdin.
var pythonDriverInput = driverInput(hex.EncodeToString(pythonDriverCode[:4]), pythonDriverCode[4:], pythonDriver)

// driverInput is pythonLoader, a NUL byte, a line "<magic> <size>", code
// (size bytes, the driver compiled by an interpreter whose bytecode has
// the magic number, in hex) and the driver's source.
func driverInput(magic string, code []byte, source string) string {
	return fmt.Sprintf("%s\x00%s %d\n%s%s", pythonLoader, magic, len(code), code, source)
}

// kernelProgram is how a language's driver is started.
type kernelProgram struct {
	interpreter string
	argv        func(path string) []string
	// stdin, when set, is the driver's source, written to the process's
	// stdin, which then ends; the driver gives user code /dev/null as
	// stdin in its place. Otherwise stdin is /dev/null from the start.
	stdin string
	// started says the driver tells when a run's code takes SIGINT
	// ("started"), which run holds an interrupt back until. Not node's:
	// it runs synchronous code with breakOnSigint, whose handler swap
	// around the script a SIGINT sent on "started" would meet (the
	// process dies of it), so its interrupts go as soon as they are due.
	started bool
}

var kernelPrograms = map[string]*kernelProgram{
	// Python reads its driver from stdin, through a bootstrap on its
	// command line, rather than the whole driver with -c: it holds no copies
	// of its 18 KB source (sys.orig_argv, and the configuration's at four
	// bytes a character) for the life of the kernel. Not "python3 -", which
	// reads stdin a byte at a time (18,000 system calls, 5 ms in a sandbox),
	// nor "python3 /proc/self/fd/0", which the kernel's user may not open
	// (the pipe is the agent's).
	LangPython: {interpreter: "python3", argv: func(p string) []string { return []string{p, "-c", pythonBootstrap} }, stdin: pythonDriverInput, started: true},
	LangJavaScript: {interpreter: "node", argv: func(p string) []string {
		return []string{p, "--stack-size=4000", "-e", nodeDriver}
	}},
	LangBash: {interpreter: "bash", argv: func(p string) []string { return []string{p, "--noprofile", "--norc", "-c", bashDriver} },
		started: true},
}

// kernelEnv comes before the sandbox's own environment, which may override
// it.
var kernelEnv = []string{"PYTHONUNBUFFERED=1", "MPLBACKEND=Agg", "PYTHONDONTWRITEBYTECODE=1"}

// Kernel timings.
const (
	// kernelReadyTimeout bounds a driver's start.
	kernelReadyTimeout = 30 * time.Second
	// interruptGrace is how long an interrupted execution may take to end
	// before the kernel is killed and restarted.
	interruptGrace = 2 * time.Second
	// markerGrace is how long output is awaited after "done", for the
	// markers to come through the output pipes.
	markerGrace = time.Second
	// maxControlLine bounds one control message (a display of a large
	// figure is the largest).
	maxControlLine = maxFrame
)

// ErrKernelNotFound, ErrKernelExists and ErrNoInterpreter are the kernel
// registry's errors.
var (
	ErrKernelNotFound = errors.New("kernel not found")
	ErrKernelExists   = errors.New("kernel already exists")
	ErrNoInterpreter  = errors.New("interpreter not installed")
	// ErrPidsExhausted is a kernel that cannot start because the sandbox
	// has reached its process limit.
	ErrPidsExhausted = errors.New("the sandbox has reached its process limit")
)

// errAgentStopping is a kernel asked for while the agent stops.
var errAgentStopping = errors.New("the agent is stopping")

// kernels is the agent's registry of kernels.
type kernels struct {
	srv *Server
	mu  sync.Mutex
	m   map[string]*kernel
	// spare is a kernel started before it was asked for (startSpare);
	// the first create takes it. Nil: none.
	spare *spareKernel
	// stopped: shutdown ran; no kernel starts any more.
	stopped bool
}

// spareKernel is a driver started ahead of demand; done closes once its
// start ended, with p or err set.
type spareKernel struct {
	lang string
	done chan struct{}
	p    *kernelProc
	err  error
}

// kernel is one context's interpreter. Its process may be replaced
// (restart); executions are serialized by sem.
type kernel struct {
	spec      KernelSpec
	startedAt time.Time
	sem       chan struct{}

	mu     sync.Mutex
	proc   *kernelProc
	count  int
	busy   bool
	closed bool // removed: never restarted again
	// runs are the executions started by attachment, by id, until their
	// result is delivered or no client is left to take it.
	runs map[string]*kernelRun
}

// control is a message from a driver.
type control struct {
	Type   string         `json:"type"`
	Data   map[string]any `json:"data,omitempty"`
	Result map[string]any `json:"result,omitempty"`
	Error  *KernelError   `json:"error,omitempty"`
}

// kernelProc is one running driver process.
type kernelProc struct {
	pid    int
	req    *os.File
	ctl    chan control // closed when the driver closes fd 4
	exited chan struct{}
	status syscall.WaitStatus
	killed bool // by the agent
	// oomAtStart is the sandbox's count of out-of-memory kills when the
	// driver started: a SIGKILL with a higher count since is taken as OOM.
	oomAtStart int64
	// since is when the driver started, in process start-time ticks.
	since uint64

	mu  sync.Mutex
	cur *execution // the execution the output belongs to; nil between executions
}

// execution is the state of one run shared with the output pumps.
type execution struct {
	marker []byte
	fw     frameSink // nil: output is kept in startup
	limit  int64

	mu      sync.Mutex
	written int64
	dropped int64
	startup []byte           // stderr tail while a driver starts
	seen    [2]chan struct{} // closed when the marker was seen on stdout, stderr
}

// frameSink takes an execution's frames: a response's frameWriter, or a
// kernelRun that holds them for its attachments.
type frameSink interface {
	frame(kind byte, p []byte) error
}

func newExecution(fw frameSink, limit int64) *execution {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return &execution{
		marker: []byte("\x1ea2e-" + hex.EncodeToString(b[:]) + "\x1e"),
		fw:     fw, limit: limit,
		seen: [2]chan struct{}{make(chan struct{}), make(chan struct{})},
	}
}

// emit delivers output of one stream, within the limit.
func (e *execution) emit(kind byte, p []byte) {
	if len(p) == 0 {
		return
	}
	e.mu.Lock()
	if e.fw == nil {
		e.startup = append(e.startup, p...)
		if len(e.startup) > 4096 {
			e.startup = e.startup[len(e.startup)-4096:]
		}
		e.mu.Unlock()
		return
	}
	if e.limit > 0 {
		room := e.limit - e.written
		if room < int64(len(p)) {
			e.dropped += int64(len(p)) - max(room, 0)
			p = p[:max(room, 0)]
		}
	}
	e.written += int64(len(p))
	e.mu.Unlock()
	if len(p) > 0 {
		_ = e.fw.frame(kind, p)
	}
}

func (e *execution) markSeen(stream int) {
	select {
	case <-e.seen[stream]:
	default:
		close(e.seen[stream])
	}
}

func newKernels(srv *Server) *kernels {
	return &kernels{srv: srv, m: make(map[string]*kernel)}
}

// create starts a kernel and registers it once its driver is ready.
func (ks *kernels) create(ctx context.Context, spec KernelSpec) (KernelInfo, error) {
	if err := spec.Validate(); err != nil {
		return KernelInfo{}, err
	}
	ks.mu.Lock()
	if ks.stopped {
		ks.mu.Unlock()
		return KernelInfo{}, fmt.Errorf("kernel %s: %w", spec.ID, errAgentStopping)
	}
	if _, ok := ks.m[spec.ID]; ok {
		ks.mu.Unlock()
		return KernelInfo{}, fmt.Errorf("kernel %s: %w", spec.ID, ErrKernelExists)
	}
	k := &kernel{spec: spec, startedAt: time.Now(), sem: make(chan struct{}, 1)}
	ks.m[spec.ID] = k // reserved while it starts
	ks.mu.Unlock()
	p := ks.takeSpare(ctx, &k.spec)
	var err error
	if p == nil {
		p, err = ks.start(ctx, &k.spec)
	}
	if err != nil {
		ks.mu.Lock()
		delete(ks.m, spec.ID)
		ks.mu.Unlock()
		return KernelInfo{}, err
	}
	k.mu.Lock()
	closed := k.closed
	if !closed {
		k.proc = p
	}
	k.mu.Unlock()
	if closed { // the agent stopped while it started
		p.kill()
		return KernelInfo{}, fmt.Errorf("kernel %s: %w", spec.ID, errAgentStopping)
	}
	return k.info(), nil
}

// shutdown ends every kernel and the spare, and waits for their drivers
// to exit, for an agent that stops serving (the fake runtime and the tests
// run many agents in one process; in a sandbox the agent's exit ends them
// anyway). A kernel still starting is ended once started.
func (ks *kernels) shutdown() {
	ks.mu.Lock()
	ks.stopped = true
	sp := ks.spare
	ks.spare = nil
	all := slices.Collect(maps.Values(ks.m))
	ks.mu.Unlock()
	var procs []*kernelProc
	if sp != nil {
		<-sp.done
		procs = append(procs, sp.p)
	}
	for _, k := range all {
		k.mu.Lock()
		k.closed = true
		procs = append(procs, k.proc)
		k.mu.Unlock()
	}
	for _, p := range procs {
		if p != nil {
			p.kill()
			<-p.exited
		}
	}
}

// startSpare launches a kernel of lang at once, with the default
// environment and working directory, and waits for it in the background,
// for the first create to adopt: the interpreter's start then overlaps
// the rest of the agent's start and whatever comes before that request.
func (ks *kernels) startSpare(lang string) {
	if kernelPrograms[lang] == nil {
		ks.srv.log.Warn("no spare kernel: unknown language", "language", lang)
		return
	}
	sp := &spareKernel{lang: lang, done: make(chan struct{})}
	ks.mu.Lock()
	ks.spare = sp
	ks.mu.Unlock()
	// Not after the spare threads: the driver runs no user code until a
	// create adopts it, and takeSpare waits for them.
	p, err := ks.launch(&KernelSpec{ID: "spare", Language: lang}, ks.srv.spawnUser)
	go func() {
		defer close(sp.done)
		if err == nil {
			err = p.ready(context.Background(), lang)
		}
		if err != nil {
			ks.srv.log.Warn("spare kernel did not start", "language", lang, "err", err)
			sp.err = err
			return
		}
		sp.p = p
	}()
}

// takeSpare takes the spare kernel, if any, for spec, waiting for its start
// to end. It returns the spare's process when it fits spec (its language,
// no environment of its own, the default directory) and is alive; nil
// otherwise, having ended a spare that does not fit: only the first
// create may adopt it.
func (ks *kernels) takeSpare(ctx context.Context, spec *KernelSpec) *kernelProc {
	ks.mu.Lock()
	sp := ks.spare
	ks.spare = nil
	ks.mu.Unlock()
	if sp == nil {
		return nil
	}
	discard := func() {
		go func() {
			<-sp.done
			if sp.p != nil {
				sp.p.kill()
			}
		}()
	}
	if sp.lang != spec.Language || len(spec.Env) > 0 || (spec.Cwd != "" && spec.Cwd != ks.srv.cwd) {
		discard()
		return nil
	}
	select {
	case <-sp.done:
	case <-ctx.Done():
		discard()
		return nil
	}
	if sp.err != nil {
		return nil
	}
	ks.srv.waitSpareThreads()
	select {
	case <-sp.p.exited:
		return nil
	default:
		return sp.p
	}
}

func (ks *kernels) get(id string) (*kernel, error) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	k, ok := ks.m[id]
	if !ok || k.current() == nil {
		return nil, fmt.Errorf("kernel %s: %w", id, ErrKernelNotFound)
	}
	return k, nil
}

func (ks *kernels) list() []KernelInfo {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	out := make([]KernelInfo, 0, len(ks.m))
	for _, k := range ks.m {
		if k.current() != nil {
			out = append(out, k.info())
		}
	}
	return out
}

// remove kills a kernel and forgets it. A running execution ends with the
// kernel's death.
func (ks *kernels) remove(id string) error {
	ks.mu.Lock()
	k, ok := ks.m[id]
	if ok && k.current() != nil {
		delete(ks.m, id)
	}
	ks.mu.Unlock()
	if !ok || k.current() == nil {
		return fmt.Errorf("kernel %s: %w", id, ErrKernelNotFound)
	}
	k.mu.Lock()
	k.closed = true
	k.mu.Unlock()
	k.current().kill()
	return nil
}

func (k *kernel) current() *kernelProc {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.proc
}

func (k *kernel) info() KernelInfo {
	k.mu.Lock()
	defer k.mu.Unlock()
	info := KernelInfo{ID: k.spec.ID, Language: k.spec.Language, StartedAt: k.startedAt,
		ExecutionCount: k.count, Busy: k.busy}
	if k.proc != nil {
		info.Pid = k.proc.pid
	}
	return info
}

// start runs a driver and waits until it is ready.
func (ks *kernels) start(ctx context.Context, spec *KernelSpec) (*kernelProc, error) {
	p, err := ks.launch(spec, ks.srv.startUser)
	if err != nil {
		return nil, err
	}
	if err := p.ready(ctx, spec.Language); err != nil {
		return nil, err
	}
	return p, nil
}

// spawnFunc starts a process: Server.startUser, or Server.spawnUser for
// a driver that runs no user code yet.
type spawnFunc func(path string, argv []string, attr *syscall.ProcAttr) (int, <-chan syscall.WaitStatus, error)

// launch starts a driver's process, which ready then waits for.
func (ks *kernels) launch(spec *KernelSpec, spawn spawnFunc) (*kernelProc, error) {
	prog := kernelPrograms[spec.Language]
	env := mergeEnv(mergeEnv(kernelEnv, ks.srv.env), spec.Env)
	path, err := lookPath(prog.interpreter, env)
	if err != nil {
		return nil, fmt.Errorf("%s kernel needs %s: %w", spec.Language, prog.interpreter, ErrNoInterpreter)
	}
	cwd := spec.Cwd
	if cwd == "" {
		cwd = ks.srv.cwd
	}
	if err := ks.srv.checkDir(cwd); err != nil {
		return nil, err
	}
	var pipes [10]*os.File // stdout r/w, stderr r/w, req r/w, ctl r/w, stdin r/w
	closeAll := func() {
		for _, f := range pipes {
			if f != nil {
				f.Close()
			}
		}
	}
	n := len(pipes)
	if prog.stdin == "" {
		n -= 2
	}
	for i := 0; i < n; i += 2 {
		if pipes[i], pipes[i+1], err = os.Pipe(); err != nil {
			closeAll()
			return nil, fmt.Errorf("create kernel pipe: %w", err)
		}
	}
	stdin := pipes[8]
	if stdin == nil {
		devnull, err := os.Open(os.DevNull)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("open %s: %w", os.DevNull, err)
		}
		defer devnull.Close()
		stdin = devnull
	}
	attr := &syscall.ProcAttr{
		Dir: cwd, Env: env,
		Files: []uintptr{stdin.Fd(), pipes[1].Fd(), pipes[3].Fd(), pipes[4].Fd(), pipes[7].Fd()},
		Sys:   ks.srv.procAttr(),
	}
	since, oomBefore := nowTicks(), oomKills()
	pid, waitc, err := spawn(path, prog.argv(path), attr)
	for _, i := range []int{1, 3, 4, 7, 8} { // the child's ends
		if pipes[i] != nil {
			pipes[i].Close()
			pipes[i] = nil
		}
	}
	if err != nil {
		closeAll()
		if errors.Is(err, syscall.EAGAIN) {
			err = fmt.Errorf("%w (%w)", ErrPidsExhausted, err)
		}
		return nil, fmt.Errorf("start %s kernel: %w", spec.Language, err)
	}
	if w := pipes[9]; w != nil {
		pipes[9] = nil
		// Apart: a pipe may hold less than the driver (a user over
		// fs.pipe-user-pages-soft gets one page), and the driver reads
		// it only once its interpreter is up. A driver that exits first
		// ends the write (EPIPE), which the exit below reports.
		go func() {
			_, _ = w.WriteString(prog.stdin)
			w.Close()
		}()
	}
	p := &kernelProc{pid: pid, req: pipes[5], ctl: make(chan control, 16), exited: make(chan struct{}),
		oomAtStart: oomBefore, since: since}
	go func() {
		p.status = <-waitc
		close(p.exited)
	}()
	// What the driver writes before it is ready is its start-up's
	// output, which ready reports if it fails.
	p.setCurrent(newExecution(nil, 0))
	go p.pump(pipes[0], frameStdout, 0)
	go p.pump(pipes[2], frameStderr, 1)
	go p.readControl(pipes[6])
	return p, nil
}

// ready waits until the driver that launch started says it is ready;
// otherwise it ends the process.
func (p *kernelProc) ready(ctx context.Context, lang string) error {
	boot := p.current()
	defer p.setCurrent(nil)
	timer := time.NewTimer(kernelReadyTimeout)
	defer timer.Stop()
	select {
	case msg, ok := <-p.ctl:
		if ok && msg.Type == "ready" {
			return nil
		}
		p.kill()
		<-p.exited
		return fmt.Errorf("%s kernel did not start: %s", lang, boot.tail())
	case <-p.exited:
		return fmt.Errorf("%s kernel exited at start (%s): %s", lang, describeExit(p.status), boot.tail())
	case <-timer.C:
		p.kill()
		return fmt.Errorf("%s kernel not ready after %v", lang, kernelReadyTimeout)
	case <-ctx.Done():
		p.kill()
		return ctx.Err()
	}
}

func (e *execution) tail() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := strings.TrimSpace(string(e.startup))
	if s == "" {
		return "no output"
	}
	return s
}

func (p *kernelProc) setCurrent(e *execution) {
	p.mu.Lock()
	p.cur = e
	p.mu.Unlock()
}

func (p *kernelProc) current() *execution {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur
}

// kill ends the driver and everything it started.
func (p *kernelProc) kill() {
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	procScope{root: p.pid, group: p.pid, since: p.since}.kill()
	_ = p.req.Close()
}

func (p *kernelProc) interrupt() { _ = syscall.Kill(-p.pid, syscall.SIGINT) }

// pump reads one output stream for the life of the driver, handing each
// chunk to the current execution up to its marker. Output between
// executions (a background thread's) is dropped.
func (p *kernelProc) pump(r *os.File, kind byte, stream int) {
	defer r.Close()
	buf := make([]byte, 32<<10)
	var pending []byte // a tail that may be the start of the marker
	var owner *execution
	for {
		n, err := r.Read(buf)
		if n > 0 {
			e := p.current()
			if e != owner {
				pending, owner = nil, e
			}
			if e != nil {
				data := append(pending, buf[:n]...)
				pending = nil
				if i := bytes.Index(data, e.marker); i >= 0 {
					e.emit(kind, data[:i])
					e.markSeen(stream)
					owner = nil // the rest belongs to no execution
				} else {
					keep := partialSuffix(data, e.marker)
					e.emit(kind, data[:len(data)-keep])
					pending = append(pending[:0:0], data[len(data)-keep:]...)
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// partialSuffix returns the length of the longest suffix of data that is a
// proper prefix of marker.
func partialSuffix(data, marker []byte) int {
	for k := min(len(marker)-1, len(data)); k > 0; k-- {
		if bytes.HasSuffix(data, marker[:k]) {
			return k
		}
	}
	return 0
}

// readControl parses the driver's control messages until it closes fd 4.
func (p *kernelProc) readControl(f *os.File) {
	defer close(p.ctl)
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := readLongLine(r, maxControlLine)
		switch {
		case errors.Is(err, errLineTooLong):
			p.ctl <- control{Type: "display", Data: map[string]any{"text/plain": "[output too large to display]"}}
			continue
		case err != nil:
			return
		}
		var msg control
		if json.Unmarshal(line, &msg) == nil {
			p.ctl <- msg
		}
	}
}

var errLineTooLong = errors.New("control line too long")

// readLongLine reads a line of at most limit bytes; a longer one is read to
// its end and answered with errLineTooLong.
func readLongLine(r *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	tooLong := false
	for {
		chunk, isPrefix, err := r.ReadLine()
		if err != nil {
			return nil, err
		}
		if !tooLong {
			line = append(line, chunk...)
			if len(line) > limit {
				line, tooLong = nil, true
			}
		}
		if !isPrefix {
			if tooLong {
				return nil, errLineTooLong
			}
			return line, nil
		}
	}
}

// execute runs one request, streaming its output into fw, and returns how
// it ended. Executions of one kernel run one at a time.
func (ks *kernels) execute(ctx context.Context, k *kernel, req KernelExecRequest, fw frameSink) (KernelResult, error) {
	select {
	case k.sem <- struct{}{}:
	case <-ctx.Done():
		return KernelResult{}, ctx.Err()
	}
	defer func() { <-k.sem }()
	k.mu.Lock()
	k.busy = true
	p := k.proc
	k.mu.Unlock()
	defer func() {
		k.mu.Lock()
		k.busy = false
		k.mu.Unlock()
	}()
	if p == nil {
		return KernelResult{}, fmt.Errorf("kernel %s: %w", k.spec.ID, ErrKernelNotFound)
	}
	lost := false
	for attempt := 0; ; attempt++ {
		select {
		case <-p.exited: // died while idle: start afresh, state is gone
			np, err := ks.restart(ctx, k, p)
			if err != nil {
				return KernelResult{}, err
			}
			p, lost = np, true
		default:
		}
		res, undelivered := ks.run(ctx, k, p, req, fw)
		if undelivered {
			// It died before the code reached it (killed while idle, not
			// yet reaped): run the code in the new one, once.
			if p, lost = k.current(), true; attempt == 0 {
				continue
			}
			res.Error = &KernelError{Name: "KernelDied", Kind: KindSystem,
				Value: fmt.Sprintf("the %s kernel died before it could run the code, twice", k.spec.Language)}
		}
		res.StateLost = res.StateLost || lost
		k.mu.Lock()
		k.count++
		res.ExecutionCount = k.count
		k.mu.Unlock()
		return res, nil
	}
}

// run executes req in the driver p. It reports undelivered, with nothing
// run, when p was dead before it could take the request.
func (ks *kernels) run(ctx context.Context, k *kernel, p *kernelProc, req KernelExecRequest, fw frameSink) (res KernelResult, undelivered bool) {
	start := time.Now()
	// What this execution starts is told from what earlier ones left
	// running (a server, deliberately) by start time and parentage.
	since := nowTicks()
	r := ks.srv.activity.begin(since)
	defer ks.srv.activity.end(r)
	scope := procScope{root: p.pid, spareRoot: true, group: p.pid, since: since, spared: children(p.pid),
		adopted: ks.srv.adoptedBy(r)}
	e := newExecution(fw, req.OutputLimit)
	p.setCurrent(e)
	defer p.setCurrent(nil)
	sent := make(chan error, 1)
	go func() { sent <- p.send(e.marker, req.Code, req.Env) }()

	var timeout <-chan time.Time
	if req.Timeout > 0 {
		t := time.NewTimer(req.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	// A driver that says when the run started takes a SIGINT as this
	// run's from then on. One sent before (the code still in the pipe, the
	// driver parsing it) would be ignored or taken as a stale one of an
	// earlier run, so it is held back until then; the grace runs from when
	// it was due, and again from when it is sent.
	var grace <-chan time.Time
	started, held := !kernelPrograms[k.spec.Language].started, false
	ctxDone := ctx.Done()
	interrupt := func() {
		if grace == nil {
			if started {
				p.interrupt()
			} else {
				held = true
			}
			grace = time.After(interruptGrace)
		}
	}
	done, died := false, false
	for !done && !died {
		select {
		case msg, ok := <-p.ctl:
			switch {
			case !ok:
				<-p.exited
				died = true
			case msg.Type == "started":
				started = true
				if held {
					held = false
					p.interrupt()
					grace = time.After(interruptGrace)
				}
			case msg.Type == "display":
				if b, err := json.Marshal(msg.Data); err == nil {
					_ = fw.frame(frameDisplay, b)
				}
			case msg.Type == "done":
				res.Result, res.Error, done = msg.Result, msg.Error, true
			}
		case <-p.exited:
			died = true
		case <-timeout:
			res.TimedOut = true
			timeout = nil
			interrupt()
		case <-ctxDone: // the client is gone: stop the code, keep the kernel
			ctxDone = nil
			interrupt()
		case <-grace: // could not be interrupted
			p.kill()
			<-p.exited
			died = true
		}
	}
	if died && grace == nil && undeliverable(sent) {
		if _, err := ks.restart(context.WithoutCancel(ctx), k, p); err == nil {
			return KernelResult{}, true
		}
	}
	if done {
		waitMarkers(e)
	}
	// Interrupted code leaves no process behind; a dead kernel's are
	// killed with it by the restart.
	if !died && (res.TimedOut || ctx.Err() != nil) {
		scope.kill()
	}
	res.Duration = time.Since(start)
	if died {
		res.Error = kernelDeath(k.spec.Language, p)
		if _, err := ks.restart(context.WithoutCancel(ctx), k, p); err != nil {
			res.Error.Value += "; restarting it failed: " + err.Error()
		}
		res.StateLost = true
	}
	if res.TimedOut {
		te := &KernelError{Name: "TimeoutError", Kind: KindSystem,
			Value: fmt.Sprintf("execution exceeded the timeout of %v and was interrupted", req.Timeout)}
		if died {
			te.Value = fmt.Sprintf("execution exceeded the timeout of %v and could not be interrupted; the kernel was restarted", req.Timeout)
		} else if res.Error != nil {
			te.Traceback = res.Error.Traceback // where it was interrupted
		}
		res.Error = te
	}
	e.mu.Lock()
	res.Dropped = e.dropped
	e.mu.Unlock()
	if res.Dropped > 0 {
		_ = fw.frame(frameStdout, []byte(TruncationMarker(res.Dropped, fmt.Sprintf("the %d-byte limit", req.OutputLimit))))
	}
	return res, false
}

// TruncationMarker is the line that ends output cut short: dropped bytes
// past what (a limit, a budget) were dropped.
func TruncationMarker(dropped int64, what string) string {
	return fmt.Sprintf("\n[output truncated: %d bytes past %s were dropped]\n", dropped, what)
}

// undeliverable reports whether sending a request failed because the
// driver was gone (a child holding the pipe may keep the write pending: it
// is given a moment, then taken as delivered).
func undeliverable(sent <-chan error) bool {
	select {
	case err := <-sent:
		return errors.Is(err, syscall.EPIPE)
	case <-time.After(100 * time.Millisecond):
		return false
	}
}

// send writes a request to the driver: "<marker> <code bytes> <env
// entries> <env bytes>\n", the code, then the entries of env, each
// "NAME=value" and a NUL, in the order of their names. A driver that died
// fails the write with EPIPE.
func (p *kernelProc) send(marker []byte, code string, env map[string]string) error {
	var entries strings.Builder
	for _, name := range slices.Sorted(maps.Keys(env)) {
		entries.WriteString(name + "=" + env[name] + "\x00")
	}
	header := fmt.Sprintf("%s %d %d %d\n", marker, len(code), len(env), entries.Len())
	_, err := io.WriteString(p.req, header+code+entries.String())
	return err
}

// waitMarkers waits, briefly, for the execution's output to drain.
func waitMarkers(e *execution) {
	t := time.NewTimer(markerGrace)
	defer t.Stop()
	for _, c := range e.seen {
		select {
		case <-c:
		case <-t.C:
			return
		}
	}
}

// restart replaces a dead (or stuck) driver with a new one.
func (ks *kernels) restart(ctx context.Context, k *kernel, old *kernelProc) (*kernelProc, error) {
	old.kill()
	<-old.exited
	k.mu.Lock()
	closed := k.closed
	k.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("kernel %s was removed: %w", k.spec.ID, ErrKernelNotFound)
	}
	p, err := ks.start(ctx, &k.spec)
	if err != nil {
		return nil, fmt.Errorf("restart %s kernel: %w", k.spec.Language, err)
	}
	k.mu.Lock()
	if k.closed { // removed while it restarted
		k.mu.Unlock()
		p.kill()
		return nil, fmt.Errorf("kernel %s was removed: %w", k.spec.ID, ErrKernelNotFound)
	}
	k.proc = p
	k.mu.Unlock()
	return p, nil
}

// kernelDeath explains why a driver died during an execution.
func kernelDeath(lang string, p *kernelProc) *KernelError {
	p.mu.Lock()
	killed := p.killed
	p.mu.Unlock()
	how := describeExit(p.status)
	switch {
	case killed:
		return &KernelError{Name: "KernelDied", Kind: KindSystem,
			Value: fmt.Sprintf("the %s kernel did not respond to an interrupt and was restarted", lang)}
	case oomKilled(p.status, p.oomAtStart):
		return &KernelError{Name: ReasonOutOfMemory, Kind: KindSystem,
			Value: fmt.Sprintf("the %s kernel ran out of memory and was killed; it was restarted", lang)}
	default:
		return &KernelError{Name: "KernelDied", Kind: KindSystem,
			Value: fmt.Sprintf("the %s kernel %s; it was restarted", lang, how)}
	}
}

func describeExit(ws syscall.WaitStatus) string {
	switch {
	case ws.Signaled():
		return "was killed by " + unixSignalName(ws.Signal())
	case ws.Exited():
		return "exited with status " + strconv.Itoa(ws.ExitStatus())
	}
	return "ended"
}

// oomKilled reports whether a process that ended with ws was killed by
// the out-of-memory killer: by SIGKILL (or, for a shell, a child's: exit
// status 137) while the sandbox's count of OOM kills rose past before. A
// concurrent command's OOM kill could be taken for it; a SIGKILL of the
// agent's own is ruled out by its callers.
func oomKilled(ws syscall.WaitStatus, before int64) bool {
	sigkill := ws.Signaled() && ws.Signal() == syscall.SIGKILL || ws.Exited() && ws.ExitStatus() == 128+int(syscall.SIGKILL)
	return sigkill && before >= 0 && oomKills() > before
}

// oomKills reads the sandbox cgroup's count of out-of-memory kills (v2 or
// v1), or -1 when it cannot be read.
func oomKills() int64 {
	for _, f := range []string{"/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				return n
			}
		}
	}
	return -1
}
