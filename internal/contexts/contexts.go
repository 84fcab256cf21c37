// Package contexts is the code-interpreter service: contexts are kernels
// in sandboxes' agents (python, javascript, bash) whose state persists
// between executions. The service keeps their records (store.Contexts),
// starts and stops their kernels through the sandbox's agent, and runs
// code in them, answering in one response (output held within the
// daemon's output budget, package outbuf) or as a stream of events.
//
// A context lives in a sandbox: one the client names, its session's (the
// session service, package session, provides it: a context's session_name
// is a session), or one the service provides — from the warm pool when one
// fits, else newly created from the language's default template or image
// (Provision, which the sessions service uses too). A sandbox the service
// provided for a context without a session is deleted with the last
// context in it; a session's goes with the session. A context in no
// session is deleted once idle (ReapIdle, Config.IdleTimeout).
// The record of a context goes with its sandbox's (store cascade), so no
// record points at nothing.
package contexts

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/metrics"
	"github.com/agent2env/agent2env/internal/outbuf"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/store"
)

// Sandboxes is what the service needs of the sandbox manager.
type Sandboxes interface {
	Create(ctx context.Context, req manager.CreateRequest) (*store.Sandbox, error)
	Get(ctx context.Context, id string) (*store.Sandbox, error)
	Delete(ctx context.Context, id string) error
	Agent(ctx context.Context, id string) (*agent.Client, error)
	// RunningAgent is Agent for a sandbox the caller has just found
	// running: it does not read the sandbox again.
	RunningAgent(ctx context.Context, id string) (*agent.Client, error)
	WaitRunning(ctx context.Context, sb *store.Sandbox) (*store.Sandbox, error)
}

// Warm is a sandbox taken from a warm pool, with the kernel started in it
// (KernelID empty if none).
type Warm struct {
	Sandbox  *store.Sandbox
	KernelID string
	Language string
}

// Pool hands out warm sandboxes: Take returns one made from source (a
// template name, or a language's default), claimed for owner (its
// store.Sandbox.ManagedBy from then on), or false when none is ready.
type Pool interface {
	Take(ctx context.Context, source, owner string) (Warm, bool)
}

// Sessions gives the contexts created with a session name their session's
// sandbox (package session implements it).
type Sessions interface {
	// Attach opens the session req.SessionName names (of the tenant in
	// ctx), making it when it does not exist: in req.SandboxID when set,
	// else in a sandbox for language lang. The caller must call the
	// Attachment's Done when the create ends.
	Attach(ctx context.Context, req api.CreateContextRequest, lang string) (*Attachment, error)
	// Use marks session key busy with an execution ("" for a context in
	// no session); done, called when it ends, records it and restarts
	// the session's idle clock.
	Use(ctx context.Context, key string) (done func(d time.Duration, failed bool))
	// Left tells that a context of session key was deleted: a session
	// goes with its last context.
	Left(ctx context.Context, key string)
}

// Attachment is a session's sandbox, held for a context create.
type Attachment struct {
	Sandbox    *store.Sandbox
	SessionKey string
	// Warm is a kernel already started in the sandbox (KernelID empty if
	// none), adopted by a create it fits and stopped otherwise.
	Warm Warm
	// Done ends the create's hold on the session; ok false removes a
	// session the Attach made, so that a failed create leaves nothing.
	Done func(ok bool)
}

// Source is where a sandbox for a language's contexts comes from: a
// template when set, else an image.
type Source struct {
	Template string
	Image    string
}

// Config configures the service.
type Config struct {
	// Defaults maps each language to the source of its sandboxes.
	Defaults map[string]Source
	// OutputLimit caps the stdout plus stderr of one execution.
	OutputLimit int64
	// ReadyTimeout bounds the wait for a new sandbox to run.
	ReadyTimeout time.Duration
	// Outputs bounds the output all buffered executions hold at once;
	// the daemon shares the sandbox manager's (nil: a budget of its own of
	// outbuf.DefaultBudget).
	Outputs *outbuf.Budget
	// IdleTimeout is how long a context in no session lives after its
	// last execution ended (default 30 minutes, as a session): ReapIdle
	// deletes it then. A session's contexts go with their session.
	IdleTimeout time.Duration
}

// DefaultImage is the built-in image every language's contexts run in by
// default: it has every kernel (python with numpy, pandas and matplotlib,
// node, bash), so one session's sandbox runs them all. The per-language
// images (agent2env/python, agent2env/node) remain for those who name them.
const DefaultImage = "agent2env/code-interpreter"

