// Package manager owns the sandbox lifecycle: it turns API requests into
// records (package store) and runtime calls (sandbox.Runtime, which also
// prepares images), keeps them consistent across failures and restarts,
// and expires sandboxes whose TTL has run out.
//
// A sandbox is created from an image or a template version (Resolve of
// package template): its files put in place, its startup script run, its
// main process started and its readiness probe passed before it is
// running. Then exec, files and logs, stop, start, restart, pause and
// resume (pause.go: its processes frozen in memory, its TTL running on)
// and delete. A request the runtime cannot honour (its Capabilities:
// persistence, storage and runtime classes, files kept across a stop,
// pause) is refused before anything is made, naming the field.
//
// Every create and every start of a stopped sandbox, whoever asks (the
// API, contexts, sessions, warm pools' refills), passes one admission
// check (capacity.go): past Config.MaxSandboxes it is 429
// RESOURCE_LIMIT; past the host's cpu or memory times the overcommit
// factors, counting the limits of pending, running and paused sandboxes,
// warm pools' included, 507 INSUFFICIENT_CAPACITY; while the data dir's
// file system has less than Config.DiskReserve free, 507 NO_SPACE; the
// bodies carry the usage and a suggestion. A sandbox made on behalf of another (auth.OwnerOf: a
// session or context its code made through the daemon's MCP server) is
// owned by it: admitted against the owner's size (Config.Owned), never
// taken from a warm pool, and deleted with its owner or, once the owner is
// gone, by the sweep (owned.go).
//
// Run, the sweep, reconciles the records with one List of the runtime
// every second: it expires sandboxes past their TTL, ends template
// sandboxes whose main process exited, and fails running sandboxes whose
// runtime side died (with the runtime's reason: evicted, OOM-killed),
// releasing what the runtime holds for them: all of it, or all but their
// files for the services named in Config.KeepDeadFiles (the task runner),
// which collect from them; and it settles, as Recover does, pending
// sandboxes whose maker is gone: whoever makes a sandbox (a create, a
// restore, a start again) claims it from before its record is pending
// until it is no longer, among the daemons of a shared store too, so a
// pending sandbox no one claims was left by a daemon that stopped or
// died. Recover, at start, re-adopts running
// sandboxes, fails records whose sandbox is gone, finishes interrupted
// deletions and deletes runtime state no record refers to; since a record
// is written before the runtime state and deleted after it, that leaves
// no leak whenever the daemon died. A request that changes what runs
// (stop, pause, resume, a snapshot that stops) leaves the sandbox as it was
// when its record cannot be written (control.go: stopAs; pause.go), and a
// start that fails keeps the sandbox's files: a failed request takes
// nothing from a sandbox.
//
// Every operation on one sandbox id is serialized by a per-id lock (package
// keyedlock), among the daemons of a shared store too (WithSharedLocks);
// no lock spans sandboxes, and creates are bounded by the
// store's atomic count-and-insert. The store is the source of truth for what
// exists, the runtime for what runs.
package manager

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/keyedlock"
	"github.com/agent2env/agent2env/internal/metrics"
	"github.com/agent2env/agent2env/internal/netguard"
	"github.com/agent2env/agent2env/internal/outbuf"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/store"
)

