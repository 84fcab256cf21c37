package agent

import (
	"cmp"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Server is the agent's API. Create it with NewServer; it is safe for
// concurrent use.
type Server struct {
	env     []string
	cwd     string
	uid     int // user commands and file operations run as; -1 = as the agent
	gid     int
	token   string
	started time.Time
	reaper  *reaper
	// spare is closed once the agent holds its spare OS threads; nil
	// when it holds none (tests).
	spare <-chan struct{}
	// oomExec returns the process's OOM trampoline (processOOMExec) on
	// the first command, nil where none runs; tests replace it.
	oomExec func() *oomExec
	// oomScore is ServerConfig.OOMScore.
	oomScore *os.File
	// suspendGrace is ServerConfig.SuspendGrace, or its default.
	suspendGrace time.Duration
	running      atomic.Int64
	log          *slog.Logger

	kernels *kernels
	// procs are the detached processes (/v1/procs).
	procs *procs
	// accepts are the addresses whose connections the daemon accepts, by
	// name (GET /v1/accept).
	accepts map[string]*acceptor
	// reserved are the ports /v1/dial refuses (ServerConfig.Reserved).
	reserved []int
	// activity is when commands and kernel executions ran.
	activity activity
	// disk is the last figure of the disk use asked for (GET /v1/usage).
	disk diskCache

	mu   sync.Mutex
	main *MainStatus // the sandbox's main process, once started
	// mainStarting is set while a main process is being started, so that
	// a concurrent start sees the slot taken.
	mainStarting bool
}

// ServerConfig configures a Server.
type ServerConfig struct {
	// Env is the environment of every command (before request additions).
	Env []string
	// Cwd is the default working directory.
	Cwd string
	// UID and GID are the user commands and file operations run as.
	// Negative runs them as the agent's own user (the kubernetes runtime,
	// tests); either way commands get userOOMScore.
	UID, GID int
	// Token, when set, is required as a bearer token on every request.
	Token string
	// Accept are listeners on sandbox addresses whose connections the
	// daemon accepts through GET /v1/accept?name=<key>, served by Serve.
	Accept map[string]net.Listener
	// Spare, when set, is closed once the agent holds its spare OS
	// threads (reserveThreads): no user process starts before.
	Spare <-chan struct{}
	Log   *slog.Logger
	// SpareKernel, when set, is the language of a kernel NewServer starts
	// at once, for the first kernel request to adopt.
	SpareKernel string
	// Reserved are the ports of the sandbox's loopback that serve the
	// daemon's services to the sandbox's own commands (the egress proxy's,
	// the LLM proxy's and MCP's): they act as the sandbox, so GET /v1/dial,
	// which reaches ports for clients outside, refuses them.
	Reserved []int
	// OOMScore, when set, is the process's own oom_score_adj open for
	// writing, which forkRaised writes rather than open it: Run opens it
	// for an agent that is not root, which may not open it once it is not
	// dumpable (the file is root's then; the kernel checks a write at the
	// open only).
	OOMScore *os.File
	// SuspendGrace is how long a process that ends with its writer waits
	// for its writer, suspended for a checkpoint, to attach again; 0:
	// suspendGrace.
	SuspendGrace time.Duration
}

// NewServer returns a Server. It starts reaping children at once.
func NewServer(cfg ServerConfig) *Server {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	s := &Server{
		env: cfg.Env, cwd: cfg.Cwd, uid: cfg.UID, gid: cfg.GID, token: cfg.Token, reserved: cfg.Reserved,
		started: time.Now(), reaper: processReaper(), spare: cfg.Spare, log: cfg.Log, oomScore: cfg.OOMScore,
		suspendGrace: cmp.Or(cfg.SuspendGrace, suspendGrace),
	}
	s.oomExec = sync.OnceValue(func() *oomExec {
		o, err := processOOMExec()
		if err != nil {
			s.log.Warn("commands start with the agent's own oom_score_adj raised around their fork", "err", err)
		}
		return o
	})
	s.kernels = newKernels(s)
	if cfg.SpareKernel != "" {
		s.kernels.startSpare(cfg.SpareKernel)
	}
	s.procs = newProcs(s)
	s.accepts = make(map[string]*acceptor, len(cfg.Accept))
	for name, l := range cfg.Accept {
		s.accepts[name] = newAcceptor(l)
	}
	return s
}

// Handler returns the HTTP handler of the agent API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/info", s.handleInfo)
	mux.HandleFunc("GET /v1/usage", s.handleUsage)
	mux.HandleFunc("POST /v1/exec", s.handleExec)
	mux.HandleFunc("POST /v1/exec/attach", s.handleExecAttach)
	mux.HandleFunc("GET /v1/files", s.handleDownload)
	mux.HandleFunc("PUT /v1/files", s.handleUpload)
	mux.HandleFunc("POST /v1/files/batch", s.handleUploadBatch)
	mux.HandleFunc("DELETE /v1/files", s.handleRemove)
	mux.HandleFunc("GET /v1/stat", s.handleStat)
	mux.HandleFunc("GET /v1/list", s.handleList)
	mux.HandleFunc("POST /v1/mkdir", s.handleMkdir)
	mux.HandleFunc("POST /v1/move", s.handleMove)
	mux.HandleFunc("GET /v1/watch", s.handleWatch)
	mux.HandleFunc("GET /v1/dial", s.handleDial)
	mux.HandleFunc("GET /v1/accept", s.handleAccept)
	mux.HandleFunc("POST /v1/kernels", s.handleKernelCreate)
	mux.HandleFunc("GET /v1/kernels", s.handleKernelList)
	mux.HandleFunc("DELETE /v1/kernels/{id}", s.handleKernelDelete)
	mux.HandleFunc("POST /v1/kernels/{id}/execute", s.handleKernelExecute)
	mux.HandleFunc("POST /v1/kernels/{id}/execute/attach", s.handleKernelExecuteAttach)
	mux.HandleFunc("POST /v1/kernels/{id}/executions/{run}/attach", s.handleKernelAttach)
	mux.HandleFunc("POST /v1/restored", s.handleRestored)
	mux.HandleFunc("POST /v1/procs", s.handleProcStart)
	mux.HandleFunc("GET /v1/procs", s.handleProcList)
	mux.HandleFunc("GET /v1/procs/{id}", s.handleProcGet)
	mux.HandleFunc("DELETE /v1/procs/{id}", s.handleProcDelete)
	mux.HandleFunc("GET /v1/procs/{id}/output", s.handleProcOutput)
	mux.HandleFunc("POST /v1/procs/{id}/stdin", s.handleProcStdin)
	mux.HandleFunc("POST /v1/procs/{id}/signal", s.handleProcSignal)
	mux.HandleFunc("POST /v1/procs/{id}/resize", s.handleProcResize)
	mux.HandleFunc("GET /v1/procs/{id}/attach", s.handleProcAttach)
	if s.token == "" {
		return mux
	}
	want := []byte("Bearer " + s.token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			writeError(w, http.StatusUnauthorized, "UNAUTHORIZED", errors.New("missing or wrong agent token"))
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// Serve answers requests on l, and relays the connections of the Accept
// listeners, until ctx is done; then it closes them all and ends every
// detached process.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for name, a := range s.accepts {
		wg.Go(func() {
			if err := a.serve(ctx); err != nil {
				s.log.Warn("accept "+name+" stopped", "err", err)
			}
		})
	}
	wg.Go(func() {
		<-ctx.Done()
		_ = srv.Close()
	})
	err := srv.Serve(l)
	s.procs.shutdown()
	s.kernels.shutdown()
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (s *Server) track(delta int64) { s.running.Add(delta) }

// adoptedBy returns the test of procScope.adopted for the execution r: a
// process the agent did not start itself, which started while r alone ran.
func (s *Server) adoptedBy(r *run) func(p proc) bool {
	return func(p proc) bool {
		return !s.reaper.started(p.pid) && s.activity.sole(r, p.start)
	}
}

func (s *Server) handleInfo(w http.ResponseWriter, r *http.Request) {
	info := Info{
		Version:   Version,
		Uptime:    time.Since(s.started),
		Processes: countProcesses(),
		Running:   int(s.running.Load()),
	}
	s.mu.Lock()
	if s.main != nil {
		m := *s.main
		info.Main = &m
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, info)
}

// countProcesses counts the numeric entries of /proc: in the sandbox's pid
// namespace, every process of the sandbox.
func countProcesses() int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		if name := e.Name(); name != "" && name[0] >= '0' && name[0] <= '9' {
			n++
		}
	}
	return n
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code string, err error) {
	writeJSON(w, status, errorBody{Error: err.Error(), Code: code})
}

