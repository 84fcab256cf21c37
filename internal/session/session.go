// Package session is the sessions service: a session is a
// sandbox that requests name by an id of the client's choosing, with one
// live kernel per language (contexts of package contexts), made on first
// use and removed once idle. It is transport-neutral: REST (package
// httpapi) and MCP (package mcpserver) call the same methods with the same
// api types.
//
// A request that executes or writes makes its session: naming none, under
// a generated id; naming an unknown id, under that id, never an error;
// concurrent first requests with one id make one session. A read (a file
// read or list, Get) makes none: an unknown id is SESSION_NOT_FOUND. A
// failed request leaves no session it made. A session's idle clock starts
// when its last request finishes, so nothing running is ever reaped; an
// absolute lifetime bounds it all the same. Sessions are scoped by tenant
// (the API key, see auth.WithTenant): one key cannot reach another's session by
// its id. A context's session_name is a session too: this service gives
// the contexts service their sandbox (it implements contexts.Sessions).
//
// A session is made with a flavor (small, medium, large: its cpu and
// memory), keeps its kernels as long as it lives, and a keep-alive sets
// its idle timeout anew (KeepAlive); its sandbox mounts the operator's
// shared volumes, each session its own subdirectory unless the volume is
// common (volumes.go). Its sandbox is admitted by the manager like any
// other: a refusal (429 past the sandbox count, 507 past the host's
// capacity) is given the sessions' counts and advice for sessions
// (limits.go). Stats counts sessions, sandboxes, cpu and memory and
// execution latencies.
//
// Records (package store) are written after the sandbox they refer to and
// go with it (store cascade); what a crash leaves between the two is an
// orphan that Reap deletes after a grace period, with failed sandboxes past
// a retention and runtime state no record knows.
package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/contexts"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/keyedlock"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/outbuf"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/store"
)

// Sandboxes is what the service needs of the sandbox manager.
type Sandboxes interface {
	Get(ctx context.Context, id string) (*store.Sandbox, error)
	Delete(ctx context.Context, id string) error
	Agent(ctx context.Context, id string) (*agent.Client, error)
	Pause(ctx context.Context, id string) (*store.Sandbox, error)
	Resume(ctx context.Context, id string) (*store.Sandbox, error)
	ExecStream(ctx context.Context, id string, req manager.ExecRequest, stdout, stderr io.Writer) (agent.ExecResult, error)
	ValidateExec(req manager.ExecRequest) error
	// OutputBudget is the daemon's output budget, which commands' output
	// is kept within.
	OutputBudget() *outbuf.Budget
	Upload(ctx context.Context, id, p string, mode os.FileMode, r io.Reader) (agent.FileInfo, error)
	Download(ctx context.Context, id, p string) (io.ReadCloser, int64, error)
	ReapLeftovers(ctx context.Context) (int, error)
	Usage(ctx context.Context) (api.Usage, error)
}

// Store is what the service keeps its records in.
type Store interface {
	store.Sessions
	store.Contexts
	GetSandbox(ctx context.Context, id string) (*store.Sandbox, error)
	ListSandboxPage(ctx context.Context, f store.SandboxFilter, p store.Page) ([]*store.Sandbox, string, error)
	CountSandboxesByStatus(ctx context.Context) (store.SandboxCounts, error)
}

// ManagedBy marks the sandboxes the service makes.
const ManagedBy = "sessions"

// Service is safe for concurrent use.
type Service struct {
	cfg   Config
	sbx   Sandboxes
	store Store
	ctxs  *contexts.Service
	log   *slog.Logger
	now   func() time.Time
	// usageReader measures sandboxes' use for Stats; nil measures none.
	usageReader sandbox.UsageReader
	// warmPools reports on the warm pools for Stats; nil: there are none.
	warmPools func() []api.WarmPool

	// locks serializes what changes one session (its making, reuse and
	// removal); kernels serializes the start of one language's kernel in
	// one session. Both hold among the daemons of a shared store when
	// given their Remote (WithSharedLocks).
	locks, kernels keyedlock.Shared

	mu sync.Mutex
	// active holds the sessions with requests running in them.
	active map[string]*activity
	execs  recorder
}

