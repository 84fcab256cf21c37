package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/contexts"
	"github.com/agent2env/agent2env/internal/daemon"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/quantity"
	"github.com/agent2env/agent2env/internal/runtime"
	"github.com/agent2env/agent2env/internal/session"
)

func newServeCmd(e env) *cobra.Command {
	var (
		cfg         serveConfig
		printConfig bool
	)
	c := &cobra.Command{
		Use:   "serve [flags]",
		Short: "run the daemon",
		Long: `serve runs the daemon: the REST API, the sandboxes (as root, with an OCI runtime, or
as Pods of a Kubernetes cluster: --runtime kubernetes) and their images. Each setting
is, in order: its flag, its environment variable (AGENT2ENV_ and the flag's name in
capitals, - as _: --max-sandboxes is AGENT2ENV_MAX_SANDBOXES), its
key in the YAML file --config names (the flag's name: "max-sandboxes: 20"), or its
default. A value that does not parse, wherever it comes from, stops the daemon.

API keys come from ` + auth.EnvKeys + ` (comma-separated) and --api-keys-file; they are
required when the daemon listens beyond loopback.`,
		Example: `  sudo agent2env serve
  sudo AGENT2ENV_API_KEYS=a2e_... agent2env serve --listen 0.0.0.0:8080 --public-url https://sandboxes.example.com
  sudo agent2env serve --config /etc/agent2env/config.yaml --log-level debug
  agent2env serve --config /etc/agent2env/config.yaml --print-config`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			src, err := loadServeConfig(c.LocalFlags(), e.getenv, &cfg)
			if err != nil {
				return &usageError{err: err}
			}
			s, err := cfg.settings()
			if err != nil {
				return &usageError{err: err}
			}
			if printConfig {
				return writeServeConfig(e.stdout, &cfg, src, onThisHost(&cfg, s), e.getenv(auth.EnvKeys) != "")
			}
			return serve(c.Context(), e, &cfg, s)
		},
	}
	cfg.register(c.Flags())
	c.Flags().String(keyConfig, "", "YAML file of settings, keys named like these flags (env "+envConfig+")")
	c.Flags().BoolVar(&printConfig, "print-config", false, "print the settings serve would run with, as YAML with API keys left out, and exit")
	return c
}

// serve runs the daemon with cfg until ctx ends (main ends it on SIGINT or
// SIGTERM), then shuts it down and returns nil when all went well.
func serve(ctx context.Context, e env, cfg *serveConfig, s *serveSettings) error {
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: s.level}))
	if os.Geteuid() != 0 && s.runtime == "oci" {
		return fmt.Errorf("the daemon runs sandboxes with an OCI runtime and must run as root (try: sudo agent2env serve)")
	}
	// From here the first SIGINT or SIGTERM ends ctx (main) and asks for a
	// graceful stop; the second exits at once: New's recovery and the
	// drain may both take long.
	defer exitOnSecondSignal(log)()
	keys, err := auth.Load(cfg.APIKeysFile, e.getenv(auth.EnvKeys))
	if err != nil {
		return err
	}
	// Listen before New: a daemon whose address is taken stops before it
	// opens the store and recovers sandboxes.
	l, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	cfg.Listen = boundListen(cfg.Listen, l.Addr())
	if s.runtime == "oci" {
		bin, releaseBin := resolveOCIBinary(s.runtimeSettings["oci.binary"], cfg.CacheDir, log)
		defer releaseBin()
		s.runtimeSettings["oci.binary"] = bin
		p, release := resolveCRIU(cfg.CRIU, cfg.CacheDir, log)
		defer release()
		if p != "" {
			s.runtimeSettings["oci.criu"] = p
		}
	}
	consoleL, err := listenConsole(cfg.ConsoleListen, l.Addr())
	if err != nil {
		l.Close()
		return err
	}
	sys, err := daemon.New(ctx, daemon.Config{
		Console: consoleL,
		Keys:    keys, Listen: cfg.Listen, PublicURL: cfg.PublicURL, DataDir: cfg.DataDir, Store: cfg.Store, Runtime: s.runtime, RuntimeSettings: s.runtimeSettings,
		ImageDir: cfg.ImageDir, CacheDir: cfg.CacheDir, DebianMirror: cfg.DebianMirror, PrebuildImages: cfg.PrebuildImages,
		InsecureRegistries: splitList(cfg.InsecureRegistries), Log: log,
		Manager: manager.Config{MaxSandboxes: cfg.MaxSandboxes, OutputBudget: cfg.OutputBudget, DiskReserve: cfg.DiskReserve,
			CPUOvercommit: cfg.CPUOvercommit, MemoryOvercommit: cfg.MemoryOvercommit,
			Owned: manager.OwnedLimits{MaxSandboxes: cfg.OwnedSandboxes, CPU: cfg.OwnedCPU, Memory: cfg.OwnedMemory}},
		Contexts: contexts.Config{Defaults: s.sources, OutputLimit: cfg.ContextOutputLimit,
			IdleTimeout: cfg.ContextIdleTimeout},
		WarmPools: s.pools,
		// Left zero, these take the MSB_* variables (session.ApplyEnv).
		Sessions: session.Config{DefaultFlavor: cfg.DefaultFlavor, IdleTimeout: cfg.SessionTimeout, Volumes: s.volumes,
			PauseAfter: cfg.SessionPauseAfter},
		FetchAllow: splitList(cfg.FetchAllow), AllowedHosts: splitList(cfg.AllowedHosts),
		TrustedOrigins: splitList(cfg.TrustedOrigins), PrivatePorts: cfg.PrivatePorts,
		TasksDir: cfg.TasksDir, MaxRuns: cfg.MaxRuns, RunMaxAge: cfg.RunMaxAge,
		HTTP: daemon.HTTPConfig{
			ReadHeaderTimeout: cfg.HTTPHeaderTimeout, IdleTimeout: cfg.HTTPIdleTimeout, StallTimeout: cfg.HTTPStallTimeout,
			MaxHeaderBytes: cfg.HTTPMaxHeaderBytes, MaxConns: cfg.MaxConns, MaxConnsPerClient: cfg.MaxConnsPerClient,
		},
		LLMConfig:  cfg.LLMConfig,
		LLMArchive: daemon.LLMArchiveConfig{MaxAge: cfg.LLMArchiveMaxAge, MaxSize: cfg.LLMArchiveMaxSize},
	})
	if err != nil {
		l.Close()
		if consoleL != nil {
			consoleL.Close()
		}
		return err
	}
	if cfg.LLMConfig != "" {
		defer reloadOnHangup(log, sys.ReloadLLM)()
	}
	// Close whatever Serve returned: it waits for the work started and
	// closes the store last, which checkpoints its WAL.
	err = sys.Serve(ctx, l)
	return errors.Join(err, sys.Close())
}