// DefaultSources are the built-in sources per language.
var DefaultSources = map[string]Source{
	api.LanguagePython:     {Image: DefaultImage},
	api.LanguageJavaScript: {Image: DefaultImage},
	api.LanguageBash:       {Image: DefaultImage},
}

// Sources returns the source of every language: the configured one, else
// the default.
func Sources(configured map[string]Source) map[string]Source {
	out := make(map[string]Source, len(DefaultSources))
	for lang, src := range DefaultSources {
		out[lang] = src
	}
	for lang, src := range configured {
		out[lang] = src
	}
	return out
}

func (c *Config) setDefaults() {
	c.Defaults = Sources(c.Defaults)
	if c.OutputLimit == 0 {
		c.OutputLimit = 10 << 20
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = 15 * time.Minute
	}
	if c.Outputs == nil {
		c.Outputs = outbuf.NewBudget(outbuf.DefaultBudget)
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = 30 * time.Minute
	}
}

// Service is safe for concurrent use.
type Service struct {
	cfg   Config
	sbx   Sandboxes
	store store.Contexts
	pool  Pool
	log   *slog.Logger
	now   func() time.Time
	// metrics records execution durations; nil records none.
	metrics *metrics.Metrics

	// sessions provides sessions' sandboxes; nil refuses session names.
	sessions Sessions

	mu sync.Mutex
	// running counts the executions in flight by context: an idle
	// context is one with none (ReapIdle).
	running map[string]int
}

// Option configures a Service.
type Option func(*Service)

// WithMetrics records the duration of every execution in m.
func WithMetrics(m *metrics.Metrics) Option { return func(s *Service) { s.metrics = m } }

// New returns a Service; pool may be nil.
func New(cfg Config, sbx Sandboxes, st store.Contexts, pool Pool, log *slog.Logger, opts ...Option) *Service {
	cfg.setDefaults()
	if log == nil {
		log = slog.Default()
	}
	s := &Service{cfg: cfg, sbx: sbx, store: st, pool: pool, log: log, now: time.Now, running: map[string]int{}}
	for _, o := range opts {
		o(s)
	}
	return s
}

// SetSessions makes the service place contexts with a session name in
// their session's sandbox. It is set once at wiring, before serving (the
// session service uses this one, so it cannot be an option of New).
func (s *Service) SetSessions(ss Sessions) { s.sessions = ss }

// Language returns the canonical name of a language or its alias.
func Language(s string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "python", "python3", "py":
		return api.LanguagePython, nil
	case "javascript", "js", "node", "nodejs":
		return api.LanguageJavaScript, nil
	case "bash", "sh", "shell":
		return api.LanguageBash, nil
	}
	return "", errdefs.WithCode(errdefs.Invalid("language %q is not supported: use python, javascript or bash", s), api.CodeInvalidLanguage)
}

// NewID returns a fresh context id.
func NewID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "ctx-" + hex.EncodeToString(b[:])
}

// contextErr gives not-found errors the context code.
func contextErr(err error) error {
	if errors.Is(err, errdefs.ErrNotFound) && errdefs.Code(err) == "" {
		return errdefs.WithCode(err, api.CodeContextNotFound)
	}
	return err
}

// placement is where a new context goes.
type placement struct {
	sandbox *store.Sandbox
	owned   bool // made for this context
	// fresh says the sandbox was made (or taken from a pool) for this
	// request: only then may a failed request delete it.
	fresh      bool
	kernel     string // a warm kernel to adopt
	sessionKey string
}

// request is a create request checked and completed.
type request struct {
	api.CreateContextRequest
	lang, cwd string
}

// check validates a create request and fills in its defaults.
func check(req api.CreateContextRequest) (request, error) {
	r := request{CreateContextRequest: req, cwd: sandbox.WorkDir}
	var err error
	if r.lang, err = Language(req.Language); err != nil {
		return request{}, err
	}
	if r.Type == "" {
		r.Type = api.ContextTypeJupyter
	}
	if r.Type != api.ContextTypeJupyter {
		return request{}, errdefs.Invalid("context type %q is not supported: use %q", req.Type, api.ContextTypeJupyter)
	}
	if req.WorkingDir != "" {
		if r.cwd, err = manager.CleanPath(req.WorkingDir); err != nil {
			return request{}, err
		}
	}
	if err := manager.ValidEnv(req.Env); err != nil {
		return request{}, err
	}
	if len(req.Name) > MaxLabelBytes || len(req.Description) > MaxLabelBytes {
		return request{}, errdefs.Invalid("name and description must be at most %d bytes", MaxLabelBytes)
	}
	// Refused by every store alike: PostgreSQL's text holds no NUL.
	if strings.ContainsRune(req.Name, 0) || strings.ContainsRune(req.Description, 0) {
		return request{}, errdefs.Invalid("name and description must not contain NUL")
	}
	return r, nil
}