// activity is what runs in one session now, and what has run since its
// record was last written.
type activity struct {
	busy       int
	executions int
	errors     int
	elapsed    time.Duration
}

// Option configures a Service.
type Option func(*Service)

// WithSharedLocks locks sessions (in sessions) and their kernels (in
// kernels) among the daemons sharing the store too, so that two daemons
// never make one session twice, nor two kernels of one language in it.
func WithSharedLocks(sessions, kernels keyedlock.Remote) Option {
	return func(s *Service) { s.locks.Remote, s.kernels.Remote = sessions, kernels }
}

// WithClock makes the service read the time from now (tests).
func WithClock(now func() time.Time) Option { return func(s *Service) { s.now = now } }

// New returns the service. The contexts service places contexts with a
// session name through it once given it (contexts.Service.SetSessions),
// which the daemon does right after New.
func New(cfg Config, sbx Sandboxes, st Store, ctxs *contexts.Service, log *slog.Logger, opts ...Option) (*Service, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	s := &Service{cfg: cfg, sbx: sbx, store: st, ctxs: ctxs, log: log, now: time.Now, active: map[string]*activity{}}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// MaxIDBytes bounds a session id.
const MaxIDBytes = 128

// CheckID refuses session ids that are empty, too long, or have '/',
// white space or control characters (they appear in paths and logs).
func CheckID(id string) error {
	if id == "" || len(id) > MaxIDBytes {
		return errdefs.Invalid("session id must have 1 to %d bytes", MaxIDBytes)
	}
	if strings.ContainsFunc(id, func(r rune) bool { return r == '/' || unicode.IsSpace(r) || !unicode.IsPrint(r) }) {
		return errdefs.Invalid("session id %q must not contain '/', white space or control characters", id)
	}
	if id == "." || id == ".." { // no URL path could name it
		return errdefs.Invalid("session id %q is not a name", id)
	}
	return nil
}

// NewID returns a fresh session id.
func NewID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "ses-" + hex.EncodeToString(b[:])
}

// notFound is the error of a session that does not exist.
func notFound(id string) error {
	return errdefs.WithCode(errdefs.NotFound("session %s not found", id), api.CodeSessionNotFound)
}

// lease is one request's hold on a session: the session is busy until
// release.
type lease struct {
	s       *Service
	sess    *store.Session
	sandbox *store.Sandbox
	created bool
	warm    contexts.Warm // a warm kernel not yet adopted
	once    sync.Once
}

// openRequest is how to make a session that does not exist.
type openRequest struct {
	id       string
	flavor   string
	language string // of the warm kernel to take
	template string
	// sandboxID binds a new session to an existing sandbox it does not
	// own (a context create naming both).
	sandboxID string
	// existing takes only a session that exists with its sandbox running,
	// and makes or removes none: SESSION_NOT_FOUND else (a read).
	existing bool
}

// open returns a lease on the session id of ctx's tenant, making the
// session when it does not exist (or its sandbox is gone) unless
// r.existing.
func (s *Service) open(ctx context.Context, r openRequest) (*lease, error) {
	if r.id == "" {
		r.id = NewID()
	} else if err := CheckID(r.id); err != nil {
		return nil, err
	}
	flavor, err := s.cfg.flavor(r.flavor)
	if err != nil {
		return nil, err
	}
	key := store.SessionKey(auth.TenantOf(ctx), r.id)
	unlock, err := s.locks.LockContext(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("wait for session %s: %w", r.id, err)
	}
	defer unlock()
	sess, err := s.store.GetSession(ctx, key)
	switch {
	case err == nil:
		sb, err := s.wake(ctx, sess)
		if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return nil, err
		}
		if err == nil && sb.Status == string(api.StatusRunning) {
			if r.sandboxID != "" && r.sandboxID != sb.ID {
				return nil, errdefs.Invalid("session %s is in sandbox %s, not %s", r.id, sb.ID, r.sandboxID)
			}
			s.enter(key)
			s.log.Debug("session reused", "session", r.id, "sandbox", sb.ID)
			return &lease{s: s, sess: sess, sandbox: sb}, nil
		}
		if r.existing { // the next request that may make it starts it again
			return nil, errdefs.WithCode(errdefs.NotFound("session %s has no running sandbox", r.id), api.CodeSessionNotFound)
		}
		// Its sandbox failed or went: the session starts again.
		s.remove(context.WithoutCancel(ctx), sess, "its sandbox is not running")
	case !errors.Is(err, errdefs.ErrNotFound):
		return nil, err
	case r.existing:
		return nil, notFound(r.id)
	}
	l, err := s.create(ctx, key, r, flavor)
	if err != nil {
		return nil, err
	}
	s.enter(key)
	return l, nil
}

