package cli

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/posflag"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/runtime"
	_ "github.com/agent2env/agent2env/internal/runtime/all" // their names for --runtime-kind
	"github.com/agent2env/agent2env/internal/store/postgres"
	"github.com/agent2env/agent2env/internal/yamlerr"
)

// serveConfig is the daemon's configuration. Every field is a flag of
// serve and a key of the --config file, named by its yaml tag; see
// loadServeConfig for where its value comes from.
type serveConfig struct {
	Listen             string        `yaml:"listen"`
	ConsoleListen      string        `yaml:"console-listen"`
	DataDir            string        `yaml:"data-dir"`
	Store              string        `yaml:"store"`
	Runtime            string        `yaml:"runtime"`
	RuntimeKind        string        `yaml:"runtime-kind"`
	PublicURL          string        `yaml:"public-url"`
	ImageDir           string        `yaml:"image-dir"`
	CacheDir           string        `yaml:"cache-dir"`
	DebianMirror       string        `yaml:"debian-mirror"`
	PrebuildImages     bool          `yaml:"prebuild-images"`
	InsecureRegistries string        `yaml:"insecure-registries"`
	MaxSandboxes       int           `yaml:"max-sandboxes"`
	CPUOvercommit      float64       `yaml:"cpu-overcommit"`
	MemoryOvercommit   float64       `yaml:"memory-overcommit"`
	APIKeysFile        string        `yaml:"api-keys-file"`
	WarmPools          string        `yaml:"warm-pools"`
	ContextTemplates   string        `yaml:"context-templates"`
	ContextOutputLimit int64         `yaml:"context-output-limit"`
	ContextIdleTimeout time.Duration `yaml:"context-idle-timeout"`
	OwnedSandboxes     int           `yaml:"owned-sandboxes"`
	OwnedCPU           string        `yaml:"owned-cpu"`
	OwnedMemory        string        `yaml:"owned-memory"`
	LogLevel           string        `yaml:"log-level"`
	FetchAllow         string        `yaml:"fetch-allow"`
	AllowedHosts       string        `yaml:"allowed-hosts"`
	TrustedOrigins     string        `yaml:"trusted-origins"`
	PrivatePorts       bool          `yaml:"private-ports"`
	HTTPHeaderTimeout  time.Duration `yaml:"http-header-timeout"`
	HTTPIdleTimeout    time.Duration `yaml:"http-idle-timeout"`
	HTTPStallTimeout   time.Duration `yaml:"http-stall-timeout"`
	HTTPMaxHeaderBytes int           `yaml:"http-max-header-bytes"`
	MaxConns           int           `yaml:"max-conns"`
	MaxConnsPerClient  int           `yaml:"max-conns-per-client"`
	OutputBudget       int64         `yaml:"output-budget"`
	DiskReserve        int64         `yaml:"disk-reserve"`
	DiskProvisioning   string        `yaml:"disk-provisioning"`
	DefaultFlavor      string        `yaml:"default-flavor"`
	SessionTimeout     time.Duration `yaml:"session-timeout"`
	SessionPauseAfter  time.Duration `yaml:"session-pause-after"`
	SharedVolumes      string        `yaml:"shared-volumes"`
	LLMConfig          string        `yaml:"llm-config"`
	LLMArchiveMaxAge   time.Duration `yaml:"llm-archive-max-age"`
	LLMArchiveMaxSize  int64         `yaml:"llm-archive-max-size"`
	TasksDir           string        `yaml:"tasks-dir"`
	MaxRuns            int           `yaml:"max-runs"`
	RunMaxAge          time.Duration `yaml:"run-max-age"`
	Kubeconfig         string        `yaml:"kubeconfig"`
	KubeNamespace      string        `yaml:"kube-namespace"`
	KubeConnect        string        `yaml:"kube-connect"`
	KubeAgentImage     string        `yaml:"kube-agent-image"`
	KubeRuntimeClass   string        `yaml:"kube-runtime-class"`
	KubePullSecrets    string        `yaml:"kube-pull-secrets"`
	CRIU               string        `yaml:"criu"`
}