// MaxLabelBytes bounds a context's name and description.
const MaxLabelBytes = 4096

// Create makes a context, and a sandbox for it when the request names
// none. A request that names a sandbox and a template too is refused
// unless the sandbox was made from that template (clients of the code
// interpreter send both).
func (s *Service) Create(ctx context.Context, req api.CreateContextRequest) (*api.Context, error) {
	r, err := check(req)
	if err != nil {
		return nil, err
	}
	if req.SessionName != "" {
		if s.sessions == nil {
			return nil, fmt.Errorf("session_name: sessions are not served here: %w", errdefs.ErrNotImplemented)
		}
		if r.SandboxID != "" && r.Template != "" {
			if _, err := s.named(ctx, r); err != nil {
				return nil, err
			}
		}
		at, err := s.sessions.Attach(ctx, req, r.lang)
		if err != nil {
			return nil, err
		}
		c, err := s.createIn(ctx, r, s.attached(ctx, r, at))
		at.Done(err == nil)
		return c, err
	}
	pl, err := s.place(ctx, r)
	if err != nil {
		return nil, err
	}
	return s.createIn(ctx, r, pl)
}

// CreateInSession makes a context in the sandbox of a session the caller
// holds: the session service calls it for the kernels it starts itself.
func (s *Service) CreateInSession(ctx context.Context, req api.CreateContextRequest, at *Attachment) (*api.Context, error) {
	r, err := check(req)
	if err != nil {
		return nil, err
	}
	return s.createIn(ctx, r, s.attached(ctx, r, at))
}

// attached places a context in a session's sandbox.
func (s *Service) attached(ctx context.Context, r request, at *Attachment) placement {
	return placement{sandbox: at.Sandbox, sessionKey: at.SessionKey, kernel: s.adopt(ctx, r, at.Warm)}
}

// adopt returns the warm kernel w if it fits the request, and stops it
// otherwise.
func (s *Service) adopt(ctx context.Context, r request, w Warm) string {
	if w.KernelID == "" {
		return ""
	}
	if w.Language == r.lang && len(r.Env) == 0 && r.cwd == sandbox.WorkDir {
		return w.KernelID
	}
	s.dropKernel(ctx, &store.Context{ID: w.KernelID, SandboxID: w.Sandbox.ID})
	return ""
}

// createIn starts the context's kernel in its placement and records it.
func (s *Service) createIn(ctx context.Context, r request, pl placement) (*api.Context, error) {
	c := &store.Context{
		SandboxID: pl.sandbox.ID, Language: r.lang, Type: r.Type, SessionName: r.SessionName, SessionKey: pl.sessionKey,
		Tenant: auth.TenantOf(ctx), Name: r.Name, Description: r.Description, WorkingDir: r.cwd, Env: r.Env,
		OwnsSandbox: pl.owned,
	}
	if err := s.startKernel(ctx, c, pl); err != nil {
		if pl.fresh {
			s.release(context.WithoutCancel(ctx), pl.sandbox.ID)
		}
		return nil, err
	}
	c.CreatedAt = s.now().UTC()
	c.LastUsedAt = c.CreatedAt
	if err := s.store.CreateContext(ctx, c); err != nil {
		s.dropKernel(context.WithoutCancel(ctx), c)
		if pl.fresh {
			s.release(context.WithoutCancel(ctx), pl.sandbox.ID)
		}
		return nil, fmt.Errorf("record context: %w", err)
	}
	s.log.Info("context created", "context", c.ID, "language", r.lang, "sandbox", c.SandboxID, "session", c.SessionName,
		"warm", pl.kernel != "")
	return toAPI(c), nil
}

// place finds or makes the sandbox of a new context outside sessions.
func (s *Service) place(ctx context.Context, r request) (placement, error) {
	if r.SandboxID != "" {
		sb, err := s.named(ctx, r)
		if err != nil {
			return placement{}, err
		}
		return placement{sandbox: sb}, nil
	}
	w, err := s.Provision(ctx, SandboxRequest{Language: r.lang, Template: r.Template, ManagedBy: ManagedBy})
	if err != nil {
		return placement{}, err
	}
	return placement{sandbox: w.Sandbox, owned: true, fresh: true, kernel: s.adopt(ctx, r, w)}, nil
}

