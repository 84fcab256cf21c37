// Package run is the task runner: a task (package task) submitted to the
// daemon becomes k runs per agent × model combination, each a record (the
// store's runs) carried out in its own sandbox: create it, copy the
// inputs in, run the setup commands, write the agent adapter's files
// (package agents), run the agent as the sandbox user while watching it,
// check the end conditions, bring the artifacts back (on every outcome),
// record the result, and delete the sandbox before the next run takes the
// slot.
//
// A run ends succeeded only when the agent exited with the expected code
// and the end conditions hold; otherwise failed (with the check's output,
// or the step that failed), hung (no progress on any liveness signal for
// liveness.idle: agent output, LLM calls reported through Progress, CPU time
// of the sandbox's processes, files changed in the workdir), timeout (at
// end.timeout, counted from the sandbox running), sandbox_lost (the
// sandbox stopped answering for liveness.heartbeat) or cancelled.
//
// Each run keeps, under <dir>/<id>/, its event log (events.jsonl, followed
// live by Follow), the agent's output (output.log), its artifacts
// (artifacts/<path in the sandbox>) and result.json. With a store Notifier
// (WithNotifier) each event also goes to the other daemons of the store,
// so that Follow of a run another daemon carries out passes them on from
// when it starts following, and the end (remote.go). An ended run is kept
// until deleted (Delete) or, with Config.MaxAge, until it ended that long
// ago (Expire); its record goes first, then its files, on each daemon that
// has some (retention.go).
//
// Runs are carried out by the Run loop (a supervisor loop): Submit only
// records them and queues them for it. Each run is claimed by the daemon
// carrying it out (store.Run.ClaimedBy, Config.Owner) for a lease the loop
// renews, so that daemons sharing a store never run the same run. When
// the loop stops (daemon shutdown) runs in flight are left as they are;
// the next Run first claims and recovers the runs a previous daemon left
// active, its own and those whose lease lapsed; and every third of the
// lease the loop takes over the runs whose lease lapsed, those of a
// daemon that died. A run taken over that is still queued is queued
// again, with its submission's parallelism and inputs when they are in
// this daemon's directory, or, a dead daemon's run whose task reads no
// inputs, without them. A run in its agent or check phase whose resume
// state is in this daemon's directory is carried on: its agent, a
// detached process of its sandbox, went on without a daemon and is
// followed again from where the last one stopped reading, or its check
// runs again (resume.go). Any other ends failed (ReasonRestarted,
// ReasonOrphaned), after its artifacts are collected where its sandbox
// survived, and its sandbox is deleted. A Service is safe for concurrent
// use.
//
// A submission is a task file's content or a name under the tasks
// directory (Config.TasksDir), with agents × models, k and parallelism.
// Its inputs are found in the task's directory or the submission's files
// through an os.Root, at submission and again when copied in, so no
// symbolic link or ".." brings in a host file. Each run belongs to the
// tenant of the API key that submitted it: the REST routes and a per-run
// LLM key see only those runs; the loop, its recovery and RunOfSandbox see
// all.
//
// The runner drives its sandboxes through the sandbox service
// (service.Sandboxes, the Sandboxes interface), api types in and out, like
// every surface: admission, paths and exec limits are that service's
// rules, never written again here.
package run

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/llm/caller"
	"github.com/agent2env/agent2env/internal/service"
	"github.com/agent2env/agent2env/internal/store"
)

// ManagedBy marks the sandboxes runs make.
const ManagedBy = "runs"

// ReasonRestarted is the reason of a run the daemon's restart ended;
// ReasonOrphaned that of a run whose daemon stopped renewing its claim,
// which another daemon ended.
const (
	ReasonRestarted = "daemon restarted"
	ReasonOrphaned  = "the daemon running it stopped"
)

// Defaults of Config.
const (
	DefaultLLMURL        = "http://127.0.0.1:4000/llm"
	DefaultMCPURL        = "http://127.0.0.1:4000/mcp"
	DefaultMaxParallel   = 16
	DefaultArtifactLimit = 100 << 20
	DefaultOutputLimit   = 64 << 20
	DefaultReadyTimeout  = 10 * time.Minute
	DefaultLease         = 30 * time.Second
	// MaxInputsBytes bounds the input archive a submission carries;
	// MaxInputsEntries its entries, which its bytes do not bound (empty
	// files and directories are a few compressed bytes each).
	MaxInputsBytes   = 64 << 20
	MaxInputsEntries = 100_000
	// tailLines is how many lines of output a result keeps.
	tailLines = 20
)