// register adds a flag for each field of cfg, with its default.
func (cfg *serveConfig) register(f *pflag.FlagSet) {
	f.StringVar(&cfg.Listen, "listen", "127.0.0.1:8080", "address to serve the API on")
	f.StringVar(&cfg.ConsoleListen, "console-listen", consoleAuto, "address to serve the web console on, an origin of its own; "+consoleAuto+": loopback, the API's port + 1 (another free port when that one is taken); empty: no console")
	f.StringVar(&cfg.DataDir, "data-dir", "/var/lib/agent2env", "state directory")
	f.StringVar(&cfg.Store, "store", "sqlite", "where the records are kept: sqlite (the file <data-dir>/state.db) or a PostgreSQL URL, postgres://user@host:5432/database (a password also from PGPASSWORD or ~/.pgpass)")
	f.StringVar(&cfg.Runtime, "runtime", runtimeAuto, "OCI runtime binary: auto (the crun make crun built, cached under the cache dir, else runc), runc, crun (that one, else crun on PATH), runsc or a path; or, for short, another sandbox runtime (--runtime kubernetes is --runtime-kind kubernetes)")
	f.StringVar(&cfg.RuntimeKind, "runtime-kind", "oci", "the sandbox runtime: "+strings.Join(runtime.Names(), ", "))
	f.StringVar(&cfg.PublicURL, "public-url", "", "base URL clients reach the daemon at, for sandboxes' accessUrl (default http://<listen>)")
	f.StringVar(&cfg.ImageDir, "image-dir", "", "image store (default <data-dir>/images)")
	f.StringVar(&cfg.CacheDir, "cache-dir", "", "cache for built images (default /var/cache/agent2env)")
	f.StringVar(&cfg.DebianMirror, "debian-mirror", "", "Debian mirror URL the built-in images are built from (default: mmdebstrap's)")
	f.BoolVar(&cfg.PrebuildImages, "prebuild-images", true, "build the built-in images the defaults use (agent2env/code-interpreter, the warm pools' images) in the background from the start, when not stored yet (minutes of CPU on first start)")
	f.StringVar(&cfg.InsecureRegistries, "insecure-registries", "", "comma-separated registry hosts that may be pulled from over plain HTTP")
	f.IntVar(&cfg.MaxSandboxes, "max-sandboxes", 0, "maximum sandboxes at once, 0 for no limit (past it a create is 429 RESOURCE_LIMIT)")
	f.Float64Var(&cfg.CPUOvercommit, "cpu-overcommit", 16, "the cpu limits of pending, running and paused sandboxes may add up to the host's cpus times this (past it a create is 507 INSUFFICIENT_CAPACITY)")
	f.Float64Var(&cfg.MemoryOvercommit, "memory-overcommit", 2, "the memory limits of pending, running and paused sandboxes may add up to the host's memory times this (past it a create is 507 INSUFFICIENT_CAPACITY)")
	f.StringVar(&cfg.APIKeysFile, "api-keys-file", "", "file of API keys (or their sha256: hashes), one per line (keys also from "+auth.EnvKeys+")")
	f.StringVar(&cfg.WarmPools, "warm-pools", "", "warm pool sizes, e.g. python=2,javascript=1,mytemplate=3: per language (its default sandbox with its kernel started) or template")
	f.StringVar(&cfg.ContextTemplates, "context-templates", "", "templates of the sandboxes made for contexts, per language, e.g. python=py311 (default: the built-in images)")
	f.Int64Var(&cfg.ContextOutputLimit, "context-output-limit", 10<<20, "bytes of output one context execution keeps; more is dropped with a marker")
	f.DurationVar(&cfg.ContextIdleTimeout, "context-idle-timeout", 30*time.Minute, "a context in no session idle this long is ended (a session's contexts end with it)")
	f.IntVar(&cfg.OwnedSandboxes, "owned-sandboxes", 4, "sandboxes (sessions, contexts' sandboxes) the code in one sandbox may make through the daemon's MCP server, -1 for none; past it 429 RESOURCE_LIMIT")
	f.StringVar(&cfg.OwnedCPU, "owned-cpu", "", "cpu those sandboxes of one sandbox may have in all (default: the sandbox's own, at least 1)")
	f.StringVar(&cfg.OwnedMemory, "owned-memory", "", "memory those sandboxes of one sandbox may have in all (default: the sandbox's own, at least 1Gi)")
	f.StringVar(&cfg.LogLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&cfg.FetchAllow, "fetch-allow", "", "comma-separated hosts, IP addresses or CIDR prefixes that template file sources may be fetched from although internal (mirrors)")
	f.StringVar(&cfg.AllowedHosts, "allowed-hosts", "", "comma-separated Host header values the API accepts besides its listen address, loopback and the public URL's host; *.example.com accepts every name under example.com, * any")
	f.StringVar(&cfg.TrustedOrigins, "trusted-origins", "", "comma-separated web origins (scheme://host[:port]) whose pages may use the API: send state-changing requests and call it across origins (CORS)")
	f.BoolVar(&cfg.PrivatePorts, "private-ports", false, "every sandbox port requires its sandbox's access token, also those of sandboxes the E2B API made public, as E2B's are by default (network.allowPublicTraffic), at <port>-<id>.<domain>")
	f.DurationVar(&cfg.HTTPHeaderTimeout, "http-header-timeout", 10*time.Second, "time a client has to send a request's headers")
	f.DurationVar(&cfg.HTTPIdleTimeout, "http-idle-timeout", 120*time.Second, "an idle keep-alive connection is closed after this long")
	f.DurationVar(&cfg.HTTPStallTimeout, "http-stall-timeout", 60*time.Second, "a request body or response that moves no byte this long is ended")
	f.IntVar(&cfg.HTTPMaxHeaderBytes, "http-max-header-bytes", 64<<10, "largest request headers accepted")
	f.IntVar(&cfg.MaxConns, "max-conns", 4096, "connections open at once; more wait")
	f.IntVar(&cfg.MaxConnsPerClient, "max-conns-per-client", 1024, "connections from one IP address at once; more are refused with 429")
	f.StringVar(&cfg.DefaultFlavor, "default-flavor", "", "flavor of sessions that name none: small, medium or large (default: $MSB_DEFAULT_FLAVOR, else small)")
	f.DurationVar(&cfg.SessionTimeout, "session-timeout", 0, "a session idle this long is ended with its sandbox (default: $MSB_SESSION_TIMEOUT, else 30m)")
	f.DurationVar(&cfg.SessionPauseAfter, "session-pause-after", 0, "a session idle this long has its sandbox paused in memory (no CPU), resumed by its next request; checked every 30s (default 0: never)")
	f.StringVar(&cfg.SharedVolumes, "shared-volumes", "", `host directories mounted into session sandboxes, "/host:/guest" comma-separated; each session sees its own subdirectory; a third field "common" shares it, "ro" mounts it read-only (default: $MSB_SHARED_VOLUME_PATH)`)
	f.StringVar(&cfg.LLMConfig, "llm-config", "", "YAML file of the LLM proxy's providers, models and limits (served at /llm and in every sandbox at http://127.0.0.1:4000/llm); SIGHUP reads it again")
	f.DurationVar(&cfg.LLMArchiveMaxAge, "llm-archive-max-age", 0, "exchanges with models older than this are removed from the LLM archive (0: kept)")
	f.Int64Var(&cfg.LLMArchiveMaxSize, "llm-archive-max-size", 0, "bytes the LLM archive keeps at most; the oldest exchanges go first (0: no limit)")
	f.StringVar(&cfg.TasksDir, "tasks-dir", "", "directory of task files that run submissions may name (task run --name)")
	f.IntVar(&cfg.MaxRuns, "max-runs", 16, "task runs going at once; more wait queued")
	f.DurationVar(&cfg.RunMaxAge, "run-max-age", 30*24*time.Hour, "task runs that ended longer ago than this are removed with their logs and artifacts, checked every 10m (0: kept until deleted)")
	f.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubernetes runtime: kubeconfig file of the cluster (default: the in-cluster service account)")
	f.StringVar(&cfg.KubeNamespace, "kube-namespace", "", "kubernetes runtime: namespace of the sandboxes' Pods (default: the service account's, else default)")
	f.StringVar(&cfg.KubeConnect, "kube-connect", "direct", "kubernetes runtime: how the daemon reaches agents: direct (the Pod's IP, in the cluster) or port-forward (through the API server)")
	f.StringVar(&cfg.KubeAgentImage, "kube-agent-image", "", "kubernetes runtime: the agent2env image Pods copy the agent from (default: the daemon's own, when it runs in a Pod with $POD_NAME set; else agent2env/agent2env:<this version>, make image)")
	f.StringVar(&cfg.KubeRuntimeClass, "kube-runtime-class", "", "kubernetes runtime: runtimeClassName of the sandboxes' Pods (gVisor, Kata)")
	f.StringVar(&cfg.KubePullSecrets, "kube-pull-secrets", "", "kubernetes runtime: comma-separated imagePullSecrets of the sandboxes' Pods")
	f.StringVar(&cfg.CRIU, "criu", criuAuto, "oci runtime: the criu program snapshots (checkpoint and restore) use: auto (the one make criu cached under the cache dir, else criu on PATH, if criu check passes; otherwise snapshots are off, with the reason logged), off, or a path")
	f.Int64Var(&cfg.DiskReserve, "disk-reserve", 1<<30, "bytes the data dir's file system keeps free: with fewer free a create or start is 507 NO_SPACE (thin sandbox disks grow into it; a thick one's allocation must leave it free; 0: not checked)")
	f.StringVar(&cfg.DiskProvisioning, "disk-provisioning", "thin", "oci runtime: thin (sandbox disks are sparse files that take room as they are written: the host's file system filling up loses their writes) or thick (each disk's whole size is allocated when it is made; a create without that room plus --disk-reserve is 507 NO_SPACE)")
	f.Int64Var(&cfg.OutputBudget, "output-budget", 256<<20, "bytes of command and code output the daemon buffers across all executions; one sandbox's hold at most half, each stream's first 64 KiB come first; past it output is dropped and results say truncated")
}