// named returns the sandbox r names, which must have been made from r's
// template when r names one.
func (s *Service) named(ctx context.Context, r request) (*store.Sandbox, error) {
	sb, err := s.sbx.Get(ctx, r.SandboxID)
	if err != nil {
		return nil, err
	}
	if r.Template != "" && r.Template != sb.Template {
		made := "from image " + sb.Image
		if sb.Template != "" {
			made = "from template " + sb.Template
		}
		return nil, errdefs.Invalid("template %q is not the template of sandbox %s, which was made %s: give the sandbox alone, or its own template",
			r.Template, sb.ID, made)
	}
	return sb, nil
}

// ManagedBy marks the sandboxes the service makes for contexts.
const ManagedBy = "contexts"

// SandboxRequest is what a sandbox for kernels needs.
type SandboxRequest struct {
	// Language is the kernel a warm sandbox should have started.
	Language string
	// Template, when set, is the sandbox's template; else the language's
	// default source.
	Template string
	// CPU and Memory override the default limits; a warm pool's sandbox
	// fits only a request without them.
	CPU, Memory string
	// TTL bounds the sandbox's life (nil: the daemon's default).
	TTL *int
	// ManagedBy names the service whose records will refer to it.
	ManagedBy string
	// Mounts are host directories to bind into the sandbox; a warm pool's
	// sandbox fits only a request without them.
	Mounts []sandbox.Mount
}

// Provision returns a running sandbox for req: one of the warm pool, with
// its started kernel in Warm.KernelID, when one fits; else one newly made.
// On error it leaves nothing behind.
func (s *Service) Provision(ctx context.Context, req SandboxRequest) (Warm, error) {
	source := req.Language
	if req.Template != "" {
		source = req.Template
	}
	// A sandbox made for a sandbox's code is admitted against its owner
	// (package manager), which a pool's claim is not.
	if s.pool != nil && req.CPU == "" && req.Memory == "" && req.TTL == nil && len(req.Mounts) == 0 && auth.OwnerOf(ctx) == "" {
		if w, ok := s.pool.Take(ctx, source, req.ManagedBy); ok {
			return w, nil
		}
	}
	src := s.cfg.Defaults[req.Language]
	if req.Template != "" {
		src = Source{Template: req.Template}
	}
	sb, err := s.sbx.Create(ctx, manager.CreateRequest{Template: src.Template, Image: src.Image,
		CPU: req.CPU, Memory: req.Memory, TTL: req.TTL, ManagedBy: req.ManagedBy, Mounts: req.Mounts,
		SpareKernel: req.Language})
	if err != nil {
		return Warm{}, fmt.Errorf("create a sandbox for %s: %w", req.Language, err)
	}
	wctx, cancel := context.WithTimeout(ctx, s.cfg.ReadyTimeout)
	defer cancel()
	running, err := s.sbx.WaitRunning(wctx, sb)
	if err != nil {
		s.release(context.WithoutCancel(ctx), sb.ID)
		return Warm{}, fmt.Errorf("sandbox for %s: %w", req.Language, err)
	}
	return Warm{Sandbox: running}, nil
}

// Release deletes a sandbox Provision made, logging failure: the sweeper
// retries what is left.
func (s *Service) Release(ctx context.Context, id string) { s.release(ctx, id) }

// startKernel starts the context's kernel, or adopts the warm one.
func (s *Service) startKernel(ctx context.Context, c *store.Context, pl placement) error {
	if pl.kernel != "" {
		c.ID = pl.kernel
		return nil
	}
	c.ID = NewID()
	ac, err := s.sbx.Agent(ctx, c.SandboxID)
	if err != nil {
		return err
	}
	_, err = ac.CreateKernel(ctx, kernelSpec(c))
	return kernelErr(err, c)
}

func kernelSpec(c *store.Context) agent.KernelSpec {
	spec := agent.KernelSpec{ID: c.ID, Language: c.Language, Cwd: c.WorkingDir}
	for k, v := range c.Env {
		spec.Env = append(spec.Env, k+"="+v)
	}
	return spec
}