// writeFSError maps a file-system error to a status and code.
func writeFSError(w http.ResponseWriter, err error) {
	status, code := fsErrorStatus(err)
	writeError(w, status, code, err)
}

// fsErrorStatus is the status and code that answer a file-system error.
func fsErrorStatus(err error) (int, string) {
	switch {
	case errors.Is(err, syscall.ENOTEMPTY): // before ErrExist, which it matches
		return http.StatusBadRequest, "NOT_EMPTY"
	case errors.Is(err, fs.ErrNotExist):
		return http.StatusNotFound, "NOT_FOUND"
	case errors.Is(err, fs.ErrExist):
		return http.StatusConflict, "ALREADY_EXISTS"
	case errors.Is(err, syscall.EBUSY), errors.Is(err, syscall.ETXTBSY):
		return http.StatusConflict, "BUSY"
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		return http.StatusForbidden, "PERMISSION_DENIED"
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return http.StatusInsufficientStorage, "NO_SPACE"
	case errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENOTDIR),
		errors.Is(err, syscall.EINVAL), errors.Is(err, syscall.ENAMETOOLONG),
		errors.Is(err, syscall.ELOOP), errors.Is(err, syscall.EXDEV):
		return http.StatusBadRequest, "INVALID_PATH"
	}
	return http.StatusInternalServerError, "INTERNAL"
}