// The flags of serve that are not settings, and the variable that may name
// the config file instead of --config.
const (
	keyConfig      = "config"
	keyPrintConfig = "print-config"
	envConfig      = "AGENT2ENV_CONFIG"
)

// envName is the environment variable of the setting key:
// max-sandboxes is AGENT2ENV_MAX_SANDBOXES.
func envName(key string) string {
	return "AGENT2ENV_" + strings.ToUpper(strings.ReplaceAll(key, "-", "_"))
}

// keyDelim separates the levels of koanf's keys; settings have one level,
// and no key contains it.
const keyDelim = "/"

// isSetting reports whether the flag f of serve is a setting.
func isSetting(f *pflag.Flag) bool {
	return f.Name != keyConfig && f.Name != keyPrintConfig && f.Name != "help"
}

// loadServeConfig fills cfg, whose flags fs holds (and no others), from, in order of
// precedence: the flags given, the environment (getenv), the config file
// (--config or AGENT2ENV_CONFIG) and the flags' defaults. A value that
// does not parse, or a key of the file that is not a setting, is an error
// saying where it came from. It returns where each setting's value came
// from, by key.
func loadServeConfig(fs *pflag.FlagSet, getenv func(string) string, cfg *serveConfig) (map[string]string, error) {
	// Each Load overrides what the ones before it loaded: so the file
	// first, then the environment, then the flags.
	source := map[string]string{}
	k := koanf.New(keyDelim)
	path, _ := fs.GetString(keyConfig)
	if path == "" {
		path = getenv(envConfig)
	}
	if path != "" {
		values, err := readServeConfigFile(path, fs)
		if err != nil {
			return nil, err
		}
		// Each value is checked alone, while its source is known: once
		// merged, a bad value could not say where it came from.
		for key, v := range values {
			if err := checkSetting(fs.Lookup(key), v); err != nil {
				return nil, fmt.Errorf("config file %s: %w", path, err)
			}
			source[key] = "config file"
		}
		k.Load(confmap.Provider(values, keyDelim), nil)
	}
	env := map[string]any{}
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		v := getenv(envName(f.Name))
		if !isSetting(f) || v == "" || err != nil {
			return
		}
		if cerr := checkSetting(f, v); cerr != nil {
			err = fmt.Errorf("environment variable %s: %w", envName(f.Name), cerr)
		}
		env[f.Name] = v
		source[f.Name] = envName(f.Name)
	})
	if err != nil {
		return nil, err
	}
	k.Load(confmap.Provider(env, keyDelim), nil)
	// The flags given override everything; the defaults fill in the rest.
	// Given k, posflag loads an unchanged flag's default only for a key k
	// does not have yet, so a default never overrides the file or the
	// environment.
	k.Load(posflag.ProviderWithFlag(fs, keyDelim, k, func(f *pflag.Flag) (string, any) {
		if !isSetting(f) {
			return "", nil
		}
		switch {
		case f.Changed:
			source[f.Name] = "flag --" + f.Name
		case source[f.Name] == "":
			source[f.Name] = "default"
		}
		return f.Name, posflag.FlagVal(fs, f)
	}), nil)
	if err := unmarshalSettings(k, cfg); err != nil {
		return nil, err
	}
	return source, nil
}

