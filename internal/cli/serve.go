package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/contexts"
	"github.com/agent2env/agent2env/internal/daemon"
	"github.com/agent2env/agent2env/internal/manager"
)

// serveCmd runs the daemon.
type serveCmd struct{ env }

// envOr returns the environment variable key, or def when it is unset.
func envOr(key, def string) string {
	if v, ok := os.LookupEnv(key); ok {
		return v
	}
	return def
}

func (c *serveCmd) Run(ctx context.Context, args []string) error {
	fs := newFlags(c.env, "serve", "serve [flags]")
	listen := fs.String("listen", envOr("AGENT2ENV_LISTEN", "127.0.0.1:8080"), "address to serve the API on (env AGENT2ENV_LISTEN)")
	dataDir := fs.String("data-dir", envOr("AGENT2ENV_DATA_DIR", "/var/lib/agent2env"), "state directory (env AGENT2ENV_DATA_DIR)")
	rt := fs.String("runtime", envOr("AGENT2ENV_RUNTIME", "runc"), "OCI runtime binary: runc, crun, runsc or a path (env AGENT2ENV_RUNTIME)")
	publicURL := fs.String("public-url", envOr("AGENT2ENV_PUBLIC_URL", ""), "base URL clients reach the daemon at, for sandboxes' accessUrl (env AGENT2ENV_PUBLIC_URL; default http://<listen>)")
	imageDir := fs.String("image-dir", envOr("AGENT2ENV_IMAGE_DIR", ""), "image store (env AGENT2ENV_IMAGE_DIR; default <data-dir>/images)")
	cacheDir := fs.String("cache-dir", envOr("AGENT2ENV_CACHE_DIR", ""), "cache for built images (env AGENT2ENV_CACHE_DIR; default /var/cache/agent2env)")
	mirror := fs.String("debian-mirror", envOr("AGENT2ENV_DEBIAN_MIRROR", ""), "Debian mirror URL the built-in images are built from (env AGENT2ENV_DEBIAN_MIRROR; default: mmdebstrap's)")
	insecure := fs.String("insecure-registries", envOr("AGENT2ENV_INSECURE_REGISTRIES", ""), "comma-separated registry hosts that may be pulled from over plain HTTP (env AGENT2ENV_INSECURE_REGISTRIES)")
	maxSandboxes := fs.Int("max-sandboxes", envInt("AGENT2ENV_MAX_SANDBOXES", 0), "maximum sandboxes at once, 0 for no limit (env AGENT2ENV_MAX_SANDBOXES)")
	keysFile := fs.String("api-keys-file", envOr(auth.EnvKeysFile, ""), "file of API keys (or their sha256: hashes), one per line (env "+auth.EnvKeysFile+"; keys also from "+auth.EnvKeys+")")
	warm := fs.String("warm-pools", envOr("AGENT2ENV_WARM_POOLS", ""), "warm pool sizes, e.g. python=2,javascript=1,mytemplate=3: per language (its default sandbox with its kernel started) or template (env AGENT2ENV_WARM_POOLS)")
	ctxTemplates := fs.String("context-templates", envOr("AGENT2ENV_CONTEXT_TEMPLATES", ""), "templates of the sandboxes made for contexts, per language, e.g. python=py311 (env AGENT2ENV_CONTEXT_TEMPLATES; default: the built-in images)")
	outputLimit := fs.Int64("context-output-limit", int64(envInt("AGENT2ENV_CONTEXT_OUTPUT_LIMIT", 10<<20)), "bytes of output one context execution keeps; more is dropped with a marker (env AGENT2ENV_CONTEXT_OUTPUT_LIMIT)")
	level := fs.String("log-level", envOr("AGENT2ENV_LOG_LEVEL", "info"), "debug, info, warn or error (env AGENT2ENV_LOG_LEVEL)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		return fmt.Errorf("%w: log level %q", errUsage, *level)
	}
	log := slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: lvl}))
	if os.Geteuid() != 0 {
		return fmt.Errorf("the daemon runs sandboxes with an OCI runtime and must run as root (try: sudo agent2env serve)")
	}
	keys, err := auth.Load(*keysFile, os.Getenv(auth.EnvKeys))
	if err != nil {
		return err
	}
	pools, err := parseAssignments(*warm)
	if err != nil {
		return fmt.Errorf("%w: --warm-pools: %v", errUsage, err)
	}
	sizes := make(map[string]int, len(pools))
	for name, v := range pools {
		if sizes[name], err = strconv.Atoi(v); err != nil || sizes[name] < 0 {
			return fmt.Errorf("%w: --warm-pools: size of %s must be a number of 0 or more", errUsage, name)
		}
	}
	templates, err := parseAssignments(*ctxTemplates)
	if err != nil {
		return fmt.Errorf("%w: --context-templates: %v", errUsage, err)
	}
	sources := make(map[string]contexts.Source, len(templates))
	for lang, tpl := range templates {
		if lang, err = contexts.Language(lang); err != nil {
			return fmt.Errorf("%w: --context-templates: %v", errUsage, err)
		}
		sources[lang] = contexts.Source{Template: tpl}
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *listen, err)
	}
	sys, err := daemon.New(ctx, daemon.Config{
		Keys: keys, Listen: *listen, PublicURL: *publicURL, DataDir: *dataDir, RuntimeBinary: *rt, ImageDir: *imageDir, CacheDir: *cacheDir,
		DebianMirror: *mirror, InsecureRegistries: splitList(*insecure), Log: log,
		Manager:   manager.Config{MaxSandboxes: *maxSandboxes},
		Contexts:  contexts.Config{Defaults: sources, OutputLimit: *outputLimit},
		WarmPools: sizes,
	})
	if err != nil {
		l.Close()
		return err
	}
	defer sys.Close()
	return sys.Serve(ctx, l)
}

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil {
		return v
	}
	return def
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