// kernelErr classifies an agent's answer to a kernel start.
func kernelErr(err error, c *store.Context) error {
	var ae *agent.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae) && ae.Code == "NO_INTERPRETER":
		return errdefs.WithCode(errdefs.Invalid("sandbox %s cannot run %s contexts: %s", c.SandboxID, c.Language, ae.Message), api.CodeLanguageMissing)
	}
	return fmt.Errorf("start %s kernel in sandbox %s: %w", c.Language, c.SandboxID, err)
}

// dropKernel kills a context's kernel, if its sandbox still answers.
func (s *Service) dropKernel(ctx context.Context, c *store.Context) {
	ac, err := s.sbx.Agent(ctx, c.SandboxID)
	if err != nil {
		return
	}
	if err := ac.DeleteKernel(ctx, c.ID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		s.log.Warn("stop kernel", "context", c.ID, "sandbox", c.SandboxID, "err", err)
	}
}

// release deletes a sandbox the service made, logging failure: the
// sweeper retries what is left.
func (s *Service) release(ctx context.Context, id string) {
	if err := s.sbx.Delete(ctx, id); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		s.log.Warn("delete context sandbox", "sandbox", id, "err", err)
	}
}

// get returns the record of context id if ctx's tenant made it: another
// tenant's context is not found.
func (s *Service) get(ctx context.Context, id string) (*store.Context, error) {
	c, err := s.store.GetContext(ctx, id)
	if err == nil && c.Tenant != auth.TenantOf(ctx) {
		err = s.unreached(ctx, c)
	}
	return c, err
}

// unreached is the not-found of context c to ctx's tenant, whose it is
// not, saying whose it is when the tenant lists it: made by the code of
// its sandboxes or the agents of its runs, it is theirs, and only they
// reach it by id; it ends with them.
func (s *Service) unreached(ctx context.Context, c *store.Context) error {
	err := errdefs.NotFound("context %s not found", c.ID)
	listed, lerr := s.store.ListContexts(ctx, store.ContextFilter{SandboxID: c.SandboxID, ByTenant: true,
		Tenant: auth.TenantOf(ctx), WithOwned: true})
	if lerr != nil || !slices.ContainsFunc(listed, func(o *store.Context) bool { return o.ID == c.ID }) {
		return err
	}
	return errdefs.NotFound("context %s is not yours but made by %s, which alone reaches it by id; it ends with its maker",
		c.ID, auth.Maker(c.Tenant))
}

// Get returns a context.
func (s *Service) Get(ctx context.Context, id string) (*api.Context, error) {
	c, err := s.get(ctx, id)
	if err != nil {
		return nil, contextErr(err)
	}
	return toAPI(c), nil
}

// GetIn returns a context of the given sandbox.
func (s *Service) GetIn(ctx context.Context, sandboxID, id string) (*api.Context, error) {
	c, err := s.inSandbox(ctx, sandboxID, id)
	if err != nil {
		return nil, err
	}
	return toAPI(c), nil
}

// inSandbox returns the context id if it is in the sandbox.
func (s *Service) inSandbox(ctx context.Context, sandboxID, id string) (*store.Context, error) {
	if _, err := s.sbx.Get(ctx, sandboxID); err != nil {
		return nil, err
	}
	c, err := s.get(ctx, id)
	if err != nil {
		return nil, contextErr(err)
	}
	if c.SandboxID != sandboxID {
		return nil, errdefs.WithCode(errdefs.NotFound("context %s is not in sandbox %s", id, sandboxID), api.CodeContextNotFound)
	}
	return c, nil
}

// List returns the page p of the contexts of ctx's tenant that f selects,
// and those the code of the tenant's sandboxes made: oldest first, or
// newest first with p.Desc; and the cursor of the next page ("" after
// the last).
func (s *Service) List(ctx context.Context, f store.ContextFilter, p store.Page) ([]api.Context, string, error) {
	f.ByTenant, f.Tenant, f.WithOwned = true, auth.TenantOf(ctx), true
	if f.SandboxID != "" {
		if _, err := s.sbx.Get(ctx, f.SandboxID); err != nil {
			return nil, "", err
		}
	}
	cs, next, err := s.store.ListContextPage(ctx, f, p)
	if err != nil {
		return nil, "", err
	}
	out := make([]api.Context, 0, len(cs))
	for _, c := range cs {
		out = append(out, *toAPI(c))
	}
	return out, next, nil
}

// Delete ends a context, and its sandbox when the service made it and no
// other context uses it.
func (s *Service) Delete(ctx context.Context, id string) error {
	c, err := s.get(ctx, id)
	if err != nil {
		return contextErr(err)
	}
	return s.delete(ctx, c)
}