// maxInputsEntries is MaxInputsEntries, lowered by tests.
var maxInputsEntries = MaxInputsEntries

// Log attribute keys.
const (
	logRun     = "run"
	logSandbox = "sandbox"
)

// Config configures a Service.
type Config struct {
	// Dir holds each run's files (<Dir>/<id>/) and each submission's
	// inputs and record (<Dir>/batches/<id>/).
	Dir string
	// TasksDir holds the task files a submission may name; empty: none.
	TasksDir string
	// LLMURL and MCPURL are the LLM proxy's and the daemon's MCP
	// server's addresses as a sandbox reaches them.
	LLMURL, MCPURL string
	// Models, when set, returns the model names a task may use now (the
	// LLM proxy's configuration); none (nil, or an empty list: no proxy
	// configured) leaves models unchecked.
	Models func() []string
	// MaxParallel bounds the runs going at once, daemon-wide.
	MaxParallel int
	// ArtifactLimit bounds the bytes of artifacts kept per run;
	// OutputLimit the bytes of its output log and of its event log.
	ArtifactLimit, OutputLimit int64
	// ReadyTimeout bounds the wait for a new sandbox to run.
	ReadyTimeout time.Duration
	// Tick is how often a run's liveness is checked (default: a twentieth
	// of its idle window, between 100ms and 2s).
	Tick time.Duration
	// Owner names this daemon among those sharing the store, in the
	// claims of the runs it carries out (store.Run.ClaimedBy): the same
	// name after a restart takes its runs back at once. Default: the
	// host's name and Dir.
	Owner string
	// Lease is how long a claim holds unless renewed (default
	// DefaultLease): the loop renews its claims every third of it, and
	// claims the runs whose lease lapsed, those of a daemon that died.
	Lease time.Duration
	// MaxAge is how long a run is kept once it ended: Expire removes the
	// runs that ended longer ago, records and files. 0: kept until
	// deleted.
	MaxAge time.Duration
}

func (c *Config) setDefaults() {
	if c.LLMURL == "" {
		c.LLMURL = DefaultLLMURL
	}
	if c.MCPURL == "" {
		c.MCPURL = DefaultMCPURL
	}
	if c.MaxParallel <= 0 {
		c.MaxParallel = DefaultMaxParallel
	}
	if c.ArtifactLimit <= 0 {
		c.ArtifactLimit = DefaultArtifactLimit
	}
	if c.OutputLimit <= 0 {
		c.OutputLimit = DefaultOutputLimit
	}
	if c.ReadyTimeout <= 0 {
		c.ReadyTimeout = DefaultReadyTimeout
	}
	if c.Lease <= 0 {
		c.Lease = DefaultLease
	}
	if c.Owner == "" {
		host, _ := os.Hostname()
		c.Owner = host + ":" + c.Dir
	}
}