// Config holds the manager's defaults and limits.
type Config struct {
	DefaultCPU    string // e.g. "1"
	DefaultMemory string // e.g. "1Gi"
	DefaultTTL    int    // seconds; 0 = never expire
	DefaultDisk   int64  // bytes of writable storage per sandbox
	DefaultPids   int64
	// MaxSandboxes bounds the sandboxes that exist at once, whatever made
	// them (0: no bound). Past it a create is 429 RESOURCE_LIMIT.
	MaxSandboxes int
	// Host is the machine's cpu and memory (zero: this machine's). Times
	// CPUOvercommit and MemoryOvercommit (defaults 16 and 2: idle
	// sandboxes use little of either) it is the capacity that the limits
	// of pending, running and paused sandboxes may add up to; past it a create,
	// or a start, is 507 INSUFFICIENT_CAPACITY.
	Host                            Host
	CPUOvercommit, MemoryOvercommit float64
	// ExecOutputLimit bounds the stdout and stderr kept by a buffered exec.
	ExecOutputLimit int
	// OutputBudget bounds the output that all buffered executions hold at
	// once, in bytes (default outbuf.DefaultBudget, 256 MiB), shared
	// fairly among sandboxes (see package outbuf); past it output is
	// dropped and the result says truncated.
	OutputBudget int64
	// StartTimeout bounds image preparation plus sandbox start.
	StartTimeout time.Duration
	// KeepDeadFiles names the services (CreateRequest.ManagedBy) that
	// collect what they need from their sandboxes that die: where the
	// runtime's Stop keeps files (Capabilities.StopKeepsFiles), such a
	// sandbox is released by a Stop rather than deleted, and may be
	// started again (Start) until its owner deletes it. The dead
	// sandboxes of others are deleted at once.
	KeepDeadFiles []string
	// Owned bounds the sandboxes each sandbox's code makes through the
	// daemon's services (see OwnedLimits).
	Owned OwnedLimits
	// SnapshotDir holds the snapshots' files, one directory each (see
	// Snapshot); empty: snapshots are refused.
	SnapshotDir string
	// DiskDir is a directory on the file system that holds the runtime's
	// sandbox disks and the store (the daemon's data dir). While it has
	// fewer than DiskReserve bytes free, a create or a start is 507
	// NO_SPACE (see checkDisk). Either zero: not checked.
	DiskDir     string
	DiskReserve int64
}

func (c *Config) setDefaults() {
	if c.DefaultCPU == "" {
		c.DefaultCPU = "1"
	}
	if c.DefaultMemory == "" {
		c.DefaultMemory = "1Gi"
	}
	if c.DefaultDisk == 0 {
		c.DefaultDisk = 1 << 30
	}
	if c.DefaultPids == 0 {
		c.DefaultPids = 512
	}
	if c.ExecOutputLimit == 0 {
		c.ExecOutputLimit = 10 << 20
	}
	if c.OutputBudget == 0 {
		c.OutputBudget = outbuf.DefaultBudget
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 15 * time.Minute
	}
	if c.Host == (Host{}) {
		c.Host = ReadHost()
	}
	if c.CPUOvercommit <= 0 {
		c.CPUOvercommit = 16
	}
	if c.MemoryOvercommit <= 0 {
		c.MemoryOvercommit = 2
	}
	c.Owned.setDefaults()
}

// Manager is safe for concurrent use.
type Manager struct {
	cfg   Config
	rt    sandbox.Runtime
	store store.Store
	log   *slog.Logger
	now   func() time.Time
	// outputs is what buffered executions' output may take.
	outputs *outbuf.Budget
	// freeSpace returns the bytes free to unprivileged users on the file
	// system of a path (statfs, or a test's).
	freeSpace func(path string) (int64, error)

	locks keyedlock.Shared // by sandbox id; among daemons too with WithSharedLocks
	// makers claims each sandbox while it is pending for whoever makes it
	// (create, restore, start again), from before its record is pending
	// until it is no longer or its maker has ended; a pending sandbox no
	// one claims is one whose maker is gone (reclaim).
	makers keyedlock.Claims
	// snapshots keeps a snapshot's deletion from its restores.
	snapshots snapshotUses
	// admitMu serializes admission (admit) with what commits what was
	// admitted: the new record's reservation (reserved), or for an owned
	// sandbox the stored record.
	admitMu sync.Mutex
	// reserved are the records admitted and not stored yet.
	reserved reservations
	// usageReads numbers admit's reads of Usage; bound, guarded by
	// admitMu, is the last one plus what was admitted since.
	usageReads atomic.Uint64
	bound      usageBound
	templates  TemplateResolver
	pool       WarmPool
	metrics    *metrics.Metrics // nil: none recorded
	// removed is told of every sandbox whose record is deleted (nil:
	// no one is).
	removed func(ctx context.Context, id string)
	// fetcher downloads template files' sources.
	fetcher *netguard.Fetcher
	// starting holds the cancel func of each startup in progress, so that
	// Delete can end it.
	starting sync.Map // id -> context.CancelFunc
	// full holds the sweep back while the store's disk is full.
	full storeFull
	// bg tracks background work (image preparation, starts) so Close can
	// wait for it.
	bg       sync.WaitGroup
	bgCtx    context.Context
	bgCancel context.CancelFunc
}

