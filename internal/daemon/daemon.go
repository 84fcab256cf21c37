// Package daemon wires the agent2env daemon together, and only wires: it
// builds each long-lived part (store, images, runtime, the domain
// services, the service layer and the surfaces) from the configuration and
// connects them, and holds no rule of its own; what a part does is its
// package's. One System struct holds them all, built once by New, in
// dependency order, and run by Serve. Leaf packages never import it.
//
// New reads top-down, one step per layer: complete the configuration,
// open the state (store and images), build the runtime, the services, the
// surfaces, register the background loops, recover. Each step takes what
// it uses as arguments and returns what it built, so nothing is used
// before it is made; the few edges back (a template asks for prepulls and
// a prepull names a template, warm pools create through the manager whose
// creates take from them, the runner lists the LLM proxy's models and the
// proxy tells the runner of progress, a sandbox's channel serves the
// surfaces) are funcs called only once serving.
//
// The lifecycle is New, Serve (run the background loops under one
// supervisor and answer requests until its context ends, then drain
// requests and stop the loops) and Close (close the services, the store
// last).
package daemon

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/contexts"
	"github.com/agent2env/agent2env/internal/daemon/supervisor"
	"github.com/agent2env/agent2env/internal/httpapi"
	"github.com/agent2env/agent2env/internal/image"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/run"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/session"
)

// Config is the daemon's configuration.
type Config struct {
	Listen string // e.g. 127.0.0.1:8080
	// PublicURL is where clients reach the daemon (for sandboxes'
	// accessUrl); default http://<Listen>.
	PublicURL string
	DataDir   string // e.g. /var/lib/agent2env
	// Store is where the records are kept: "" or "sqlite" for the SQLite
	// file <DataDir>/state.db, or a PostgreSQL URL (postgres://…) for a
	// database that several daemons may share.
	Store string
	// Runtime names the sandbox runtime in the registry of package
	// runtime; default "oci". Its state is in <DataDir>/<Runtime>.
	Runtime string
	// RuntimeBinary is the oci runtime's binary (its setting
	// "oci.binary"): "runc" (default), "crun", "runsc" or a path; serve
	// resolves its --runtime auto to one of these.
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
	// RunMaxAge is how long an ended task run is kept (run.Config.MaxAge);
	// 0: until deleted.
	RunMaxAge time.Duration
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
	// PrivatePorts makes every sandbox port require its sandbox's access
	// token, also those of sandboxes the E2B API made public
	// (e2b.Config.PrivatePorts).
	PrivatePorts bool
	// Console is the web console's listener (package console), which
	// Serve serves the console on and closes; nil: no console. The API
	// trusts the console's origin (CORS, BrowserGuard).
	Console net.Listener
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
	// wrapStore, when set, stands between the daemon and its store
	// (tests count its reads this way).
	wrapStore func(recordStore) recordStore
}

// HTTPConfig bounds the API server's connections and timeouts, and those
// of each sandbox's channel (httpapi.ServerConfig).
type HTTPConfig = httpapi.ServerConfig

// System is the running daemon: the parts New built, by layer.
type System struct {
	cfg Config
	log *slog.Logger
	state
	services
	surfaces
	// Loops runs every background loop: registered by New once every part
	// is built (registerLoops); Serve runs them and stops them at
	// shutdown.
	Loops *supervisor.Supervisor
	// channels serves the daemon's services to the sandboxes, each on a
	// channel of its own; Serve drains them at shutdown.
	channels sandboxServices
}

// New builds the daemon from cfg, recovers sandboxes and prepulls left
// from a previous run, and returns the System ready to Serve. On error
// what was built is closed.
func New(ctx context.Context, cfg Config) (_ *System, err error) {
	if cfg, err = cfg.complete(); err != nil {
		return nil, err
	}
	s := &System{cfg: cfg, log: cfg.Log, Loops: supervisor.New(cfg.Log)}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	// Each step returns what it built even when it fails, for Close.
	s.channels = newSandboxServices(s)
	if s.state, err = openState(ctx, cfg, s.channels); err != nil {
		return nil, err
	}
	if s.services, err = buildServices(ctx, cfg, s.state); err != nil {
		return nil, err
	}
	if s.surfaces, err = buildSurfaces(cfg, s.state, s.services); err != nil {
		return nil, err
	}
	s.registerLoops()
	if err := s.recover(ctx); err != nil {
		return nil, err
	}
	s.API.SetReady(true)
	return s, nil
}

// complete checks cfg and fills in its defaults, the environment's
// settings (session.ApplyEnv) and what the daemon's parts need of each
// other's configuration.
func (cfg Config) complete() (Config, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = 30 * time.Second
	}
	if cfg.ImageDir == "" {
		cfg.ImageDir = filepath.Join(cfg.DataDir, "images")
	}
	if cfg.Manager.SnapshotDir == "" {
		cfg.Manager.SnapshotDir = filepath.Join(cfg.DataDir, "snapshots")
	}
	if cfg.Manager.DiskDir == "" {
		cfg.Manager.DiskDir = cfg.DataDir
	}
	if cfg.Runtime == "" {
		cfg.Runtime = "oci"
	}
	if cfg.PublicURL == "" {
		cfg.PublicURL = "http://" + cfg.Listen
	}
	if cfg.LLMArchive.Dir == "" {
		cfg.LLMArchive.Dir = filepath.Join(cfg.DataDir, "llm-archive")
	}
	if _, err := auth.Required(cfg.Listen, cfg.authOn()); err != nil {
		return cfg, err
	}
	// A task run's sandbox that dies keeps its files, for the runner to
	// collect its artifacts (it deletes the sandbox after).
	cfg.Manager.KeepDeadFiles = append(slices.Clone(cfg.Manager.KeepDeadFiles), run.ManagedBy)
	cfg.Contexts.Defaults = contexts.Sources(cfg.Contexts.Defaults)
	if err := session.ApplyEnv(&cfg.Sessions, os.LookupEnv); err != nil {
		return cfg, err
	}
	cfg.Sessions.PoolCPU, cfg.Sessions.PoolMemory = cfg.Manager.DefaultCPU, cfg.Manager.DefaultMemory
	return cfg, nil
}

// authOn reports whether the API demands keys: whenever some are
// configured (complete refuses to listen beyond loopback without).
func (cfg *Config) authOn() bool { return cfg.Keys.Len() > 0 }

// apiKeys are the keys the API demands, nil when it is open.
func (cfg *Config) apiKeys() *auth.Keys {
	if !cfg.authOn() {
		return nil
	}
	return cfg.Keys
}
