// Package daemon wires the agent2env daemon together: one System struct
// holds every long-lived service (store, images, runtime, manager, HTTP
// API), built once by New, in dependency order, and run by Serve. Leaf
// packages never import it.
//
// The lifecycle is New (open state, build services, recover), Serve (run
// the background loops under one supervisor and answer requests until its
// context ends, then drain requests and stop the loops) and Close (close
// the services, the store last).
package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/contexts"
	"github.com/agent2env/agent2env/internal/daemon/supervisor"
	"github.com/agent2env/agent2env/internal/gateway"
	"github.com/agent2env/agent2env/internal/httpapi"
	"github.com/agent2env/agent2env/internal/image"
	"github.com/agent2env/agent2env/internal/llm/archive"
	"github.com/agent2env/agent2env/internal/llm/gate"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/mcpserver"
	"github.com/agent2env/agent2env/internal/metrics"
	"github.com/agent2env/agent2env/internal/netguard"
	"github.com/agent2env/agent2env/internal/netproxy"
	"github.com/agent2env/agent2env/internal/pool"
	"github.com/agent2env/agent2env/internal/prepull"
	"github.com/agent2env/agent2env/internal/run"
	"github.com/agent2env/agent2env/internal/runtime"
	_ "github.com/agent2env/agent2env/internal/runtime/all" // registers the runtimes
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/service"
	"github.com/agent2env/agent2env/internal/session"
	"github.com/agent2env/agent2env/internal/store"
	"github.com/agent2env/agent2env/internal/store/sqlite"
	"github.com/agent2env/agent2env/internal/template"
)

// Config is the daemon's configuration.
type Config struct {
	Listen string // e.g. 127.0.0.1:8080
	// PublicURL is where clients reach the daemon (for sandboxes'
	// accessUrl); default http://<Listen>.
	PublicURL string
	DataDir   string // e.g. /var/lib/agent2env
	// Runtime names the sandbox runtime in the registry of package
	// runtime; default "oci". Its state is in <DataDir>/<Runtime>.
	Runtime string
	// RuntimeBinary is the oci runtime's binary (its setting
	// "oci.binary"): "runc" (default), "crun", "runsc" or a path.
	RuntimeBinary string
	// RuntimeSettings are more settings of the runtimes
	// (runtime.Options.Settings: "kubernetes.namespace").
	RuntimeSettings map[string]string
	// ImageDir holds the image store; default <DataDir>/images. Several
	// data directories may share one (one daemon at a time).
	ImageDir string
	// CacheDir keeps built images across image stores.
	CacheDir string
	// DebianMirror is the mirror built-in images are built from; empty
	// leaves mmdebstrap's default.
	DebianMirror string
	// PrebuildImages builds in the background, from the start, the
	// built-in images the defaults of contexts and sessions and the warm
	// pools use that are not stored yet (prebuild.go).
	PrebuildImages bool
	// InsecureRegistries may be pulled from over plain HTTP (loopback and
	// private addresses always may).
	InsecureRegistries []string
	Manager            manager.Config
	// Contexts configures code-interpreter contexts (default sources per
	// language, output cap).
	Contexts contexts.Config
	// WarmPools are the warm pool sizes by name: a language, or a
	// template.
	WarmPools map[string]int
	// Sessions configures sessions (flavors, idle timeout, limits, shared
	// volumes). Fields left zero are read from seed 000's environment
	// variables (session.ApplyEnv: MSB_DEFAULT_FLAVOR, MSB_SESSION_TIMEOUT,
	// MSB_SHARED_VOLUME_PATH), else take their defaults.
	Sessions session.Config
	// TasksDir holds the task files a run submission may name; empty:
	// submissions give the task's content.
	TasksDir string
	// MaxRuns bounds the task runs going at once (default
	// run.DefaultMaxParallel).
	MaxRuns int
	// Keys are the API keys clients must present; nil or empty means no
	// authentication, allowed only on loopback.
	Keys *auth.Keys
	// FetchAllow lets template file sources be fetched from internal
	// mirrors: host names, IP addresses and CIDR prefixes that the daemon
	// otherwise refuses to connect to for a template (loopback, private,
	// link-local and the host's own addresses).
	FetchAllow []string
	// AllowedHosts are Host header values the API accepts besides the
	// listen address, loopback names and addresses and PublicURL's host:
	// names or addresses without port; "*" accepts any (DNS rebinding
	// protection off).
	AllowedHosts []string
	// TrustedOrigins are web origins ("https://ui.example.com") whose pages
	// may use the API; requests from any other web page are refused.
	TrustedOrigins []string
	// HTTP bounds the API server's connections and timeouts.
	HTTP HTTPConfig
	// LLMConfig is the LLM proxy's configuration file (package
	// internal/llm/config), read again by ReloadLLM; empty leaves /llm
	// answering that the proxy is not configured.
	LLMConfig string
	// LLMArchive bounds the archive of the LLM proxy's exchanges.
	LLMArchive LLMArchiveConfig
	// ShutdownTimeout bounds how long Serve waits for requests in flight,
	// and then how long it waits for the background loops to stop and
	// the warm pools to empty. Default 30s.
	ShutdownTimeout time.Duration
	Log             *slog.Logger

	// runtime, when set, runs the sandboxes instead of the OCI runtime
	// RuntimeBinary names; it stays its giver's (Close leaves it open).
	// Tests run the daemon on fakeruntime, without root, this way.
	runtime sandbox.Runtime
	// prebuilder, when set, does the background builds instead of the
	// image store.
	prebuilder image.Ensurer
}