// New returns a Manager. Call Recover before serving requests and Run to
// expire sandboxes.
func New(cfg Config, rt sandbox.Runtime, st store.Store, log *slog.Logger, opts ...Option) *Manager {
	cfg.setDefaults()
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{cfg: cfg, rt: rt, store: st, log: log, now: time.Now, freeSpace: freeSpace,
		outputs: outbuf.NewBudget(cfg.OutputBudget), bgCtx: ctx, bgCancel: cancel}
	for _, o := range opts {
		o(m)
	}
	if m.fetcher == nil {
		m.fetcher = netguard.NewFetcher(netguard.FetchConfig{Guard: netguard.Must(netguard.New(netguard.Config{Subject: sourceSubject}))})
	}
	return m
}

// Close cancels background work and the starts in flight (startContext),
// and waits for them to end.
func (m *Manager) Close() {
	m.bgCancel()
	m.bg.Wait()
}

// WithSharedLocks makes the per-sandbox locks hold among the daemons that
// share the store too, through locks (on a store several daemons share):
// an operation on a sandbox through one daemon waits for another
// daemon's on it; and the claims of the sandboxes being made, through
// makers: the leader's sweep settles a pending sandbox whose maker,
// whichever daemon it was on, is gone.
func WithSharedLocks(locks keyedlock.Remote, makers keyedlock.TryRemote) Option {
	return func(m *Manager) { m.locks.Remote, m.makers.Remote = locks, makers }
}

// claimMaking claims the making of sandbox id (makers) and returns its
// release; a sandbox someone else makes is ErrFailedPrecondition.
func (m *Manager) claimMaking(ctx context.Context, id string) (func(), error) {
	release, err := m.makers.TryLock(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", id, err)
	}
	if release == nil {
		return nil, errdefs.WithCode(errdefs.Precondition("sandbox %s is being made or started by another request", id), api.CodeConflict)
	}
	return release, nil
}

// lockRetryMax bounds the wait between tries of a shared lock the store
// failed to give.
const lockRetryMax = 5 * time.Second

// lock takes sandbox id's lock and returns its release. A shared lock the
// store fails to give is asked for again until it is given: an operation
// on the sandbox waits, rather than going on unguarded, while the store
// is away (its own writes would fail then too).
func (m *Manager) lock(id string) func() {
	for delay := 50 * time.Millisecond; ; delay = min(2*delay, lockRetryMax) {
		unlock, err := m.locks.LockContext(context.Background(), id)
		if err == nil {
			return unlock
		}
		m.log.Warn("lock sandbox", "sandbox", id, "err", err, "retry_in", delay)
		time.Sleep(delay)
	}
}

// idAlphabet is the characters of the ids newID makes.
const idAlphabet = "abcdefghijklmnopqrstuvwxyz234567"

var idEncoding = base32.NewEncoding(idAlphabet).WithPadding(base32.NoPadding)

// newToken returns a fresh access token: 32 random bytes in hex.
func newToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// newID returns a fresh 12-character sandbox id.
func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return idEncoding.EncodeToString(b[:])[:12]
}

