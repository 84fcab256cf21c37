// Package fakeruntime is an in-memory sandbox.Runtime (and
// sandbox.LogReader) for testing the layers above the runtime: the manager,
// the REST edge and their clients. It isolates nothing and needs no root,
// and it passes runtimetest.RunContract, so the layers above meet the
// contract every runtime keeps.
//
// Each fake sandbox runs a real in-process agent.Server on a unix socket in
// its own short temporary directory (os.MkdirTemp("", "a2e-"), so the socket
// path stays well under the 108-byte limit). Commands run as the test's own
// user, with per-sandbox directories standing in for /workspace and /tmp:
// the agent's traffic passes through a shim that maps paths there (file
// paths and the exec working directory) to those directories and maps them
// back in file-operation answers, so that nothing a test writes to a
// sandbox's /tmp lands in the host's. Paths elsewhere (/etc) are the host's.
//
// Images come from the image store given WithImages, as on the oci runtime:
// PrepareImage ensures them, Create needs them stored, and processes start
// with the image's environment under the spec's. Without one every image is
// ready and has no environment.
//
// The agent reaps children with wait4(-1) for the whole process, so a test
// process that uses this package must not also use os/exec while sandboxes
// run.
//
// Tests steer the fake with Hooks (errors or delays injected before an
// operation, a filter on exec requests), SetCapabilities, Kill (the sandbox dies: its agent
// stops and Status reports stopped, reason KilledReason), Seed (runtime state that exists before
// the daemon recovers) and AppendLog; Calls counts the calls of every
// method. A Runtime is safe for concurrent use; its zero value is not
// usable, create it with New. Close removes every sandbox.
package fakeruntime

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/runtime"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// Name is the fake's registry name, as Runtime.Name reports it.
const Name = "fake"

// KilledReason is the Status.Reason of a sandbox Kill stopped.
const KilledReason = "killed"

var (
	_ sandbox.Runtime       = (*Runtime)(nil)
	_ sandbox.LogReader     = (*Runtime)(nil)
	_ sandbox.ImagePreparer = (*Runtime)(nil)
	_ sandbox.Pauser        = (*Runtime)(nil)
)

// validID is what the fake accepts as a sandbox id, like the oci runtime.
var validID = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)

// Hooks inject behaviour into a Runtime. Each non-nil function is called
// before the operation it is named after, without the Runtime's lock held
// (so it may block, or call back into the Runtime); a non-nil error is
// returned by the operation, which then does nothing.
type Hooks struct {
	Create  func(ctx context.Context, spec *sandbox.Spec) error
	Start   func(ctx context.Context, id string) error
	Stop    func(ctx context.Context, id string) error
	Delete  func(ctx context.Context, id string) error
	Status  func(ctx context.Context, id string) error
	List    func(ctx context.Context) error
	Recover func(ctx context.Context) error
	Pause   func(ctx context.Context, id string) error
	Resume  func(ctx context.Context, id string) error
	// CheckHost answers sandbox.HostChecker's CheckHost (nil: the host
	// has room).
	CheckHost func() error
	// Exec sees every exec request an agent receives, with /workspace
	// already mapped to the sandbox's directory. An error refuses the
	// request: the agent answers 403 PERMISSION_DENIED with its message.
	// Fuzz tests use it to keep arbitrary commands from running.
	Exec func(id string, req *agent.ExecRequest) error
}

// Calls counts the calls of each Runtime method, failed ones included.
type Calls struct {
	Create, Start, Stop, Delete, Status, List, Agent, Recover, Logs int
	ImageReady, PrepareImage, Pause, Resume                         int
}

// Runtime is the fake. See the package comment.
type Runtime struct {
	images runtime.Images // nil: every image is ready

	mu        sync.Mutex
	sandboxes map[string]*box
	hooks     Hooks
	calls     Calls
	caps      sandbox.Capabilities
}

// Option configures a Runtime.
type Option func(*Runtime)

// WithImages makes the fake take its images from images.
func WithImages(images runtime.Images) Option { return func(r *Runtime) { r.images = images } }

// box is one fake sandbox. Its fields are guarded by Runtime.mu.
type box struct {
	spec    sandbox.Spec
	env     []string // of the agent: the image's and the spec's
	state   sandbox.State
	reason  string // why it stopped, when Kill stopped it
	created time.Time
	dir     string // holds the socket and work
	work    string // stands in for /workspace
	tmp     string // stands in for /tmp
	client  *agent.Client
	console *console

	// stop ends the agent server; nil when it is not running.
	stop func()
}