// unmarshalSettings decodes k into cfg: strings to numbers where cfg has
// numbers (WeaklyTypedInput: the environment and the file give text, as
// flags take it), and no key that is not a setting.
func unmarshalSettings(k *koanf.Koanf, cfg *serveConfig) error {
	err := k.UnmarshalWithConf("", cfg, koanf.UnmarshalConf{Tag: "yaml", DecoderConfig: &mapstructure.DecoderConfig{
		DecodeHook:       mapstructure.StringToTimeDurationHookFunc(),
		WeaklyTypedInput: true,
		ErrorUnused:      true,
	}})
	// mapstructure's errors start with a line of its own; keep the cause.
	var de *mapstructure.DecodeError
	if errors.As(err, &de) {
		return fmt.Errorf("%s: %w", de.Name(), de.Unwrap())
	}
	return err
}

// checkSetting decodes the one value v of the setting of flag f, saying
// what the setting wants when v is not one.
func checkSetting(f *pflag.Flag, v any) error {
	k := koanf.New(keyDelim)
	k.Set(f.Name, v)
	err := unmarshalSettings(k, &serveConfig{})
	if err == nil {
		return nil
	}
	if want := valueWant(f.Value.Type(), err); want != "" {
		return fmt.Errorf("%s: invalid value %q: %s", f.Name, fmt.Sprint(v), want)
	}
	return fmt.Errorf("%s: invalid value %q: %w", f.Name, fmt.Sprint(v), errors.Unwrap(err))
}