// reloadOnHangup calls reload on every SIGHUP, logging what fails (the
// configuration in use stays). It returns a func that stops watching.
func reloadOnHangup(log *slog.Logger, reload func() error) (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-sigs:
				if err := reload(); err != nil {
					log.Error("reload llm config: keeping the configuration in use", "err", err)
				}
			}
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
	}
}

// exitOnSecondSignal ends the process at once on the second SIGINT or
// SIGTERM it sees: the first asked for a graceful shutdown, which may wait
// for requests in flight up to the shutdown timeout; a second says not to
// wait. The exit status is a shell's for the signal (128+n). Sandboxes
// keep running and the store, in WAL mode, is consistent: the next start
// recovers both. It returns a func that stops watching.
func exitOnSecondSignal(log *slog.Logger) (stop func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		for n := 1; ; n++ {
			select {
			case <-done:
				return
			case sig := <-sigs:
				if n < 2 {
					continue
				}
				log.Error("second signal: exiting without waiting for the shutdown", "signal", sig.String())
				code := 1
				if s, ok := sig.(syscall.Signal); ok {
					code = 128 + int(s)
				}
				os.Exit(code)
			}
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
	}
}

// serveSettings are the settings that cfg holds as text, parsed.
type serveSettings struct {
	// runtime is the sandbox runtime's name, and runtimeSettings its
	// settings (runtime.Options.Settings).
	runtime         string
	runtimeSettings map[string]string
	level           slog.Level
	pools           map[string]int
	sources         map[string]contexts.Source
	volumes         []session.Volume
}

