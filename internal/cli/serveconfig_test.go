package cli

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"

	"github.com/agent2env/agent2env/internal/runtime"
)

// runServe runs "agent2env serve args..." with the environment vars
// only, and returns its exit code and output.
func runServe(t *testing.T, vars map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	e := env{stdout: &out, stderr: &errOut, lookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
	cmd, err := execute(t.Context(), e, append([]string{"serve"}, args...))
	return report(&errOut, cmd, err), out.String(), errOut.String()
}

// defaultServeConfig is what serve runs with when nothing is set.
var defaultServeConfig = serveConfig{Listen: "127.0.0.1:8080", ConsoleListen: consoleAuto, DataDir: "/var/lib/agent2env", Store: "sqlite", Runtime: "auto", RuntimeKind: "oci",
	ContextOutputLimit: 10 << 20, LogLevel: "info", HTTPHeaderTimeout: 10 * time.Second, HTTPIdleTimeout: 2 * time.Minute,
	HTTPStallTimeout: time.Minute, HTTPMaxHeaderBytes: 64 << 10, MaxConns: 4096, MaxConnsPerClient: 1024, KubeConnect: "direct",
	OutputBudget: 256 << 20, DiskReserve: 1 << 30, DiskProvisioning: "thin", CPUOvercommit: 16, MemoryOvercommit: 2, MaxRuns: 16,
	RunMaxAge:          30 * 24 * time.Hour,
	ContextIdleTimeout: 30 * time.Minute, OwnedSandboxes: 4, PrebuildImages: true, CRIU: "auto"}

// TestServeConfig checks the precedence flag > environment > file >
// default through --print-config, which stops before the daemon starts.
func TestServeConfig(t *testing.T) {
	const file = `listen: 0.0.0.0:9000
max-sandboxes: 5
log-level: warn
warm-pools: {python: 2, javascript: 1}
insecure-registries: [reg.local, 10.0.0.1:5000]
context-output-limit: 1024
http-stall-timeout: 90s
allowed-hosts: [a2e.example, a2e.internal]
runtime:
`
	tests := []struct {
		name string
		args []string
		env  map[string]string
		file bool // --config names the file above
		want func(c *serveConfig)
	}{
		{name: "defaults", want: func(*serveConfig) {}},
		{name: "file", file: true, want: func(c *serveConfig) {
			c.Listen, c.MaxSandboxes, c.LogLevel, c.ContextOutputLimit = "0.0.0.0:9000", 5, "warn", 1024
			c.WarmPools, c.InsecureRegistries = "javascript=1,python=2", "reg.local,10.0.0.1:5000"
			c.HTTPStallTimeout, c.AllowedHosts = 90*time.Second, "a2e.example,a2e.internal"
		}},
		{name: "environment over file", file: true,
			env: map[string]string{"AGENT2ENV_MAX_SANDBOXES": "7", "AGENT2ENV_WARM_POOLS": "bash=1", "AGENT2ENV_DATA_DIR": "/srv/a2e"},
			want: func(c *serveConfig) {
				c.Listen, c.MaxSandboxes, c.LogLevel, c.ContextOutputLimit = "0.0.0.0:9000", 7, "warn", 1024
				c.WarmPools, c.InsecureRegistries, c.DataDir = "bash=1", "reg.local,10.0.0.1:5000", "/srv/a2e"
				c.HTTPStallTimeout, c.AllowedHosts = 90*time.Second, "a2e.example,a2e.internal"
			}},
		{name: "flags over environment", file: true, args: []string{"--max-sandboxes", "9", "--listen=[::1]:1", "--log-level", "info"},
			env: map[string]string{"AGENT2ENV_MAX_SANDBOXES": "7", "AGENT2ENV_LISTEN": "127.0.0.1:2"},
			want: func(c *serveConfig) {
				c.Listen, c.MaxSandboxes, c.ContextOutputLimit = "[::1]:1", 9, 1024
				c.WarmPools, c.InsecureRegistries = "javascript=1,python=2", "reg.local,10.0.0.1:5000"
				c.HTTPStallTimeout, c.AllowedHosts = 90*time.Second, "a2e.example,a2e.internal"
			}},
		{name: "a flag set to its default still wins", file: true, args: []string{"--max-sandboxes", "0"},
			env: map[string]string{"AGENT2ENV_MAX_SANDBOXES": "7"},
			want: func(c *serveConfig) {
				c.Listen, c.LogLevel, c.ContextOutputLimit = "0.0.0.0:9000", "warn", 1024
				c.WarmPools, c.InsecureRegistries = "javascript=1,python=2", "reg.local,10.0.0.1:5000"
				c.HTTPStallTimeout, c.AllowedHosts = 90*time.Second, "a2e.example,a2e.internal"
			}},
		{name: "file named by the environment", env: map[string]string{envConfig: "FILE"}, want: func(c *serveConfig) {
			c.Listen, c.MaxSandboxes, c.LogLevel, c.ContextOutputLimit = "0.0.0.0:9000", 5, "warn", 1024
			c.WarmPools, c.InsecureRegistries = "javascript=1,python=2", "reg.local,10.0.0.1:5000"
			c.HTTPStallTimeout, c.AllowedHosts = 90*time.Second, "a2e.example,a2e.internal"
		}},
		{name: "empty variables are unset", env: map[string]string{"AGENT2ENV_RUNTIME": "", "AGENT2ENV_MAX_SANDBOXES": ""},
			want: func(*serveConfig) {}},
		{name: "prebuild off by flag", args: []string{"--prebuild-images=false"}, want: func(c *serveConfig) {
			c.PrebuildImages = false
		}},
		{name: "prebuild off by environment", env: map[string]string{"AGENT2ENV_PREBUILD_IMAGES": "false"}, want: func(c *serveConfig) {
			c.PrebuildImages = false
		}},
		{name: "prebuild: the flag over the environment", args: []string{"--prebuild-images"},
			env: map[string]string{"AGENT2ENV_PREBUILD_IMAGES": "0"}, want: func(c *serveConfig) {}},
		{name: "store from the environment", env: map[string]string{"AGENT2ENV_STORE": "postgres://a2e@db:5432/a2e"},
			want: func(c *serveConfig) { c.Store = "postgres://a2e@db:5432/a2e" }},
		{name: "store: the flag over the environment", args: []string{"--store", "sqlite"},
			env: map[string]string{"AGENT2ENV_STORE": "postgres://a2e@db/a2e"}, want: func(c *serveConfig) {}},
		{name: "run retention off", args: []string{"--run-max-age", "0"}, want: func(c *serveConfig) { c.RunMaxAge = 0 }},
		{name: "run retention from the environment", env: map[string]string{"AGENT2ENV_RUN_MAX_AGE": "168h"},
			want: func(c *serveConfig) { c.RunMaxAge = 7 * 24 * time.Hour }},
		{name: "single-dash flags of before", args: []string{"-max-sandboxes", "3", "-data-dir", "/d"}, want: func(c *serveConfig) {
			c.MaxSandboxes, c.DataDir = 3, "/d"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
				t.Fatal(err)
			}
			vars := maps.Clone(tt.env)
			if vars[envConfig] == "FILE" {
				vars[envConfig] = path
			}
			args := append([]string{"--print-config"}, tt.args...)
			if tt.file {
				args = append(args, "--config", path)
			}
			code, stdout, stderr := runServe(t, vars, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var got serveConfig
			dec := yaml.NewDecoder(strings.NewReader(stdout))
			dec.KnownFields(true)
			if err := dec.Decode(&got); err != nil {
				t.Fatalf("--print-config printed what is not a config file: %v\n%s", err, stdout)
			}
			want := defaultServeConfig
			tt.want(&want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestServeConfigSources(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	os.WriteFile(path, []byte("listen: 0.0.0.0:9000\ndata-dir: /from/file\n"), 0o644)
	crun := filepath.Join(dir, "cache", "crun-1.21-abc", "crun") // as make crun caches it
	os.MkdirAll(filepath.Dir(crun), 0o755)
	os.WriteFile(crun, nil, 0o755)
	const key = "a2e_0123456789abcdef0123456789abcdef"
	code, stdout, stderr := runServe(t, map[string]string{"AGENT2ENV_DATA_DIR": "/from/env", "AGENT2ENV_API_KEYS": key},
		"--print-config", "--config", path, "--runtime", "crun", "--cache-dir", filepath.Join(dir, "cache"), "--criu", "off")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"listen: 0.0.0.0:9000 # config file\n", "data-dir: /from/env # AGENT2ENV_DATA_DIR\n",
		"log-level: info # default\n", "# api keys: set in AGENT2ENV_API_KEYS (not shown)\n",
		// What a value decided at start comes to, where it is not the value.
		"runtime: crun # flag --runtime; on this host: " + crun + "\n",
		"image-dir: \"\" # default; on this host: /from/env/images\n",
		"console-listen: auto # default; on this host: 127.0.0.1:9001 (another free port when that one is taken)\n",
		"criu: \"off\" # flag --criu; on this host: none: snapshots are off\n",
		"cache-dir: " + filepath.Join(dir, "cache") + " # flag --cache-dir\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("--print-config lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, key) || strings.Contains(stderr, key) {
		t.Errorf("--print-config shows the API key:\n%s", stdout)
	}
}

// A store URL's password is not printed; where it came from is.
func TestServeConfigStorePassword(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(path, []byte("store: postgres://a2e:s3cret@db:5432/a2e?sslmode=require\n"), 0o644)
	code, stdout, stderr := runServe(t, nil, "--print-config", "--config", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if want := "store: postgres://a2e:xxxxx@db:5432/a2e?sslmode=require # config file\n"; !strings.Contains(stdout, want) {
		t.Errorf("--print-config lacks %q:\n%s", want, stdout)
	}
	if strings.Contains(stdout+stderr, "s3cret") {
		t.Errorf("--print-config shows the store's password:\n%s", stdout)
	}
}

// TestServeConfigErrors checks that a malformed value stops serve, before
// the daemon starts, with a message naming the key and where it came from.
func TestServeConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		file string
		want []string // in stderr
	}{
		{name: "number in the environment", env: map[string]string{"AGENT2ENV_MAX_SANDBOXES": "abc"},
			want: []string{"environment variable AGENT2ENV_MAX_SANDBOXES: max-sandboxes: invalid value \"abc\": want a whole number"}},
		{name: "number out of range", env: map[string]string{"AGENT2ENV_MAX_SANDBOXES": "99999999999999999999999"},
			want: []string{"max-sandboxes: invalid value \"99999999999999999999999\": out of range"}},
		{name: "fraction in the environment", env: map[string]string{"AGENT2ENV_CPU_OVERCOMMIT": "lots"},
			want: []string{"cpu-overcommit: invalid value \"lots\": want a number"}},
		{name: "boolean in the file", file: "prebuild-images: maybe\n", want: []string{"prebuild-images: invalid value \"maybe\": want true or false"}},
		{name: "boolean as a flag", args: []string{"--prebuild-images=maybe"}, want: []string{`invalid argument "maybe" for "--prebuild-images" flag: want true or false`}},
		{name: "size in the environment", env: map[string]string{"AGENT2ENV_CONTEXT_OUTPUT_LIMIT": "10MB"},
			want: []string{"AGENT2ENV_CONTEXT_OUTPUT_LIMIT", "context-output-limit"}},
		{name: "duration in the environment", env: map[string]string{"AGENT2ENV_HTTP_IDLE_TIMEOUT": "2 minutes"},
			want: []string{"environment variable AGENT2ENV_HTTP_IDLE_TIMEOUT: http-idle-timeout: invalid value \"2 minutes\": want a duration such as 30s or 2m"}},
		{name: "duration in the file", file: "http-stall-timeout: soon\n", want: []string{"http-stall-timeout: invalid value \"soon\": want a duration such as 30s or 2m"}},
		{name: "shared volume", args: []string{"--shared-volumes", "relative:/data"}, want: []string{"shared-volumes:"}},
		{name: "session timeout", args: []string{"--session-timeout", "-1m"}, want: []string{"session-timeout"}},
		{name: "session pause after", args: []string{"--session-pause-after", "-1m"}, want: []string{"session-pause-after"}},
		{name: "run max age", args: []string{"--run-max-age", "-1h"}, want: []string{"run-max-age -1h0m0s: must not be negative"}},
		{name: "llm archive age", args: []string{"--llm-archive-max-age", "-1h"}, want: []string{"llm-archive-max-age"}},
		{name: "number in the file", file: "max-sandboxes: abc\n", want: []string{"config file ", "max-sandboxes: invalid value \"abc\": want a whole number"}},
		{name: "fraction in the file", file: "max-sandboxes: 2.5\n", want: []string{"max-sandboxes: invalid value \"2.5\": want a whole number"}},
		{name: "number as a flag", args: []string{"--max-sandboxes", "abc"}, want: []string{`invalid argument "abc" for "--max-sandboxes" flag: want a whole number`}},
		{name: "unknown keys", file: "listn: x\nmax-sandboxes: 1\nwarm_pools: x\n", want: []string{"unknown keys: listn, warm_pools"}},
		{name: "not a setting", file: "print-config: true\n", want: []string{"unknown keys: print-config"}},
		{name: "list for a value", file: "listen: [a, b]\n", want: []string{"listen: want a single value"}},
		{name: "nested value", file: "warm-pools: {python: {size: 2}}\n", want: []string{"warm-pools: want a mapping of names to values"}},
		{name: "not a mapping", file: "- listen\n", want: []string{"config file ", "line 1: must be a mapping, not a list"}},
		{name: "missing file", args: []string{"--config", "/nonexistent/agent2env.yaml"}, want: []string{"read config file", "no such file"}},
		{name: "log level", env: map[string]string{"AGENT2ENV_LOG_LEVEL": "loud"}, want: []string{`log-level "loud"`}},
		{name: "warm pool size", file: "warm-pools: {python: -1}\n", want: []string{"warm-pools: size of python must be a number of 0 or more"}},
		{name: "overcommit", args: []string{"--cpu-overcommit", "0"}, want: []string{"cpu-overcommit and memory-overcommit must be above 0"}},
		{name: "warm pool list", args: []string{"--warm-pools", "python"}, want: []string{`warm-pools: "python" is not NAME=VALUE`}},
		{name: "context template language", file: "context-templates: {cobol: t}\n", want: []string{"context-templates:", "cobol"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--print-config"}, tt.args...)
			if tt.file != "" {
				path := filepath.Join(t.TempDir(), "config.yaml")
				if err := os.WriteFile(path, []byte(tt.file), 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--config", path)
			}
			code, stdout, stderr := runServe(t, tt.env, args...)
			if code != 2 || stdout != "" {
				t.Errorf("exit %d, stdout %q; want exit 2 and nothing printed", code, stdout)
			}
			for _, want := range tt.want {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
			// The value's parser is Go's; what it wants is said in words.
			for _, goWords := range []string{"strconv", "cannot parse", "missing unit", "float64"} {
				if strings.Contains(stderr, goWords) {
					t.Errorf("stderr has %q:\n%s", goWords, stderr)
				}
			}
		})
	}
}

// TestServeRuntime checks which runtime serve makes, with which settings.
func TestServeRuntime(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cfg      func(*serveConfig)
		runtime  string
		settings map[string]string
	}{
		{"default", func(*serveConfig) {}, "oci", ociSettings("auto", "thin", 1<<30)},
		{"crun", func(c *serveConfig) { c.Runtime = "crun" }, "oci", ociSettings("crun", "thin", 1<<30)},
		{"thick", func(c *serveConfig) { c.DiskProvisioning, c.DiskReserve = "thick", 0 }, "oci", ociSettings("auto", "thick", 0)},
		{"runtime kubernetes", func(c *serveConfig) { c.Runtime = "kubernetes"; c.KubeNamespace = "sb" }, "kubernetes",
			map[string]string{"kubernetes.namespace": "sb", "kubernetes.connect": "direct"}},
		{"runtime-kind kubernetes", func(c *serveConfig) {
			c.RuntimeKind, c.Kubeconfig, c.KubeConnect, c.KubeAgentImage = "kubernetes", "/k", "port-forward", "reg/a2e:1"
			c.KubeRuntimeClass, c.KubePullSecrets = "gvisor", "a,b"
		}, "kubernetes", map[string]string{
			"kubernetes.kubeconfig": "/k", "kubernetes.connect": "port-forward", "kubernetes.agent-image": "reg/a2e:1",
			"kubernetes.runtime-class": "gvisor", "kubernetes.pull-secrets": "a,b",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "runtime kubernetes" && !slices.Contains(runtime.Names(), "kubernetes") {
				// Left out (no_kube): --runtime names a binary again.
				tc.runtime, tc.settings = "oci", ociSettings("kubernetes", "thin", 1<<30)
			}
			cfg := defaultServeConfig
			tc.cfg(&cfg)
			s, err := cfg.settings()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]any{tc.runtime, tc.settings}, []any{s.runtime, s.runtimeSettings}); diff != "" {
				t.Errorf("runtime, settings (-want +got):\n%s", diff)
			}
		})
	}
}

// ociSettings are the oci runtime's settings serve passes it.
func ociSettings(binary, provisioning string, reserve int64) map[string]string {
	return map[string]string{"oci.binary": binary, "oci.disk-provisioning": provisioning, "oci.disk-reserve": strconv.FormatInt(reserve, 10)}
}

// TestServeDiskProvisioning refuses a provisioning that is neither thin
// nor thick, and thick for a runtime other than oci.
func TestServeDiskProvisioning(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  func(*serveConfig)
		want string
	}{
		{"unknown", func(c *serveConfig) { c.DiskProvisioning = "thik" }, `disk-provisioning "thik": must be thin or thick`},
		{"thick kubernetes", func(c *serveConfig) { c.RuntimeKind, c.DiskProvisioning = "kubernetes", "thick" }, "disk-provisioning thick is the oci runtime's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := defaultServeConfig
			tc.cfg(&cfg)
			if _, err := cfg.settings(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("settings: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// TestServeConfigPrebuildFile switches the background build of the
// built-in images off in a config file, as a YAML boolean.
func TestServeConfigPrebuildFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte("prebuild-images: false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runServe(t, nil, "--print-config", "--config", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "prebuild-images: false # config file\n") {
		t.Errorf("--print-config does not show the file's prebuild-images: false:\n%s", stdout)
	}
}