// wake returns the sandbox of session sess, resumed first if it is paused
// (by Config.PauseAfter, or by its owner). The caller holds the session's
// lock.
func (s *Service) wake(ctx context.Context, sess *store.Session) (*store.Sandbox, error) {
	sb, err := s.sbx.Get(ctx, sess.SandboxID)
	if err != nil || sb.Status != string(api.StatusPaused) {
		return sb, err
	}
	if sb, err = s.sbx.Resume(ctx, sb.ID); err != nil {
		return nil, fmt.Errorf("resume the sandbox of session %s: %w", sess.ID, err)
	}
	s.log.Debug("session resumed", "session", sess.ID, "sandbox", sb.ID)
	return sb, nil
}

// create makes the session key: its sandbox, then its record.
func (s *Service) create(ctx context.Context, key string, r openRequest, flavor Flavor) (*lease, error) {
	now := s.now().UTC()
	sess := &store.Session{
		Key: key, ID: r.id, Tenant: auth.TenantOf(ctx), Flavor: flavor.Name, CPU: flavor.CPU, Memory: flavor.Memory,
		Template: r.template, IdleTimeout: s.cfg.IdleTimeout, CreatedAt: now, LastUsedAt: now,
		ExpiresAt: now.Add(s.cfg.IdleTimeout),
	}
	if s.cfg.MaxLifetime > 0 {
		ends := now.Add(s.cfg.MaxLifetime)
		sess.EndsAt = &ends
	}
	var w contexts.Warm
	if r.sandboxID != "" {
		sb, err := s.sbx.Get(ctx, r.sandboxID)
		if err != nil {
			return nil, err
		}
		w.Sandbox = sb
	} else {
		var err error
		if w, err = s.provision(ctx, sess, r.language); err != nil {
			return nil, err
		}
		sess.OwnsSandbox = true
	}
	sess.SandboxID, sess.Image = w.Sandbox.ID, w.Sandbox.Image
	if err := s.store.CreateSession(ctx, sess); err != nil {
		if sess.OwnsSandbox {
			s.ctxs.Release(context.WithoutCancel(ctx), w.Sandbox.ID)
		}
		return nil, fmt.Errorf("record session %s: %w", r.id, err)
	}
	s.log.Info("session created", "session", r.id, "tenant", sess.Tenant, "flavor", sess.Flavor, "sandbox", w.Sandbox.ID,
		"warm", w.KernelID != "")
	return &lease{s: s, sess: sess, sandbox: w.Sandbox, created: true, warm: w}, nil
}

// enter marks session key busy.
func (s *Service) enter(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.active[key]
	if a == nil {
		a = &activity{}
		s.active[key] = a
	}
	a.busy++
}