// console is a sandbox's console output, written by its agent's logger.
type console struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *console) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

func (c *console) tail(limit int64) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.buf.Bytes()
	if limit >= 0 && int64(len(b)) > limit {
		b = b[int64(len(b))-limit:]
	}
	return bytes.Clone(b)
}

// New returns an empty Runtime. It reports every capability until
// SetCapabilities says otherwise.
func New(opts ...Option) *Runtime {
	r := &Runtime{sandboxes: map[string]*box{},
		caps: sandbox.Capabilities{StopKeepsFiles: true, NetworkPolicy: true, LocalFiles: true, Pause: true}}
	for _, o := range opts {
		o(r)
	}
	return r
}

// SetCapabilities replaces what Capabilities reports. Without
// NetworkPolicy, Create refuses specs with egress, as runtimes must, and
// what else the capabilities lack (Capabilities.Refuse).
func (r *Runtime) SetCapabilities(c sandbox.Capabilities) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.caps = c
}

// SetHooks replaces the hooks. The zero Hooks removes them all.
func (r *Runtime) SetHooks(h Hooks) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hooks = h
}

// Calls returns the call counts so far.
func (r *Runtime) Calls() Calls {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// count increments a counter and returns the hooks in force, under one
// acquisition of the lock.
func (r *Runtime) count(c *int) Hooks {
	r.mu.Lock()
	defer r.mu.Unlock()
	*c++
	return r.hooks
}

// CheckHost implements sandbox.HostChecker with Hooks.CheckHost.
func (r *Runtime) CheckHost() error {
	r.mu.Lock()
	check := r.hooks.CheckHost
	r.mu.Unlock()
	if check == nil {
		return nil
	}
	return check()
}

// Name returns "fake".
func (r *Runtime) Name() string { return Name }

// Capabilities reports what SetCapabilities set; by default all: a stopped
// fake sandbox keeps its directory, egress policies are accepted (not
// enforced: the fake isolates nothing), and a pause changes the state a
// sandbox reports, freezing nothing.
func (r *Runtime) Capabilities() sandbox.Capabilities {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.caps
}

// ImageReady reports whether the image store holds ref.
func (r *Runtime) ImageReady(ctx context.Context, ref string) (bool, error) {
	r.count(&r.calls.ImageReady)
	if r.images == nil {
		return true, nil
	}
	_, err := r.images.Get(ctx, ref)
	if errors.Is(err, errdefs.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// PrepareImage ensures ref in the image store.
func (r *Runtime) PrepareImage(ctx context.Context, ref string) error {
	r.count(&r.calls.PrepareImage)
	if r.images == nil {
		return nil
	}
	_, err := r.images.Ensure(ctx, ref, nil)
	return err
}

// Create makes the sandbox's directory. The sandbox is StateCreated.
func (r *Runtime) Create(ctx context.Context, spec *sandbox.Spec) error {
	if h := r.count(&r.calls.Create); h.Create != nil {
		if err := h.Create(ctx, spec); err != nil {
			return err
		}
	}
	if err := r.validate(spec); err != nil {
		return fmt.Errorf("create sandbox: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("create sandbox %s: %w", spec.ID, err)
	}
	env, err := r.env(ctx, spec)
	if err != nil {
		return fmt.Errorf("create sandbox %s: %w", spec.ID, err)
	}
	return r.add(spec, env, sandbox.StateCreated)
}

// validate refuses what a real runtime would refuse.
func (r *Runtime) validate(spec *sandbox.Spec) error {
	switch {
	case spec == nil || !validID.MatchString(spec.ID):
		return errdefs.Invalid("sandbox id must match %s", validID)
	case spec.Image == "":
		return errdefs.Invalid("sandbox %s has no image", spec.ID)
	case spec.Network.Egress != nil && !r.Capabilities().NetworkPolicy:
		return errdefs.Invalid("sandbox %s needs network egress, which this runtime cannot enforce", spec.ID)
	}
	return r.Capabilities().Refuse(spec, r.Name())
}

// env returns the environment of spec's agent: the stored image's under
// the spec's.
func (r *Runtime) env(ctx context.Context, spec *sandbox.Spec) ([]string, error) {
	if r.images == nil {
		return sandbox.Environ(nil, spec.Env), nil
	}
	img, err := r.images.Get(ctx, spec.Image)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, fmt.Errorf("image %s is not prepared: %w", spec.Image, err)
	}
	if err != nil {
		return nil, err
	}
	return sandbox.Environ(img.Config.Env, spec.Env), nil
}

// add creates the box for spec in state (created, running or stopped).
func (r *Runtime) add(spec *sandbox.Spec, env []string, state sandbox.State) error {
	b, err := newBox(spec, env)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.sandboxes[spec.ID]; ok {
		os.RemoveAll(b.dir)
		return errdefs.Conflict("create sandbox %s: already exists", spec.ID)
	}
	if state == sandbox.StateRunning || state == sandbox.StatePaused {
		if err := r.startAgent(spec.ID, b); err != nil {
			os.RemoveAll(b.dir)
			return err
		}
	}
	b.state = state
	r.sandboxes[spec.ID] = b
	return nil
}

func newBox(spec *sandbox.Spec, env []string) (*box, error) {
	dir, err := os.MkdirTemp("", "a2e-")
	if err != nil {
		return nil, fmt.Errorf("create sandbox %s: %w", spec.ID, err)
	}
	work, tmp := filepath.Join(dir, "work"), filepath.Join(dir, "tmp")
	for _, d := range []string{work, tmp} {
		if err := os.Mkdir(d, 0o755); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("create sandbox %s: %w", spec.ID, err)
		}
	}
	s := *spec
	s.Env = slices.Clone(spec.Env)
	s.Labels = maps.Clone(spec.Labels)
	b := &box{spec: s, env: env, created: time.Now(), dir: dir, work: work, tmp: tmp, console: &console{}}
	b.client = agent.NewClient(agent.UnixDialer(b.socket()), "")
	return b, nil
}

func (b *box) socket() string { return filepath.Join(b.dir, "agent.sock") }

// startAgent serves a new agent for b. The caller holds r.mu.
func (r *Runtime) startAgent(id string, b *box) error {
	if b.stop != nil {
		return nil
	}
	_ = os.Remove(b.socket()) // left by a killed agent
	l, err := net.Listen("unix", b.socket())
	if err != nil {
		return fmt.Errorf("start sandbox %s: %w", id, err)
	}
	cwd := b.work
	if b.spec.Cwd != "" {
		cwd = b.hostPath(b.spec.Cwd)
	}
	srv := agent.NewServer(agent.ServerConfig{
		Env: b.env, Cwd: cwd, UID: -1, GID: -1,
		Log: slog.New(slog.NewTextHandler(b.console, nil)),
	})
	h := &shim{id: id, box: b, rt: r, next: srv.Handler()}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		httpSrv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			<-ctx.Done()
			_ = httpSrv.Close()
		}()
		_ = httpSrv.Serve(l)
	}()
	fmt.Fprintf(b.console, "fake agent for sandbox %s listening\n", id)
	b.stop = func() {
		h.dying.Store(true)
		cancel()
		<-done
		b.client.Close()
		fmt.Fprintf(b.console, "fake agent for sandbox %s stopped\n", id)
	}
	return nil
}