// event records a status change or occurrence; failing to record it is
// logged, never fatal to the operation that caused it.
func (m *Manager) event(ctx context.Context, id, status, msg string) {
	err := m.store.AddEvent(context.WithoutCancel(ctx), store.Event{SandboxID: id, At: m.now().UTC(), Status: status, Message: msg})
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		m.log.Warn("record sandbox event", "sandbox", id, "err", err)
	}
}

// setStatus stores a new status with its reason and, in the same write,
// the event that records it.
func (m *Manager) setStatus(ctx context.Context, id string, status api.SandboxStatus, reason string) (*store.Sandbox, error) {
	return m.setStatusIf(ctx, id, status, reason, nil)
}

// setStatusIf is setStatus unless check, when not nil, refuses the record
// as it is at the write.
func (m *Manager) setStatusIf(ctx context.Context, id string, status api.SandboxStatus, reason string, check func(*store.Sandbox) error) (*store.Sandbox, error) {
	now := m.now().UTC()
	refused := false
	sb, err := m.store.UpdateSandbox(context.WithoutCancel(ctx), id, func(sb *store.Sandbox) error {
		if check != nil {
			if err := check(sb); err != nil {
				refused = true
				return err
			}
		}
		sb.Status, sb.Reason, sb.UpdatedAt = string(status), reason, now
		return nil
	}, store.Event{At: now, Status: string(status), Message: reason})
	switch {
	case err == nil:
		return sb, nil
	case refused || errors.Is(err, errdefs.ErrNotFound):
		// An answer about the sandbox (none has id, or check refused
		// it), which the caller's request meets: not a step of its
		// own to name ("set sandbox %s terminating").
		return nil, err
	}
	return nil, fmt.Errorf("set sandbox %s %s: %w", id, status, err)
}

// Get returns the sandbox id. One waiting in a warm pool is not found, as
// it is not listed: it is no one's until it is claimed. Every operation on
// a sandbox by id finds it here.
func (m *Manager) Get(ctx context.Context, id string) (*store.Sandbox, error) {
	sb, err := m.get(ctx, id)
	if err == nil {
		err = notPooled(sb)
	}
	if err != nil {
		return nil, err
	}
	return sb, nil
}

// get returns the sandbox id, pooled or not.
func (m *Manager) get(ctx context.Context, id string) (*store.Sandbox, error) {
	sb, err := m.store.GetSandbox(ctx, id)
	return sb, sandboxErr(err)
}

// notPooled refuses sb while it waits in a warm pool, as not found
// (SANDBOX_NOT_FOUND).
func notPooled(sb *store.Sandbox) error {
	if sb.Pool != "" {
		return errdefs.WithCode(errdefs.NotFound("sandbox %s not found", sb.ID), api.CodeSandboxNotFound)
	}
	return nil
}

// List returns every sandbox clients asked for, oldest first: not those
// waiting in a warm pool.
func (m *Manager) List(ctx context.Context) ([]*store.Sandbox, error) {
	out, _, err := m.ListPage(ctx, store.Page{})
	return out, err
}

// ListPage returns page p of what List returns, and the cursor of the next
// page ("" after the last); a cursor that is not one is ErrInvalidArgument.
func (m *Manager) ListPage(ctx context.Context, p store.Page) ([]*store.Sandbox, string, error) {
	return m.ListFiltered(ctx, store.SandboxFilter{}, p)
}

// ListFiltered is ListPage of the sandboxes f selects (never those in
// warm pools, whatever f says).
func (m *Manager) ListFiltered(ctx context.Context, f store.SandboxFilter, p store.Page) ([]*store.Sandbox, string, error) {
	f.ExcludePooled = true
	return m.store.ListSandboxPage(ctx, f, p)
}

// Count counts the sandboxes f selects, not those in warm pools.
func (m *Manager) Count(ctx context.Context, f store.SandboxFilter) (int, error) {
	f.ExcludePooled = true
	return m.store.CountSandboxes(ctx, f)
}

// sandboxErr gives not-found errors the sandbox code.
func sandboxErr(err error) error {
	if errors.Is(err, errdefs.ErrNotFound) && errdefs.Code(err) == "" {
		return errdefs.WithCode(err, api.CodeSandboxNotFound)
	}
	return err
}