// exit ends one request in session key, adding its executions; the last
// one out writes them to the record and restarts the idle clock.
func (s *Service) exit(ctx context.Context, key string, add activity) {
	s.mu.Lock()
	a := s.active[key]
	if a == nil { // cannot happen: enter came first
		s.mu.Unlock()
		return
	}
	a.busy--
	a.executions += add.executions
	a.errors += add.errors
	a.elapsed += add.elapsed
	if a.busy > 0 {
		s.mu.Unlock()
		return
	}
	delete(s.active, key)
	s.mu.Unlock()
	now := s.now().UTC()
	_, err := s.store.UpdateSession(context.WithoutCancel(ctx), key, func(sess *store.Session) error {
		sess.ExecutionCount += a.executions
		sess.ErrorCount += a.errors
		sess.ExecutionTime += a.elapsed
		if now.After(sess.LastUsedAt) {
			sess.LastUsedAt = now
		}
		if exp := now.Add(sess.IdleTimeout); exp.After(sess.ExpiresAt) {
			sess.ExpiresAt = exp
		}
		return nil
	})
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) { // deleted meanwhile
		s.log.Warn("record session use", "session", key, "err", err)
	}
}

// busy returns the number of requests running in session key.
func (s *Service) busy(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.active[key]; a != nil {
		return a.busy
	}
	return 0
}

// release ends the lease: ok false removes a session the lease made, so
// that a failed request leaves nothing behind. A warm kernel nothing
// adopted is stopped.
func (l *lease) release(ctx context.Context, ok bool, add activity) {
	l.once.Do(func() {
		ctx = context.WithoutCancel(ctx)
		if l.warm.KernelID != "" {
			l.s.stopKernel(ctx, l.sandbox.ID, l.warm.KernelID)
		}
		l.s.exit(ctx, l.sess.Key, add)
		if l.created && !ok {
			unlock, err := l.s.locks.LockContext(ctx, l.sess.Key)
			if err != nil { // the reaper removes it once idle
				l.s.log.Warn("remove a session its request failed to make", "session", l.sess.ID, "err", err)
				return
			}
			defer unlock()
			if l.s.busy(l.sess.Key) == 0 {
				l.s.remove(ctx, l.sess, "the request that made it failed")
			}
		}
	})
}

// stopKernel stops a warm kernel nothing adopted.
func (s *Service) stopKernel(ctx context.Context, sandboxID, id string) {
	ac, err := s.sbx.Agent(ctx, sandboxID)
	if err == nil {
		err = ac.DeleteKernel(ctx, id)
	}
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		s.log.Warn("stop unused warm kernel", "sandbox", sandboxID, "err", err)
	}
}

// info is what every response says of the lease's session.
func (l *lease) info() api.SessionInfo {
	exp := l.s.now().UTC().Add(l.sess.IdleTimeout)
	if l.sess.ExpiresAt.After(exp) {
		exp = l.sess.ExpiresAt
	}
	return api.SessionInfo{SessionID: l.sess.ID, Created: l.created, ExpiresAt: exp}
}

// remove deletes a session: its record, and its sandbox when it owns it.
// The caller holds the session's lock.
func (s *Service) remove(ctx context.Context, sess *store.Session, why string) {
	if err := s.store.DeleteSession(ctx, sess.Key); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		s.log.Warn("delete session record", "session", sess.ID, "err", err)
		return
	}
	if sess.OwnsSandbox {
		s.ctxs.Release(ctx, sess.SandboxID) // its contexts go with it
	} else {
		s.dropContexts(ctx, sess)
	}
	s.log.Info("session removed", "session", sess.ID, "tenant", sess.Tenant, "sandbox", sess.SandboxID, "reason", why,
		"executions", sess.ExecutionCount)
}

// dropContexts deletes the contexts of a session in a sandbox it does not
// own, which stays.
func (s *Service) dropContexts(ctx context.Context, sess *store.Session) {
	cs, err := s.store.ListContexts(ctx, store.ContextFilter{SessionKey: sess.Key})
	if err != nil {
		s.log.Warn("list the contexts of a session", "session", sess.ID, "err", err)
		return
	}
	for _, c := range cs {
		if err := s.store.DeleteContext(ctx, c.ID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			s.log.Warn("delete a context of a session", "session", sess.ID, "context", c.ID, "err", err)
			continue
		}
		s.stopKernel(ctx, c.SandboxID, c.ID)
	}
}