// stopAgent ends b's agent, if it runs, and the commands it runs (their
// requests' contexts end with the connections). The caller holds r.mu.
func (b *box) stopAgent() {
	if b.stop != nil {
		b.stop()
		b.stop = nil
	}
}

// hostPath maps a path in the sandbox to the host: /workspace and /tmp
// and below to the sandbox's directories, everything else to itself.
func (b *box) hostPath(p string) string {
	for _, m := range b.mapped() {
		if p == m.in {
			return m.host
		}
		if rest, ok := strings.CutPrefix(p, m.in+"/"); ok {
			return filepath.Join(m.host, rest)
		}
	}
	return p
}

// sandboxPaths maps the sandbox's directories back in an agent's answer.
func (b *box) sandboxPaths(body []byte) []byte {
	for _, m := range b.mapped() {
		body = bytes.ReplaceAll(body, []byte(m.host), []byte(m.in))
	}
	return body
}

// mapped lists the sandbox's directories that stand in for its own.
func (b *box) mapped() [2]struct{ in, host string } {
	return [2]struct{ in, host string }{{sandbox.WorkDir, b.work}, {"/tmp", b.tmp}}
}

// Start starts the sandbox's agent; it accepts connections when Start
// returns. Starting a running sandbox does nothing.
func (r *Runtime) Start(ctx context.Context, id string) error {
	if h := r.count(&r.calls.Start); h.Start != nil {
		if err := h.Start(ctx, id); err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	b, err := r.get("start", id)
	if err != nil {
		return err
	}
	if err := r.startAgent(id, b); err != nil {
		return err
	}
	b.state, b.reason = sandbox.StateRunning, ""
	return nil
}

// get returns the box of id or an ErrNotFound. The caller holds r.mu.
func (r *Runtime) get(op, id string) (*box, error) {
	b, ok := r.sandboxes[id]
	if !ok {
		return nil, errdefs.NotFound("%s sandbox %s: not found", op, id)
	}
	return b, nil
}

// Stop ends the sandbox's agent and its commands; files stay.
func (r *Runtime) Stop(ctx context.Context, id string, timeout time.Duration) error {
	if h := r.count(&r.calls.Stop); h.Stop != nil {
		if err := h.Stop(ctx, id); err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	b, err := r.get("stop", id)
	if err != nil {
		return err
	}
	b.stopAgent()
	b.state, b.reason = sandbox.StateStopped, KilledReason
	return nil
}

// Pause marks a running sandbox paused; its agent goes on answering (the
// layers above refuse to reach a paused sandbox's agent). Without
// Capabilities.Pause it is an ErrNotImplemented, as on a host without a
// freezer.
func (r *Runtime) Pause(ctx context.Context, id string) error {
	if h := r.count(&r.calls.Pause); h.Pause != nil {
		if err := h.Pause(ctx, id); err != nil {
			return err
		}
	}
	return r.setPaused("pause", id, true)
}

// Resume marks a paused sandbox running again.
func (r *Runtime) Resume(ctx context.Context, id string) error {
	if h := r.count(&r.calls.Resume); h.Resume != nil {
		if err := h.Resume(ctx, id); err != nil {
			return err
		}
	}
	return r.setPaused("resume", id, false)
}

func (r *Runtime) setPaused(op, id string, pause bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.caps.Pause {
		return fmt.Errorf("%s sandbox %s: %w", op, id, errdefs.ErrNotImplemented)
	}
	b, err := r.get(op, id)
	if err != nil {
		return err
	}
	switch {
	case b.state != sandbox.StateRunning && b.state != sandbox.StatePaused:
		return errdefs.Precondition("%s sandbox %s: it is %s", op, id, b.state)
	case pause:
		b.state = sandbox.StatePaused
	default:
		b.state = sandbox.StateRunning
	}
	return nil
}

// Delete stops the sandbox and removes its directory.
func (r *Runtime) Delete(ctx context.Context, id string) error {
	if h := r.count(&r.calls.Delete); h.Delete != nil {
		if err := h.Delete(ctx, id); err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	b, err := r.get("delete", id)
	if err != nil {
		return err
	}
	delete(r.sandboxes, id)
	b.stopAgent()
	b.client.Close()
	if err := os.RemoveAll(b.dir); err != nil {
		return fmt.Errorf("delete sandbox %s: %w", id, err)
	}
	return nil
}

func (b *box) status(id string) sandbox.Status {
	st := sandbox.Status{ID: id, State: b.state, CreatedAt: b.created, Labels: maps.Clone(b.spec.Labels), Reason: b.reason}
	if b.stop != nil {
		st.Pid = os.Getpid() // the agent runs in this process
	}
	return st
}

// Status reports on one sandbox.
func (r *Runtime) Status(ctx context.Context, id string) (sandbox.Status, error) {
	if h := r.count(&r.calls.Status); h.Status != nil {
		if err := h.Status(ctx, id); err != nil {
			return sandbox.Status{}, err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	b, err := r.get("status of", id)
	if err != nil {
		return sandbox.Status{}, err
	}
	return b.status(id), nil
}

// List reports on every sandbox, ordered by id.
func (r *Runtime) List(ctx context.Context) ([]sandbox.Status, error) {
	if h := r.count(&r.calls.List); h.List != nil {
		if err := h.List(ctx); err != nil {
			return nil, err
		}
	}
	return r.list(), nil
}

func (r *Runtime) list() []sandbox.Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]sandbox.Status, 0, len(r.sandboxes))
	for _, id := range slices.Sorted(maps.Keys(r.sandboxes)) {
		out = append(out, r.sandboxes[id].status(id))
	}
	return out
}

// Agent returns the sandbox's agent client. Calls on it fail with an
// ErrUnavailable while the agent is not running.
func (r *Runtime) Agent(ctx context.Context, id string) (*agent.Client, error) {
	r.count(&r.calls.Agent)
	r.mu.Lock()
	defer r.mu.Unlock()
	b, err := r.get("agent of", id)
	if err != nil {
		return nil, err
	}
	return b.client, nil
}

// Recover reports every sandbox, as List does; the fake has nothing
// half-made to clean up.
func (r *Runtime) Recover(ctx context.Context) ([]sandbox.Status, error) {
	if h := r.count(&r.calls.Recover); h.Recover != nil {
		if err := h.Recover(ctx); err != nil {
			return nil, err
		}
	}
	return r.list(), nil
}

// Logs returns at most the last limit bytes of the sandbox's console: the
// fake's own start and stop lines, its agent's log and what AppendLog
// added.
func (r *Runtime) Logs(ctx context.Context, id string, limit int64) ([]byte, error) {
	r.count(&r.calls.Logs)
	if limit < 0 {
		return nil, errdefs.Invalid("sandbox logs %s: negative limit %d", id, limit)
	}
	r.mu.Lock()
	b, err := r.get("logs of", id)
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return b.console.tail(limit), nil
}

// Seed creates a sandbox in state (created, running or stopped) without
// counting a call or running hooks: runtime state that a previous daemon
// left for Recover to find. A running one has a live agent. Its image
// need not be stored.
func (r *Runtime) Seed(spec *sandbox.Spec, state sandbox.State) error {
	switch state {
	case sandbox.StateCreated, sandbox.StateRunning, sandbox.StatePaused, sandbox.StateStopped:
	default:
		return errdefs.Invalid("seed sandbox %s: state %q cannot be seeded", spec.ID, state)
	}
	return r.add(spec, sandbox.Environ(nil, spec.Env), state)
}

// Kill simulates the death of a sandbox: its agent and commands end and
// Status reports stopped. Files stay, and Start revives it.
func (r *Runtime) Kill(id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, err := r.get("kill", id)
	if err != nil {
		return err
	}
	b.stopAgent()
	b.state, b.reason = sandbox.StateStopped, KilledReason
	return nil
}

// AppendLog adds p to the sandbox's console output.
func (r *Runtime) AppendLog(id string, p []byte) error {
	r.mu.Lock()
	b, err := r.get("append log of", id)
	r.mu.Unlock()
	if err != nil {
		return err
	}
	_, _ = b.console.Write(p)
	return nil
}

// IDs returns the ids of every sandbox, sorted, without counting a call.
func (r *Runtime) IDs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.sandboxes))
}