// Sandboxes is what the runner needs of the sandbox service
// (service.Sandboxes), api types in and out: the sandbox rules (admission,
// paths, exec limits) are the service's and the manager's, not the
// runner's.
type Sandboxes interface {
	CreateManaged(ctx context.Context, req service.ManagedRequest) (*api.Sandbox, error)
	// CheckManaged refuses a request CreateManaged could never fulfil.
	CheckManaged(ctx context.Context, req service.ManagedRequest) error
	WaitRunning(ctx context.Context, id string) (*api.Sandbox, error)
	Get(ctx context.Context, id string) (*api.Sandbox, error)
	Delete(ctx context.Context, id string) error
	// CheckDead fails a running sandbox whose runtime side has died;
	// Start starts one again that died keeping its files (for runs:
	// manager.Config.KeepDeadFiles holds ManagedBy).
	CheckDead(ctx context.Context, id string) (*api.Sandbox, error)
	Start(ctx context.Context, id string) (*api.Sandbox, error)
	Ping(ctx context.Context, id string) error
	ExecStream(ctx context.Context, id string, req api.ExecRequest, start func(), emit func(api.ExecEvent) error) (api.ExecEvent, error)
	// StartFollowProc, FollowProc and KillProc run the agent as a
	// background process of its sandbox, which outlives the daemon.
	StartFollowProc(ctx context.Context, id string, req service.ProcRequest, pio service.ProcIO, started func(service.ProcDetail) error, out service.TerminalOutput) (service.ProcOutputResult, error)
	FollowProc(ctx context.Context, id, pid string, since int64, out service.TerminalOutput) (service.ProcOutputResult, error)
	KillProc(ctx context.Context, id, pid string) (service.Proc, error)
	Upload(ctx context.Context, id, p string, mode fs.FileMode, r io.Reader) (*api.FileInfo, error)
	Download(ctx context.Context, id, p string) (io.ReadCloser, int64, error)
	Mkdir(ctx context.Context, id, p string) error
	Stat(ctx context.Context, id, p string) (*service.FileStat, error)
	ReadDir(ctx context.Context, id, dir string) ([]service.FileStat, error)
	// CPUTime is the CPU time the sandbox's processes used, when the
	// runtime measures it: a liveness signal.
	CPUTime(ctx context.Context, id string) (time.Duration, bool)
}

var _ Sandboxes = (*service.Sandboxes)(nil)

// LLMUsage is what the LLM proxy counted for a run, when it counts.
type LLMUsage interface {
	// RunUsage returns the model calls and tokens of run id (made from
	// sandbox sandboxID) and the archive's ids of its conversations,
	// first started first, or false when the proxy knows nothing of it.
	RunUsage(ctx context.Context, id, sandboxID string) (api.RunLLMUsage, []string, bool)
}

// Option configures a Service.
type Option func(*Service)

// WithLLMUsage makes results take their tokens from the LLM proxy.
func WithLLMUsage(u LLMUsage) Option { return func(s *Service) { s.llm = u } }

// WithNotifier makes the service tell the other daemons of its store of
// its runs' events, and follow through it the runs another daemon
// carries out (remote.go).
func WithNotifier(n store.Notifier) Option {
	return func(s *Service) { s.notes, s.pub = n, make(chan []byte, pubBuffer) }
}

// WithClock makes the service read the time of its records from now
// (tests); liveness and timings use the monotonic clock.
func WithClock(now func() time.Time) Option { return func(s *Service) { s.now = now } }

// Service runs tasks. See the package comment.
type Service struct {
	cfg   Config
	sbx   Sandboxes
	store store.Runs
	log   *slog.Logger
	now   func() time.Time
	llm   LLMUsage      // nil: tokens as the agent reports them
	slots chan struct{} // the daemon-wide MaxParallel
	// notes carries run events between the daemons of the store, nil:
	// none; pub holds the events waiting to be sent (remote.go).
	notes store.Notifier
	pub   chan []byte

	mu sync.Mutex
	// queue holds submitted batches until the Run loop takes them; wake
	// tells it there are some.
	queue []*batch
	wake  chan struct{}
	// resumed holds the runs a previous daemon left that this one carries
	// on (carryOn), until the Run loop takes them.
	resumed []*job
	// jobs are the runs this process was given and has not ended, by id
	// (from Submit).
	jobs map[string]*job
	// bySandbox maps a running run's sandbox to the run.
	bySandbox map[string]string
	// logs are the event logs of the runs not ended, by run id.
	logs map[string]*eventLog
	// batches are the submissions whose files this process uses, by id
	// (from Submit, and recovery's re-queued ones).
	batches map[string]bool
	// recoverOnce recovers the runs of a previous daemon at the first Run.
	recoverOnce sync.Once
	// renewed is when the Run loop last renewed this daemon's claims.
	renewed time.Time
}