// DeleteIn ends a context of the given sandbox.
func (s *Service) DeleteIn(ctx context.Context, sandboxID, id string) error {
	c, err := s.inSandbox(ctx, sandboxID, id)
	if err != nil {
		return err
	}
	return s.delete(ctx, c)
}

func (s *Service) delete(ctx context.Context, c *store.Context) error {
	if err := s.store.DeleteContext(ctx, c.ID); err != nil {
		return contextErr(err)
	}
	ctx = context.WithoutCancel(ctx)
	if c.SessionKey != "" && s.sessions != nil {
		s.dropKernel(ctx, c)
		s.sessions.Left(ctx, c.SessionKey)
		return nil
	}
	if c.OwnsSandbox {
		rest, _, err := s.store.ListContextPage(ctx, store.ContextFilter{SandboxID: c.SandboxID}, store.Page{Limit: 1})
		switch {
		case err != nil:
			s.log.Warn("list the contexts of a sandbox", "sandbox", c.SandboxID, "err", err)
		case len(rest) == 0:
			s.release(ctx, c.SandboxID)
			return nil
		default: // the sandbox goes with the last of them
			if _, err := s.store.UpdateContext(ctx, rest[0].ID, func(n *store.Context) error {
				n.OwnsSandbox = true
				return nil
			}); err != nil {
				s.log.Warn("hand sandbox ownership on", "sandbox", c.SandboxID, "err", err)
			}
		}
	}
	s.dropKernel(ctx, c)
	return nil
}

var contextsDesc = prometheus.NewDesc("agent2env_contexts", "Code-interpreter contexts.", nil, nil)

// collectTimeout bounds the store read behind a scrape.
const collectTimeout = 10 * time.Second

var _ prometheus.Collector = (*Service)(nil)

// Describe sends the descriptor of the contexts gauge
// (prometheus.Collector).
func (s *Service) Describe(ch chan<- *prometheus.Desc) { ch <- contextsDesc }

// Collect sends the number of contexts, counted in the store when called
// (prometheus.Collector). The service cannot keep the count itself:
// contexts also go with their sandbox's record.
func (s *Service) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
	defer cancel()
	n, err := s.store.CountContexts(ctx, store.ContextFilter{})
	if err != nil {
		ch <- prometheus.NewInvalidMetric(contextsDesc, fmt.Errorf("count contexts: %w", err))
		return
	}
	ch <- prometheus.MustNewConstMetric(contextsDesc, prometheus.GaugeValue, float64(n))
}

func toAPI(c *store.Context) *api.Context {
	return &api.Context{
		ContextID: c.ID, Type: c.Type, Status: api.ContextStatusActive, CreatedAt: c.CreatedAt,
		Language: c.Language, SessionName: c.SessionName, WorkingDir: c.WorkingDir, SandboxID: c.SandboxID,
		LastUsedAt: c.LastUsedAt, ExecutionCount: c.ExecutionCount, Name: c.Name, Description: c.Description,
		MadeBySandbox: auth.TenantSandbox(c.Tenant), MadeByRun: auth.TenantRun(c.Tenant),
	}
}

// ReapIdle deletes the contexts in no session whose last execution ended
// IdleTimeout ago and that run nothing now (a session's contexts go with
// their session). It returns how many it deleted.
func (s *Service) ReapIdle(ctx context.Context) (int, error) {
	idle, err := s.store.ListContexts(ctx, store.ContextFilter{IdleSince: s.now().Add(-s.cfg.IdleTimeout)})
	if err != nil {
		return 0, fmt.Errorf("list idle contexts: %w", err)
	}
	n := 0
	for _, c := range idle {
		if s.busy(c.ID) {
			continue
		}
		if err := s.delete(ctx, c); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			s.log.Warn("delete idle context", "context", c.ID, "err", err)
			continue
		}
		s.log.Info("context removed", "context", c.ID, "sandbox", c.SandboxID, "reason", "idle", "last_used", c.LastUsedAt)
		n++
	}
	return n, nil
}

// enter marks an execution of context id in flight; the func it returns
// ends it.
func (s *Service) enter(id string) func() {
	s.mu.Lock()
	s.running[id]++
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.running[id]--; s.running[id] <= 0 {
			delete(s.running, id)
		}
	}
}

// busy reports whether context id runs something now.
func (s *Service) busy(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running[id] > 0
}