// State returns the sandbox's state, or "" when the fake holds no such
// sandbox, without counting a call or running hooks.
func (r *Runtime) State(id string) sandbox.State {
	r.mu.Lock()
	defer r.mu.Unlock()
	if b, ok := r.sandboxes[id]; ok {
		return b.state
	}
	return ""
}

// Spec returns a copy of the spec the sandbox was created from.
func (r *Runtime) Spec(id string) (*sandbox.Spec, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, err := r.get("spec of", id)
	if err != nil {
		return nil, err
	}
	s := b.spec
	s.Env, s.Labels = slices.Clone(s.Env), maps.Clone(s.Labels)
	return &s, nil
}

// WorkDir returns the host directory that stands in for the sandbox's
// /workspace.
func (r *Runtime) WorkDir(id string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, err := r.get("workdir of", id)
	if err != nil {
		return "", err
	}
	return b.work, nil
}

// Close deletes every sandbox. The Runtime stays usable.
func (r *Runtime) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for id, b := range r.sandboxes {
		delete(r.sandboxes, id)
		b.stopAgent()
		b.client.Close()
		errs = append(errs, os.RemoveAll(b.dir))
	}
	return errors.Join(errs...)
}

// shim sits between a sandbox's socket and its agent and maps /workspace
// and /tmp paths to the sandbox's directories: in the path, from and to query
// parameters, in the working directory of exec requests, background
// processes and kernels, and back in the answers of file operations.
type shim struct {
	id   string
	box  *box
	rt   *Runtime // for the Exec hook in force
	next http.Handler
	// dying is set as the agent is stopped: a real sandbox's agent dies
	// with its commands and answers nothing more, where this one, its
	// requests cancelled, would still write a command's result (mute).
	dying atomic.Bool
}

