// Package daemon wires the agent2env daemon together: one System struct
// holds every long-lived service (store, images, runtime, manager, HTTP
// API), built once by New and run by Serve. Leaf packages never import it.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/contexts"
	"github.com/agent2env/agent2env/internal/gateway"
	"github.com/agent2env/agent2env/internal/httpapi"
	"github.com/agent2env/agent2env/internal/image"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/mcpserver"
	"github.com/agent2env/agent2env/internal/metrics"
	"github.com/agent2env/agent2env/internal/netproxy"
	"github.com/agent2env/agent2env/internal/pool"
	"github.com/agent2env/agent2env/internal/prepull"
	"github.com/agent2env/agent2env/internal/runtime/oci"
	"github.com/agent2env/agent2env/internal/session"
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
	// RuntimeBinary is the OCI runtime: "runc" (default), "crun", "runsc"
	// or a path.
	RuntimeBinary string
	// ImageDir holds the image store; default <DataDir>/images. Several
	// data directories may share one (one daemon at a time).
	ImageDir string
	// CacheDir keeps built images across image stores.
	CacheDir string
	// DebianMirror is the mirror built-in images are built from; empty
	// leaves mmdebstrap's default.
	DebianMirror string
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
	// Keys are the API keys clients must present; nil or empty means no
	// authentication, allowed only on loopback.
	Keys *auth.Keys
	// ShutdownTimeout bounds how long Serve waits for requests in flight.
	ShutdownTimeout time.Duration
	Log             *slog.Logger
}

// System is the running daemon.
type System struct {
	cfg       Config
	Store     *sqlite.Store
	Images    *image.Store
	Runtime   *oci.Runtime
	Manager   *manager.Manager
	Prepull   *prepull.Service
	Templates *template.Service
	Gateway   *gateway.Routes
	Contexts  *contexts.Service
	Sessions  *session.Service
	MCP       *mcpserver.Server
	Pools     *pool.Pools
	Metrics   *metrics.Metrics
	API       *httpapi.Server
	log       *slog.Logger
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
	if s.Runtime, err = oci.New(oci.Config{
		Root: filepath.Join(cfg.DataDir, "oci"), RuntimeBinary: cfg.RuntimeBinary, Logger: cfg.Log, Egress: proxy,
	}); err != nil {
		return nil, err
	}
	authOn, err := auth.Required(cfg.Listen, cfg.Keys.Len() > 0)
	if err != nil {
		return nil, err
	}
	// Templates and prepull tasks refer to each other: a template may be
	// prepulled on create, a prepull may name a template.
	s.Prepull = prepull.New(s.Store, s.Images, cfg.Log)
	s.Templates = template.New(s.Store, template.WithPrepuller(s.Prepull), template.WithLogger(cfg.Log))
	s.Prepull.SetTemplates(s.Templates)
	s.Metrics = metrics.New()
	s.Manager = manager.New(cfg.Manager, s.Runtime, s.Images, s.Store, cfg.Log,
		manager.WithTemplates(s.Templates), manager.WithMetrics(s.Metrics))
	if cfg.PublicURL == "" {
		cfg.PublicURL = "http://" + cfg.Listen
	}
	s.Gateway = gateway.New(s.Manager, cfg.Log)
	// Pools create through the manager, and the manager's creates take
	// from the pools.
	cfg.Contexts.Defaults = contexts.Sources(cfg.Contexts.Defaults)
	if s.Pools, err = pool.New(s.Manager, pool.Specs(cfg.WarmPools, cfg.Contexts.Defaults), cfg.Log); err != nil {
		return nil, err
	}
	s.Manager.SetWarmPool(s.Pools)
	s.Contexts = contexts.New(cfg.Contexts, s.Manager, s.Store, s.Pools, cfg.Log, contexts.WithMetrics(s.Metrics))
	if err := session.ApplyEnv(&cfg.Sessions, os.LookupEnv); err != nil {
		return nil, err
	}
	cfg.Sessions.MaxSandboxes = cfg.Manager.MaxSandboxes
	cfg.Sessions.PoolCPU, cfg.Sessions.PoolMemory = cfg.Manager.DefaultCPU, cfg.Manager.DefaultMemory
	if s.Sessions, err = session.New(cfg.Sessions, s.Manager, s.Store, s.Contexts, cfg.Log, session.WithUsage(s.Runtime)); err != nil {
		return nil, err
	}
	if err := s.Metrics.Register(s.Pools, s.Contexts, s.Sessions); err != nil {
		return nil, err
	}
	s.MCP = mcpserver.New(mcpserver.Config{ScopeByKey: authOn, Log: cfg.Log}, s.Contexts, s.Sessions)
	opts := []httpapi.Option{
		httpapi.WithRoutes(s.Gateway),
		httpapi.WithPublicURL(cfg.PublicURL),
		httpapi.WithRoutes(httpapi.NewTemplateRoutes(s.Templates)),
		httpapi.WithRoutes(httpapi.NewPrepullRoutes(s.Prepull)),
		httpapi.WithRoutes(httpapi.NewContextRoutes(s.Contexts)),
		httpapi.WithRoutes(httpapi.NewSessionRoutes(s.Sessions)),
		httpapi.WithRoutes(s.MCP),
		httpapi.WithMetrics(s.Metrics),
	}
	if authOn {
		// Sessions are scoped by the key that passed the auth.
		opts = append(opts, httpapi.WithMiddleware(httpapi.AuthMiddleware(cfg.Keys)), httpapi.WithMiddleware(httpapi.TenantMiddleware))
	}
	s.API = httpapi.New(s.Manager, s.Images, cfg.Log, opts...)
	if err := s.Manager.Recover(ctx); err != nil {
		return nil, err
	}
	if err := s.Prepull.Recover(ctx); err != nil {
		return nil, err
	}
	s.API.SetReady(true)
	return s, nil
}

// Serve answers API requests on l until ctx is done, then shuts down
// gracefully: no new connections, requests in flight finish (up to the
// shutdown timeout). Sandboxes keep running and are re-adopted next start.
func (s *System) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{
		Handler:           s.API.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	// HTTP/2 without TLS as well (prior knowledge), so that one connection
	// carries concurrent calls (MCP clients).
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	runCtx, stop := context.WithCancel(context.Background())
	defer stop()
	go s.Manager.Run(runCtx)
	go s.Sessions.Run(runCtx)
	poolsDone := make(chan struct{})
	go func() {
		defer close(poolsDone)
		s.Pools.Run(runCtx)
	}()
	// Sandboxes waiting in warm pools are nobody's: they go with the
	// daemon (and Recover deletes any a crash left).
	defer func() {
		stop()
		<-poolsDone
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
		defer cancel()
		if err := s.Pools.Close(ctx); err != nil {
			s.log.Warn("empty warm pools", "err", err)
		}
	}()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	s.log.Info("serving", "addr", l.Addr().String(), "data_dir", s.cfg.DataDir, "runtime", s.Runtime.Name())
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	s.log.Info("shutting down")
	shutCtx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		s.log.Warn("requests still running at shutdown", "err", err)
		srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Close releases the daemon's resources.
func (s *System) Close() {
	if s.Prepull != nil {
		s.Prepull.Close()
	}
	if s.Manager != nil {
		s.Manager.Close()
	}
	if s.Gateway != nil {
		s.Gateway.Close()
	}
	if s.Runtime != nil {
		s.Runtime.Close() // egress proxies; sandboxes keep running
	}
	if s.Store != nil {
		s.Store.Close()
	}
}