// EnvKubelet, when set (the kubernetes runtime sets it), says that env
// holds the variables the kubelet gives every container for the
// cluster's API service (KUBERNETES_SERVICE_HOST, KUBERNETES_PORT_443_TCP,
// …), whatever the Pod says: enableServiceLinks false drops only other
// services'. Commands get none of them, as on the oci runtime, but those
// its value names (comma-separated): the sandbox's own env set them.
const EnvKubelet = "AGENT2ENV_AGENT_KUBELET_ENV"

// envForCommands strips the agent's own configuration from env, and the
// kubelet's variables where EnvKubelet says env has them.
func envForCommands(env []string) []string {
	var keep map[string]bool
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, EnvKubelet+"="); ok {
			keep = map[string]bool{}
			for _, name := range strings.Split(v, ",") {
				keep[name] = true
			}
		}
	}
	out := env[:0:0]
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "AGENT2ENV_AGENT_") || keep != nil && kubeletVar(name) && !keep[name] {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// kubeletVar reports whether name is of those the kubelet sets for the
// cluster's API service ("kubernetes"): KUBERNETES_SERVICE_HOST, _PORT,
// _PORT_<NAME>, and the link form KUBERNETES_PORT, KUBERNETES_PORT_<N>_<PROTO>…
func kubeletVar(name string) bool {
	return strings.HasPrefix(name, "KUBERNETES_SERVICE_") || name == "KUBERNETES_PORT" || strings.HasPrefix(name, "KUBERNETES_PORT_")
}

// KubeletKeep is EnvKubelet's value for a sandbox whose env is env
// (KEY=VALUE): the names of the kubelet's variables it sets itself.
func KubeletKeep(env []string) string {
	var keep []string
	for _, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); kubeletVar(name) {
			keep = append(keep, name)
		}
	}
	return strings.Join(keep, ",")
}