// mute is a command's response, which drops what the agent writes once
// it is being stopped.
type mute struct {
	http.ResponseWriter
	dying *atomic.Bool
}

var errAgentStopped = errors.New("fake agent stopped")

func (m mute) Write(p []byte) (int, error) {
	if m.dying.Load() {
		return 0, errAgentStopped
	}
	return m.ResponseWriter.Write(p)
}

// Unwrap gives http.ResponseController the writer's Flush.
func (m mute) Unwrap() http.ResponseWriter { return m.ResponseWriter }

// maxExecLine bounds the exec request line the shim rewrites; longer lines
// pass through for the agent to refuse.
const maxExecLine = 2 << 20

func (s *shim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for _, k := range []string{"path", "from", "to"} {
		if q.Has(k) {
			q.Set(k, s.box.hostPath(q.Get(k)))
		}
	}
	r.URL.RawQuery = q.Encode()

	switch {
	case r.Method == http.MethodPost && (r.URL.Path == "/v1/exec" || r.URL.Path == "/v1/exec/attach"):
		s.exec(w, r)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/files/batch":
		s.batch(w, r)
	case r.Method == http.MethodGet && r.URL.Path == "/v1/files":
		s.next.ServeHTTP(w, r) // file contents are not rewritten
	case r.URL.Path == "/v1/dial":
		s.next.ServeHTTP(w, r) // a raw byte pipe after the upgrade
	case strings.HasPrefix(r.URL.Path, "/v1/procs/") && strings.HasSuffix(r.URL.Path, "/attach"):
		s.next.ServeHTTP(w, r) // a two-way stream after the upgrade
	case r.Method == http.MethodPost && r.URL.Path == "/v1/procs":
		s.procStart(w, r)
	case r.URL.Path == "/v1/watch":
		s.next.ServeHTTP(w, r) // a stream of names relative to the watched directory
	case r.Method == http.MethodPost && r.URL.Path == "/v1/kernels":
		s.kernelCreate(w, r)
	case strings.HasPrefix(r.URL.Path, "/v1/kernels/"):
		s.next.ServeHTTP(w, r) // executions stream
	default:
		rec := httptest.NewRecorder()
		s.next.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(s.box.sandboxPaths(rec.Body.Bytes()))
	}
}