// running returns the sandbox if it is running, else a precondition error.
func (m *Manager) running(ctx context.Context, id string) (*store.Sandbox, error) {
	sb, err := m.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := notRunning(sb, errdefs.Precondition); err != nil {
		return nil, err
	}
	return sb, nil
}

// notRunning is the error, of class (an errdefs constructor), of a
// request that needs sandbox sb running, or nil when it runs.
func notRunning(sb *store.Sandbox, class func(format string, args ...any) error) error {
	if sb.Status == string(api.StatusRunning) {
		return nil
	}
	msg := fmt.Sprintf("sandbox %s is %s, not running", sb.ID, sb.Status)
	if sb.Status == string(api.StatusPaused) {
		msg += ": resume it first"
	} else if sb.Reason != "" {
		msg += ": " + sb.Reason
	}
	// The details let a client name its own way to start or resume the
	// sandbox, which the message cannot know.
	err := errdefs.WithCode(class("%s", msg), api.CodeSandboxNotReady)
	return errdefs.WithDetails(err, map[string]any{"sandbox_id": sb.ID, "status": sb.Status})
}

// Agent returns a client for a running sandbox's agent.
func (m *Manager) Agent(ctx context.Context, id string) (*agent.Client, error) {
	if _, err := m.running(ctx, id); err != nil {
		return nil, err
	}
	return m.RunningAgent(ctx, id)
}

// PooledAgent returns a client for the agent of sandbox id while it waits
// in a warm pool, for its pool (Agent does not find it); one claimed
// meanwhile is ErrFailedPrecondition.
func (m *Manager) PooledAgent(ctx context.Context, id string) (*agent.Client, error) {
	sb, err := m.get(ctx, id)
	if err != nil {
		return nil, err
	}
	if sb.Pool == "" || sb.Status != string(api.StatusRunning) {
		return nil, errdefs.Precondition("sandbox %s is not a running pooled sandbox", id)
	}
	return m.RunningAgent(ctx, id)
}

// RunningAgent returns a client for the agent of sandbox id, which the
// caller has just read from the store and found running (an access check
// of the same request): Agent without its store read. The runtime still
// answers ErrNotFound for a sandbox it no longer has.
func (m *Manager) RunningAgent(ctx context.Context, id string) (*agent.Client, error) {
	c, err := m.rt.Agent(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("reach agent of sandbox %s: %w", id, err)
	}
	c.SetExplain(func() error { return m.whyUnreachable(id) })
	return c, nil
}

// whyUnreachable says why sandbox id's agent broke off an exchange when
// its record does: the sandbox was stopped or deleted meanwhile (the
// record changes before the runtime acts). The error stays an
// ErrUnavailable, which is what the daemon's own code acts on (a context
// answers that its sandbox is gone), with the wire code a request made
// after the stop or delete gets: its caller hears why, and not a 503
// that is worth a retry which would find no sandbox.
func (m *Manager) whyUnreachable(id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sb, err := m.get(ctx, id)
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		return errdefs.WithCode(errdefs.Unavailable("sandbox %s was deleted", id), api.CodeSandboxNotFound)
	case err != nil:
		return nil
	}
	return notRunning(sb, errdefs.Unavailable)
}

// keepsFiles reports whether dead sandbox sb keeps its files for its
// owner (Config.KeepDeadFiles).
func (m *Manager) keepsFiles(sb *store.Sandbox) bool {
	return sb.ManagedBy != "" && slices.Contains(m.cfg.KeepDeadFiles, sb.ManagedBy) && m.rt.Capabilities().StopKeepsFiles
}

// ValidEnv rejects environment entries the kernel or a shell would choke on.
func ValidEnv(env map[string]string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return errdefs.Invalid("env %q: names must be non-empty without '=' or NUL, values without NUL", k)
		}
	}
	return nil
}