// settings parses and checks the values of cfg that are more than a
// string or a number; errors name the key.
func (cfg *serveConfig) settings() (*serveSettings, error) {
	s := &serveSettings{pools: map[string]int{}, sources: map[string]contexts.Source{}}
	if err := s.level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		return nil, fmt.Errorf("log-level %q: want debug, info, warn or error", cfg.LogLevel)
	}
	if cfg.CPUOvercommit <= 0 || cfg.MemoryOvercommit <= 0 {
		return nil, fmt.Errorf("cpu-overcommit and memory-overcommit must be above 0")
	}
	if cfg.OwnedCPU != "" {
		if _, err := quantity.ParseCPU(cfg.OwnedCPU); err != nil {
			return nil, fmt.Errorf("owned-cpu: %w", err)
		}
	}
	if cfg.OwnedMemory != "" {
		if _, err := quantity.ParseBytes(cfg.OwnedMemory); err != nil {
			return nil, fmt.Errorf("owned-memory: %w", err)
		}
	}
	if cfg.ContextIdleTimeout <= 0 {
		return nil, fmt.Errorf("context-idle-timeout must be above 0")
	}
	pools, err := parseAssignments(cfg.WarmPools)
	if err != nil {
		return nil, fmt.Errorf("warm-pools: %w", err)
	}
	for name, v := range pools {
		if s.pools[name], err = strconv.Atoi(v); err != nil || s.pools[name] < 0 {
			return nil, fmt.Errorf("warm-pools: size of %s must be a number of 0 or more", name)
		}
	}
	templates, err := parseAssignments(cfg.ContextTemplates)
	if err != nil {
		return nil, fmt.Errorf("context-templates: %w", err)
	}
	for lang, tpl := range templates {
		if lang, err = contexts.Language(lang); err != nil {
			return nil, fmt.Errorf("context-templates: %w", err)
		}
		s.sources[lang] = contexts.Source{Template: tpl}
	}
	if cfg.SharedVolumes != "" {
		if s.volumes, err = session.ParseVolumes(cfg.SharedVolumes); err != nil {
			return nil, fmt.Errorf("shared-volumes: %w", err)
		}
	}
	if cfg.SessionTimeout < 0 {
		return nil, fmt.Errorf("session-timeout %v: must not be negative", cfg.SessionTimeout)
	}
	if cfg.SessionPauseAfter < 0 {
		return nil, fmt.Errorf("session-pause-after %v: must not be negative", cfg.SessionPauseAfter)
	}
	if cfg.RunMaxAge < 0 {
		return nil, fmt.Errorf("run-max-age %v: must not be negative", cfg.RunMaxAge)
	}
	if cfg.LLMArchiveMaxAge < 0 || cfg.LLMArchiveMaxSize < 0 {
		return nil, fmt.Errorf("llm-archive-max-age %v, llm-archive-max-size %d: must not be negative", cfg.LLMArchiveMaxAge, cfg.LLMArchiveMaxSize)
	}
	if err := cfg.runtimeSettings(s); err != nil {
		return nil, err
	}
	return s, nil
}

// runtimeSettings sets the runtime's name and settings: --runtime names
// the OCI runtime's binary, or, for short, another runtime.
func (cfg *serveConfig) runtimeSettings(s *serveSettings) error {
	s.runtime, s.runtimeSettings = cfg.RuntimeKind, map[string]string{}
	if cfg.Runtime != "oci" && slices.Contains(runtime.Names(), cfg.Runtime) {
		if cfg.RuntimeKind != "oci" && cfg.RuntimeKind != cfg.Runtime {
			return fmt.Errorf("runtime %q and runtime-kind %q name different runtimes", cfg.Runtime, cfg.RuntimeKind)
		}
		s.runtime = cfg.Runtime
	}
	if p := cfg.DiskProvisioning; p != "thin" && p != "thick" {
		return fmt.Errorf("disk-provisioning %q: must be thin or thick", p)
	}
	if cfg.DiskProvisioning == "thick" && s.runtime != "oci" {
		return fmt.Errorf("disk-provisioning thick is the oci runtime's; runtime %s provisions storage its own way", s.runtime)
	}
	switch s.runtime {
	case "oci":
		s.runtimeSettings["oci.binary"] = cfg.Runtime
		s.runtimeSettings["oci.disk-provisioning"] = cfg.DiskProvisioning
		s.runtimeSettings["oci.disk-reserve"] = strconv.FormatInt(cfg.DiskReserve, 10)
	case "kubernetes": // its settings by name: the runtime may be left out (no_kube)
		for key, v := range map[string]string{
			"kubeconfig": cfg.Kubeconfig, "namespace": cfg.KubeNamespace, "connect": cfg.KubeConnect,
			"agent-image": cfg.KubeAgentImage, "runtime-class": cfg.KubeRuntimeClass, "pull-secrets": cfg.KubePullSecrets,
		} {
			if v != "" {
				s.runtimeSettings["kubernetes."+key] = v
			}
		}
	}
	return nil
}

// parseAssignments parses "a=1,b=2" into a map.
func parseAssignments(list string) (map[string]string, error) {
	out := map[string]string{}
	for _, item := range splitList(list) {
		k, v, ok := strings.Cut(item, "=")
		if !ok || strings.TrimSpace(k) == "" || strings.TrimSpace(v) == "" {
			return nil, fmt.Errorf("%q is not NAME=VALUE", item)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out, nil
}

// splitList splits a comma-separated value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// boundListen is listen with the port the listener took (addr) where it
// asked for any ("127.0.0.1:0"): the daemon's public URL, its endpoints
// and its data dir's lock name the port it serves on, not 0.
func boundListen(listen string, addr net.Addr) string {
	host, port, err := net.SplitHostPort(listen)
	tcp, ok := addr.(*net.TCPAddr)
	if err != nil || port != "0" || !ok {
		return listen
	}
	return net.JoinHostPort(host, strconv.Itoa(tcp.Port))
}