// listKeys are the settings that are comma-separated lists, which a
// config file may also give as a YAML list or mapping.
var listKeys = map[string]bool{"insecure-registries": true, "warm-pools": true, "context-templates": true,
	"fetch-allow": true, "allowed-hosts": true, "trusted-origins": true}

// readServeConfigFile reads the settings of a config file as their flags
// would take them: a list is comma-separated, a mapping NAME=VALUE pairs
// (warm-pools: {python: 2}).
func readServeConfigFile(path string, fs *pflag.FlagSet) (map[string]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config file: %w", err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("config file %s: %s", path, yamlerr.Explain(err, nil))
	}
	var unknown []string
	values := map[string]any{}
	for key, v := range doc {
		if f := fs.Lookup(key); f == nil || !isSetting(f) {
			unknown = append(unknown, key)
			continue
		}
		s, err := settingText(v, listKeys[key])
		if err != nil {
			return nil, fmt.Errorf("config file %s: %s: %w", path, key, err)
		}
		// "key:" with no value (null) leaves the setting to the
		// environment or its default, rather than setting it empty.
		if v != nil {
			values[key] = s
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("config file %s: unknown keys: %s (the keys are serve's flags, such as max-sandboxes)",
			path, strings.Join(unknown, ", "))
	}
	return values, nil
}