// procStart maps a background process's working directory into the box;
// its answer (with follow, its output stream) passes through.
func (s *shim) procStart(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(io.LimitReader(r.Body, maxExecLine))
	var req agent.ProcRequest
	if json.Unmarshal(b, &req) == nil && req.Cwd != "" {
		req.Cwd = s.box.hostPath(req.Cwd)
		b, _ = json.Marshal(req)
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.ContentLength = int64(len(b))
	s.next.ServeHTTP(w, r)
}

// kernelCreate maps a kernel's working directory into the box.
func (s *shim) kernelCreate(w http.ResponseWriter, r *http.Request) {
	var spec agent.KernelSpec
	if err := json.NewDecoder(io.LimitReader(r.Body, maxExecLine)).Decode(&spec); err == nil && spec.Cwd != "" {
		spec.Cwd = s.box.hostPath(spec.Cwd)
	}
	b, _ := json.Marshal(spec)
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.ContentLength = int64(len(b))
	s.next.ServeHTTP(w, r)
}

// exec rewrites the request line of an exec and applies the filter; the
// rest of the body (stdin, or an attachment's input) streams through
// untouched.
func (s *shim) exec(w http.ResponseWriter, r *http.Request) {
	// Work around golang/go#68560, which the agent does not yet: a
	// full-duplex handler that returns with part of the body unread (stdin
	// the command never read, a command that could not start) leaves the
	// server reading the body's end in the background while it parses the
	// next request on the connection; it panics, drops the connection, and
	// the next exec on the client's pooled connection fails with EOF or a
	// reset. Closing the body before the handler returns avoids it; but
	// not after an answer that ends the connection (an exec that attaches
	// refused): the close would wait for a body its client ends only once
	// it has that answer, sent when the handler returns.
	defer func() {
		if w.Header().Get("Connection") != "close" {
			r.Body.Close()
		}
	}()
	// A refusal goes while the client still sends (the agent's is full
	// duplex too): it would wait for the body's end otherwise.
	_ = http.NewResponseController(w).EnableFullDuplex()
	br := bufio.NewReaderSize(r.Body, 64<<10)
	line, err := readLine(br, maxExecLine)
	head := line // what was read, passed on as it was unless rewritten
	var req agent.ExecRequest
	if err == nil && json.Unmarshal(line, &req) == nil {
		if req.Cwd != "" {
			req.Cwd = s.box.hostPath(req.Cwd)
		}
		s.rt.mu.Lock()
		filter := s.rt.hooks.Exec
		s.rt.mu.Unlock()
		if filter != nil {
			if ferr := filter(s.id, &req); ferr != nil {
				w.Header().Set("Connection", "close")
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusForbidden)
				_ = json.NewEncoder(w).Encode(map[string]string{"error": ferr.Error(), "code": "PERMISSION_DENIED"})
				return
			}
		}
		if b, merr := json.Marshal(&req); merr == nil {
			head = append(b, '\n')
		}
	}
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), br), r.Body}
	s.next.ServeHTTP(mute{w, &s.dying}, r)
}