// New returns the runner over sbx and st. It starts nothing: call Run.
func New(cfg Config, sbx Sandboxes, st store.Runs, log *slog.Logger, opts ...Option) (*Service, error) {
	cfg.setDefaults()
	if cfg.Dir == "" {
		return nil, errors.New("run service: no directory for runs")
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("create the runs directory: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	s := &Service{
		cfg: cfg, sbx: sbx, store: st, log: log, now: time.Now,
		slots: make(chan struct{}, cfg.MaxParallel), wake: make(chan struct{}, 1),
		jobs: map[string]*job{}, bySandbox: map[string]string{}, logs: map[string]*eventLog{}, batches: map[string]bool{},
	}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// newID returns a new random id with prefix.
func newID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// runDir is where run id keeps its files.
func (s *Service) runDir(id string) string { return filepath.Join(s.cfg.Dir, id) }

// result is the runner's part of a run record (store.Run.Result).
type result struct {
	Timings            map[string]float64 `json:"timings_ms,omitempty"`
	LLM                api.RunLLMUsage    `json:"llm"`
	ConversationID     string             `json:"conversation_id,omitempty"`
	ConversationIDs    []string           `json:"conversation_ids,omitempty"`
	OutputTail         []string           `json:"output_tail,omitempty"`
	Artifacts          []api.RunArtifact  `json:"artifacts,omitempty"`
	ArtifactsTruncated bool               `json:"artifacts_truncated,omitempty"`
	ArtifactsError     string             `json:"artifacts_error,omitempty"`
}

// view is a run record as the API shows it.
func view(r *store.Run) *api.Run {
	out := &api.Run{
		ID: r.ID, BatchID: r.BatchID, Task: r.Task, Agent: r.Agent, Model: r.Model, Repeat: r.Repeat,
		Status: api.RunStatus(r.Status), Phase: r.Phase, Reason: r.Reason, ExitCode: r.ExitCode,
		SandboxID: r.SandboxID, CreatedAt: r.CreatedAt, StartedAt: r.StartedAt, EndedAt: r.EndedAt,
	}
	var res result
	if len(r.Result) > 0 && json.Unmarshal(r.Result, &res) == nil {
		out.Timings, out.LLM, out.ConversationID, out.ConversationIDs = res.Timings, res.LLM, res.ConversationID, res.ConversationIDs
		out.OutputTail, out.Artifacts, out.ArtifactsTruncated, out.ArtifactsError = res.OutputTail, res.Artifacts, res.ArtifactsTruncated, res.ArtifactsError
	}
	return out
}

// runErr classifies a store error about run id.
func runErr(err error, id string) error {
	if errors.Is(err, errdefs.ErrNotFound) {
		return errdefs.NotFound("run %s not found", id)
	}
	return err
}

// get returns the record of run id if the tenant of ctx (auth.TenantOf)
// submitted it: another tenant's run is ErrNotFound, as one that does not
// exist. The runner's own lookups read the store: they see every run.
func (s *Service) get(ctx context.Context, id string) (*store.Run, error) {
	r, err := s.store.GetRun(ctx, id)
	if err == nil && r.Tenant != auth.TenantOf(ctx) {
		err = errdefs.ErrNotFound
	}
	if err != nil {
		return nil, runErr(err, id)
	}
	return r, nil
}

// Get returns run id; ErrNotFound if there is none, or the tenant of ctx
// did not submit it.
func (s *Service) Get(ctx context.Context, id string) (*api.Run, error) {
	r, err := s.get(ctx, id)
	if err != nil {
		return nil, err
	}
	return view(r), nil
}

// ListOptions selects a page of runs.
type ListOptions struct {
	// BatchID selects one submission's runs.
	BatchID string
	// Statuses, when not empty, selects the runs in one of them.
	Statuses []api.RunStatus
	// Agents, when not empty, selects the runs of one of them (names of
	// task.Agents); Models those of one of these models, by the name the
	// run records.
	Agents, Models []string
	// Limit is the most runs a page holds, from 1 to api.MaxPageSize;
	// nil: all.
	Limit  *int
	Cursor string
	// Order is the list's order: "" or api.OrderAsc oldest first,
	// api.OrderDesc newest first.
	Order api.Order
}

// List returns a page of the runs the tenant of ctx submitted, oldest
// first unless opts.Order says otherwise, of opts.Statuses, opts.Agents
// and opts.Models when they name some: the store selects them, so a page
// of a rare status or agent costs what any page does.
func (s *Service) List(ctx context.Context, opts ListOptions) (*api.RunList, error) {
	p, err := service.Page(opts.Limit, opts.Cursor, opts.Order)
	if err != nil {
		return nil, err
	}
	f := store.RunFilter{BatchID: opts.BatchID, Agents: opts.Agents, Models: opts.Models, ByTenant: true, Tenant: auth.TenantOf(ctx)}
	for _, st := range opts.Statuses {
		f.Statuses = append(f.Statuses, string(st))
	}
	recs, next, err := s.store.ListRunPage(ctx, f, p)
	if err != nil {
		return nil, err
	}
	out := &api.RunList{Items: make([]api.Run, 0, len(recs)), NextCursor: next}
	for _, r := range recs {
		out.Items = append(out.Items, *view(r))
	}
	return out, nil
}

// Cancel ends run id as cancelled: a queued run at once, a running one
// once its agent and sandbox are stopped and its artifacts collected
// (Cancel returns before), by the daemon of the store that carries it
// out (cancelElsewhere). A cancelled run is returned as it is; one that
// ended otherwise is ErrFailedPrecondition naming its status, as it did
// not end cancelled; another tenant's is ErrNotFound.
func (s *Service) Cancel(ctx context.Context, id string) (*api.Run, error) {
	rec, err := s.get(ctx, id)
	if err != nil {
		return nil, err
	}
	// Ended otherwise (its job may still be finishing: its artifacts,
	// its sandbox): it cannot end cancelled.
	if st := api.RunStatus(rec.Status); st.Final() && st != api.RunCancelled {
		return nil, errdefs.Precondition("run %s is %s: it has ended", id, st)
	}
	if s.cancelJob(id) {
		return s.Get(ctx, id)
	}
	// Queued and not started (here or by a previous daemon): it ends now;
	// its batch skips it.
	r, err := s.store.UpdateRun(ctx, id, func(r *store.Run) error {
		if r.Status != string(api.RunQueued) {
			return errNoChange
		}
		now := s.now().UTC()
		r.Status, r.Phase, r.Reason, r.UpdatedAt, r.EndedAt = string(api.RunCancelled), api.PhaseDone, reasonCancelled, now, &now
		return nil
	})
	switch {
	case errors.Is(err, errNoChange):
		// It started meanwhile: its job, which set its stop before its
		// record left queued, stops now.
		if s.cancelJob(id) {
			return s.Get(ctx, id)
		}
		rec, err := s.get(ctx, id)
		if err != nil {
			return nil, err
		}
		if st := api.RunStatus(rec.Status); st.Final() && st != api.RunCancelled {
			return nil, errdefs.Precondition("run %s is %s: it has ended", id, st)
		}
		if err := s.cancelElsewhere(ctx, rec); err != nil {
			return nil, err
		}
		return view(rec), nil
	case err != nil:
		return nil, runErr(err, id)
	}
	s.endLog(id, api.RunCancelled, reasonCancelled)
	return view(r), nil
}

// cancelJob cancels run id's job here, if it has started and not ended.
func (s *Service) cancelJob(id string) bool {
	s.mu.Lock()
	j := s.jobs[id]
	s.mu.Unlock()
	return j != nil && j.cancel(errCancelled)
}

// errNoChange aborts a store update that has nothing to do; errClaimed
// the start of a run another daemon has claimed.
var (
	errNoChange = errors.New("no change")
	errClaimed  = errors.New("claimed by another daemon")
)

// Progress records that a model call of c made progress now (the LLM
// proxy's gate.Config.Progress, the runner's liveness): the progress of
// the run going on in the sandbox it came from when it came on a
// sandbox's channel, whatever run the sandbox's environment claims, else
// of the run of its per-run key. An unknown or ended run is ignored.
func (s *Service) Progress(c caller.Caller) {
	s.mu.Lock()
	id := c.Run
	if c.Sandbox != "" {
		id = s.bySandbox[c.Sandbox]
	}
	j := s.jobs[id]
	s.mu.Unlock()
	if j != nil {
		j.touch()
	}
}

// RunOfSandbox returns the id of the run going on in sandbox id, if any
// (for the LLM proxy, which knows its callers by sandbox).
func (s *Service) RunOfSandbox(sandboxID string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.bySandbox[sandboxID]
	return id, ok
}