// System is the running daemon.
type System struct {
	cfg       Config
	Store     *sqlite.Store
	Images    *image.Store
	Runtime   sandbox.Runtime
	Manager   *manager.Manager
	Sandboxes *service.Sandboxes
	Prepull   *prepull.Service
	Templates *template.Service
	Gateway   *gateway.Routes
	Contexts  *contexts.Service
	Sessions  *session.Service
	MCP       *mcpserver.Server
	// LLM serves the LLM proxy at /llm and to every sandbox; LLMKeys are
	// its per-run keys.
	LLM       *gate.Gate
	LLMKeys   *gate.Keys
	llmClient *http.Client // every configuration's upstream calls
	// LLMArchive records every exchange through the LLM proxy.
	LLMArchive *archive.Archive
	// llmExchanges reads it for the API; its follows end at shutdown.
	llmExchanges *service.LLMExchanges
	// Runs runs tasks; the LLM proxy reports a run's model calls to it
	// (run.Signal) and may give it the tokens it counted (run.WithLLMUsage).
	Runs    *run.Service
	Pools   *pool.Pools
	Metrics *metrics.Metrics
	API     *httpapi.Server
	// Loops runs every background loop: register one with Loops.Go while
	// wiring, in New; Serve runs them and stops them at shutdown.
	Loops *supervisor.Supervisor
	log   *slog.Logger
}