// readLine reads up to and including the next newline, at most about
// limit bytes. On error it returns what it read.
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if err == nil {
			return line, nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
		if len(line) > limit {
			return line, fmt.Errorf("exec request line exceeds %d bytes", limit)
		}
	}
}

// batch passes a batch upload through, mapping the paths of its files'
// headers into the box as they stream, and those of its result back.
func (s *shim) batch(w http.ResponseWriter, r *http.Request) {
	pr, pw := io.Pipe()
	go func(body io.Reader) {
		pw.CloseWithError(mapFrames(pw, body, func(kind byte, p []byte) []byte {
			var h agent.BatchFile
			if kind != 'f' || json.Unmarshal(p, &h) != nil {
				return p
			}
			h.Path = s.box.hostPath(h.Path)
			b, _ := json.Marshal(h)
			return b
		}))
	}(r.Body)
	r.Body = pr
	fw := &frameMapper{ResponseWriter: w, box: s.box}
	s.next.ServeHTTP(fw, r)
	_ = fw.FlushError()
}

// mapFrames copies the frames of an agent stream (a kind byte, a 4-byte
// big-endian length, the payload) from r to w, each payload through fn.
func mapFrames(w io.Writer, r io.Reader, fn func(kind byte, p []byte) []byte) error {
	br := bufio.NewReader(r)
	for {
		var hdr [5]byte
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return err
		}
		p := make([]byte, binary.BigEndian.Uint32(hdr[1:]))
		if _, err := io.ReadFull(br, p); err != nil {
			return err
		}
		p = fn(hdr[0], p)
		binary.BigEndian.PutUint32(hdr[1:], uint32(len(p)))
		if _, err := w.Write(append(hdr[:], p...)); err != nil {
			return err
		}
	}
}

// frameMapper holds what an agent writes of a 200 answer of frames until a
// flush, then passes its whole frames on with the box's paths mapped back.
type frameMapper struct {
	http.ResponseWriter
	box    *box
	status int
	buf    bytes.Buffer
}

func (f *frameMapper) WriteHeader(code int) {
	f.status = code
	f.ResponseWriter.WriteHeader(code)
}

func (f *frameMapper) Write(p []byte) (int, error) {
	if f.status != 0 && f.status != http.StatusOK {
		return f.ResponseWriter.Write(f.box.sandboxPaths(p))
	}
	if f.status == 0 {
		f.WriteHeader(http.StatusOK)
	}
	return f.buf.Write(p)
}

func (f *frameMapper) FlushError() error {
	var whole []byte
	for b := f.buf.Bytes(); len(b) >= 5 && len(b) >= 5+int(binary.BigEndian.Uint32(b[1:5])); {
		n := 5 + int(binary.BigEndian.Uint32(b[1:5]))
		whole, b = append(whole, b[:n]...), b[n:]
	}
	f.buf.Next(len(whole))
	var out bytes.Buffer
	if err := mapFrames(&out, bytes.NewReader(whole), func(_ byte, p []byte) []byte { return f.box.sandboxPaths(p) }); err != io.EOF {
		return err
	}
	if _, err := f.ResponseWriter.Write(out.Bytes()); err != nil {
		return err
	}
	return http.NewResponseController(f.ResponseWriter).Flush()
}

func (f *frameMapper) Unwrap() http.ResponseWriter { return f.ResponseWriter }