// settingText writes the YAML value v as a flag's text; a list or a
// mapping only if list.
func settingText(v any, list bool) (string, error) {
	switch v.(type) {
	case []any, map[string]any:
		if !list {
			return "", errors.New("want a single value")
		}
	}
	switch v := v.(type) {
	case []any:
		items := make([]string, len(v))
		for i, item := range v {
			if !isScalar(item) {
				return "", errors.New("want a list of values")
			}
			items[i] = fmt.Sprint(item)
		}
		return strings.Join(items, ","), nil
	case map[string]any:
		items := make([]string, 0, len(v))
		for name, item := range v {
			if !isScalar(item) {
				return "", errors.New("want a mapping of names to values")
			}
			items = append(items, fmt.Sprintf("%s=%v", name, item))
		}
		// A mapping has no order: sorted, the same file gives the same
		// setting (and --print-config the same output).
		sort.Strings(items)
		return strings.Join(items, ","), nil
	case nil:
		return "", nil
	}
	if !isScalar(v) {
		return "", errors.New("want a value, a list or a mapping")
	}
	return fmt.Sprint(v), nil
}

func isScalar(v any) bool {
	switch v.(type) {
	case string, int, int64, uint64, float64, bool:
		return true
	}
	return false
}

// writeServeConfig writes cfg as a config file would hold it, each key
// commented with where its value came from (source) and, for a value
// decided when the daemon starts, what it comes to (here). API keys, the
// secrets, are never written; hasKeys says whether the environment holds
// some.
func writeServeConfig(w io.Writer, cfg *serveConfig, source, here map[string]string, hasKeys bool) error {
	// A store URL's password is a secret too.
	shown := *cfg
	shown.Store = postgres.Redact(cfg.Store)
	var n yaml.Node
	if err := n.Encode(&shown); err != nil {
		return err
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key := n.Content[i].Value
		n.Content[i+1].LineComment = source[key]
		if v, ok := here[key]; ok && v != n.Content[i+1].Value {
			n.Content[i+1].LineComment += "; on this host: " + v
		}
	}
	n.HeadComment = "agent2env serve: the effective settings (flag > environment > config file > default)"
	if hasKeys {
		n.HeadComment += "\napi keys: set in " + auth.EnvKeys + " (not shown)"
	}
	return writeYAMLNode(w, &n)
}

// onThisHost says what the settings decided when the daemon starts come
// to on this host, for --print-config: the OCI runtime binary and the
// criu of auto, the default directories, the console's address of auto.
// It starts nothing: criu is checked (criu check) when the daemon starts.
func onThisHost(cfg *serveConfig, s *serveSettings) map[string]string {
	here := map[string]string{}
	discard := slog.New(slog.DiscardHandler)
	if s.runtime == "oci" {
		bin, release := resolveOCIBinary(s.runtimeSettings["oci.binary"], cfg.CacheDir, discard)
		release()
		here["runtime"] = bin
		p, release := resolveCRIU(cfg.CRIU, cfg.CacheDir, discard)
		release()
		here["criu"] = cmp.Or(p, "none: snapshots are off")
	}
	if cfg.ImageDir == "" {
		here["image-dir"] = filepath.Join(cfg.DataDir, "images")
	}
	if cfg.CacheDir == "" {
		here["cache-dir"] = cacheRoot("")
	}
	if cfg.ConsoleListen == consoleAuto {
		here["console-listen"] = "127.0.0.1, the API's port + 1 (another free port when that one is taken)"
		if _, port, err := net.SplitHostPort(cfg.Listen); err == nil {
			if n, err := strconv.Atoi(port); err == nil && n > 0 && n < 65535 {
				here["console-listen"] = fmt.Sprintf("127.0.0.1:%d (another free port when that one is taken)", n+1)
			}
		}
	}
	return here
}