// New opens the daemon's state, recovers sandboxes left from a previous
// run, and returns the System ready to Serve.
func New(ctx context.Context, cfg Config) (_ *System, err error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = 30 * time.Second
	}
	if err := os.MkdirAll(cfg.DataDir, 0o711); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	s := &System{cfg: cfg, log: cfg.Log}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.Store, err = sqlite.Open(ctx, filepath.Join(cfg.DataDir, "state.db")); err != nil {
		return nil, err
	}
	imgOpts := []image.Option{image.WithLogger(cfg.Log)}
	if cfg.CacheDir != "" {
		imgOpts = append(imgOpts, image.WithCacheDir(cfg.CacheDir))
	}
	if cfg.DebianMirror != "" {
		imgOpts = append(imgOpts, image.WithMirror(cfg.DebianMirror))
	}
	if len(cfg.InsecureRegistries) > 0 {
		imgOpts = append(imgOpts, image.WithInsecureRegistries(cfg.InsecureRegistries...))
	}
	if cfg.ImageDir == "" {
		cfg.ImageDir = filepath.Join(cfg.DataDir, "images")
	}
	if s.Images, err = image.Open(cfg.ImageDir, imgOpts...); err != nil {
		return nil, err
	}
	// Sandboxes whose template opts into network access reach it only
	// through this proxy, which enforces their allowed domains.
	proxy := netproxy.New(netproxy.Config{Logger: cfg.Log})
	if s.Runtime = cfg.runtime; s.Runtime == nil {
		if cfg.Runtime == "" {
			cfg.Runtime = "oci"
		}
		settings := maps.Clone(cfg.RuntimeSettings)
		if settings == nil {
			settings = map[string]string{}
		}
		if cfg.RuntimeBinary != "" {
			settings["oci.binary"] = cfg.RuntimeBinary
		}
		if s.Runtime, err = runtime.New(ctx, cfg.Runtime, runtime.Options{
			Root: filepath.Join(cfg.DataDir, cfg.Runtime), Images: s.Images, Egress: proxy, Settings: settings, Logger: cfg.Log,
			Services: sandboxServices{s},
		}); err != nil {
			return nil, err
		}
	}
	authOn, err := auth.Required(cfg.Listen, cfg.Keys.Len() > 0)
	if err != nil {
		return nil, err
	}
	// Template file sources are fetched by the daemon: they must not lead
	// to its own API, the host's services or a cloud metadata service.
	sources, err := template.SourceGuard(cfg.FetchAllow)
	if err != nil {
		return nil, fmt.Errorf("fetch allow-list: %w", err)
	}
	// Services are built after what they use, and take it at New. Two
	// pairs use each other, each in one direction at construction and the
	// other only while serving: a template asks for its image to be
	// prepulled, and a prepull may name a template; warm pools create
	// through the manager, and the manager's creates take from the pools.
	// The first of each pair is given a func that finds the second on s
	// when called, which is never before New has built it.
	// Where nodes pull images themselves (a cluster), prepulls go to them.
	var pulls prepull.Images = s.Images
	if np, ok := s.Runtime.(sandbox.NodePrepuller); ok {
		pulls = prepull.NodeImages(np)
	}
	s.Prepull = prepull.New(s.Store, pulls, cfg.Log, prepull.WithTemplates(prepull.TemplateResolverFunc(
		func(ctx context.Context, name string, version int) (api.TemplateSpec, int, error) {
			return s.Templates.Resolve(ctx, name, version)
		})))
	s.Templates = template.New(s.Store, template.WithPrepuller(s.Prepull), template.WithLogger(cfg.Log),
		template.WithSourceGuard(sources))
	s.Metrics = metrics.New()
	// A task run's sandbox that dies keeps its files, for the runner to
	// collect its artifacts (it deletes the sandbox after).
	cfg.Manager.KeepDeadFiles = append(slices.Clone(cfg.Manager.KeepDeadFiles), run.ManagedBy)
	s.Manager = manager.New(cfg.Manager, s.Runtime, s.Store, cfg.Log,
		manager.WithTemplates(s.Templates), manager.WithMetrics(s.Metrics),
		manager.WithFetcher(netguard.NewFetcher(netguard.FetchConfig{Guard: sources})),
		manager.WithWarmPool(manager.WarmPoolFunc(func(ctx context.Context, req manager.CreateRequest) (*store.Sandbox, bool) {
			return s.Pools.TakeSandbox(ctx, req)
		})))
	if cfg.PublicURL == "" {
		cfg.PublicURL = "http://" + cfg.Listen
	}
	var sandboxOpts []service.SandboxesOption
	if u, ok := s.Runtime.(sandbox.UsageReader); ok { // the runner's liveness counts CPU time where the runtime measures it
		sandboxOpts = append(sandboxOpts, service.WithUsage(u))
	}
	s.Sandboxes = service.NewSandboxes(s.Manager, cfg.PublicURL, sandboxOpts...)
	s.Gateway = gateway.New(s.Sandboxes, cfg.Log)
	cfg.Contexts.Defaults = contexts.Sources(cfg.Contexts.Defaults)
	if s.Pools, err = pool.New(s.Manager, pool.Specs(cfg.WarmPools, cfg.Contexts.Defaults), cfg.Log); err != nil {
		return nil, err
	}
	// Buffered output of commands and of code counts against one budget.
	cfg.Contexts.Outputs = s.Manager.OutputBudget()
	s.Contexts = contexts.New(cfg.Contexts, s.Manager, s.Store, s.Pools, cfg.Log, contexts.WithMetrics(s.Metrics))
	if err := session.ApplyEnv(&cfg.Sessions, os.LookupEnv); err != nil {
		return nil, err
	}
	cfg.Sessions.PoolCPU, cfg.Sessions.PoolMemory = cfg.Manager.DefaultCPU, cfg.Manager.DefaultMemory
	sessionOpts := []session.Option{}
	if u, ok := s.Runtime.(sandbox.UsageReader); ok { // optional: a runtime may not measure usage
		sessionOpts = append(sessionOpts, session.WithUsage(u))
	}
	if s.Sessions, err = session.New(cfg.Sessions, s.Manager, s.Store, s.Contexts, cfg.Log, sessionOpts...); err != nil {
		return nil, err
	}
	// Sessions make their kernels through contexts, and a context's
	// session_name is a session: the one edge back, given here.
	s.Contexts.SetSessions(s.Sessions)
	if err := s.Metrics.Register(s.Manager, s.Pools, s.Contexts, s.Sessions); err != nil {
		return nil, err
	}
	// The runner's model list and tokens come from the LLM proxy and its
	// archive, built below (and only called once serving).
	// The archive of LLM exchanges gives runs their tokens.
	llmRoutes, err := s.openLLMArchive(ctx)
	if err != nil {
		return nil, err
	}
	if s.Runs, err = run.New(run.Config{Dir: filepath.Join(cfg.DataDir, "runs"), TasksDir: cfg.TasksDir, MaxParallel: cfg.MaxRuns,
		Models: func() []string { return s.LLM.Models() }},
		s.Sandboxes, s.Store, cfg.Log, run.WithLLMUsage(s.LLMArchive)); err != nil {
		return nil, err
	}
	contextsView := service.NewContexts(s.Contexts)
	s.MCP = mcpserver.New(mcpserver.Config{ScopeByKey: authOn, Log: cfg.Log}, contextsView, s.Sessions)
	var apiKeys *auth.Keys
	if authOn {
		apiKeys = cfg.Keys
	}
	if err := s.newLLM(apiKeys); err != nil {
		return nil, err
	}
	opts := []httpapi.Option{
		httpapi.WithRoutes(llmRoutes),
		httpapi.WithRoutes(s.Gateway),
		httpapi.WithRoutes(httpapi.NewTemplateRoutes(s.Templates)),
		httpapi.WithRoutes(httpapi.NewPrepullRoutes(s.Prepull)),
		httpapi.WithRoutes(httpapi.NewContextRoutes(contextsView)),
		httpapi.WithRoutes(httpapi.NewSessionRoutes(s.Sessions)),
		httpapi.WithRoutes(s.MCP),
		httpapi.WithRoutes(s.LLM),
		httpapi.WithRoutes(httpapi.NewLLMRoutes(s.LLMKeys)),
		httpapi.WithRoutes(httpapi.NewRunRoutes(s.Runs)),
		httpapi.WithMetrics(s.Metrics),
	}
	browsers, err := httpapi.BrowserGuard(httpapi.BrowserConfig{
		Listen: cfg.Listen, PublicURL: cfg.PublicURL, AllowedHosts: cfg.AllowedHosts, TrustedOrigins: cfg.TrustedOrigins,
	})
	if err != nil {
		return nil, err
	}
	opts = append(opts, httpapi.WithMiddleware(browsers))
	if authOn {
		// Sessions are scoped by the key that passed the auth.
		opts = append(opts, httpapi.WithMiddleware(httpapi.AuthMiddleware(cfg.Keys)), httpapi.WithMiddleware(httpapi.TenantMiddleware))
	}
	s.API = httpapi.New(s.Sandboxes, service.NewImages(s.Images, s.imagesOptions()...), cfg.Log, opts...)
	s.Loops = supervisor.New(cfg.Log)
	s.registerLoops()
	if err := s.Manager.Recover(ctx); err != nil {
		return nil, err
	}
	if err := s.Prepull.Recover(ctx); err != nil {
		return nil, err
	}
	s.API.SetReady(true)
	return s, nil
}
