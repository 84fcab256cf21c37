package image

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The agent image's npm packages: the five agent CLIs and Node 22 at the
// versions docs/agent-clis.md verified, every dependency pinned by the
// lock file. Regenerate the lock after changing a version with
// `npm install --ignore-scripts` in agentimage/ (--package-lock-only
// leaves out optional platform packages).
var (
	//go:embed agentimage/package.json
	agentManifest []byte
	//go:embed agentimage/package-lock.json
	agentLock []byte
)

// agentPrefix is where the agent image's node_modules live.
const agentPrefix = "/opt/agent2env/npm"

// agentRecipe is agent2env/agent: Python, Node 22, git, ripgrep, build
// tools and the agent CLIs claude, codex, gemini, opencode and qwen, with
// their telemetry, update checks and first-run screens off. The CLIs run
// as the sandbox user; everything a run configures (model endpoint, MCP
// servers) is written by the task runner's adapters into $HOME.
var agentRecipe = recipe{
	packages: []string{
		"python3", "python3-pip", "python3-venv", "python-is-python3", "python3-pytest",
		"python3-numpy", "python3-pandas", "python3-matplotlib",
		"git", "ripgrep", "build-essential", "pkg-config", "curl", "ca-certificates", "jq",
		"less", "procps", "file", "patch", "unzip", "xz-utils", "sqlite3", "passwd",
	},
	env: []string{
		"PYTHONUNBUFFERED=1",
		// claude: no telemetry, error reports or update checks; the
		// sandbox is the isolation, so auto-approval is allowed even as
		// root (it refuses otherwise).
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
		"IS_SANDBOX=1",
		// opencode: no update checks, no models.dev fetch.
		"OPENCODE_DISABLE_AUTOUPDATE=1",
		"OPENCODE_DISABLE_MODELS_FETCH=1",
		"OPENCODE_CONFIG=/etc/opencode/opencode.json",
		// gemini reads /etc/gemini-cli, qwen /etc/qwen-code and codex
		// /etc/codex (see the files below).
		"QWEN_CODE_SUPPRESS_YOLO_WARNING=1",
		"NO_UPDATE_NOTIFIER=1",
		"NPM_CONFIG_UPDATE_NOTIFIER=false",
		"NPM_CONFIG_FUND=false",
		"NPM_CONFIG_AUDIT=false",
		"DO_NOT_TRACK=1",
	},
	npm: &npmPart{
		arch:     "amd64",
		prefix:   agentPrefix,
		manifest: agentManifest,
		lock:     agentLock,
		// Without install scripts opencode-ai keeps both x64 builds; the
		// baseline one runs on every x64 CPU (no AVX2 needed).
		remove: []string{"node_modules/opencode-linux-x64"},
		links: map[string]string{
			// What the skipped install scripts would have done: put the
			// native binaries where the packages' bin entries point.
			agentPrefix + "/node_modules/@anthropic-ai/claude-code/bin/claude.exe": "../../claude-code-linux-x64/claude",
			agentPrefix + "/node_modules/opencode-ai/bin/opencode.exe":             "../../opencode-linux-x64-baseline/bin/opencode",
			// The commands, through the links npm made for the packages' bin
			// entries.
			"/usr/local/bin/node":     agentPrefix + "/node_modules/.bin/node",
			"/usr/local/bin/npm":      agentPrefix + "/node_modules/.bin/npm",
			"/usr/local/bin/npx":      agentPrefix + "/node_modules/.bin/npx",
			"/usr/local/bin/claude":   agentPrefix + "/node_modules/.bin/claude",
			"/usr/local/bin/codex":    agentPrefix + "/node_modules/.bin/codex",
			"/usr/local/bin/gemini":   agentPrefix + "/node_modules/.bin/gemini",
			"/usr/local/bin/opencode": agentPrefix + "/node_modules/.bin/opencode",
			"/usr/local/bin/qwen":     agentPrefix + "/node_modules/.bin/qwen",
		},
		files: map[string]string{
			"/etc/gemini-cli/settings.json": quietSettings,
			"/etc/qwen-code/settings.json":  quietSettings,
			"/etc/codex/config.toml": strings.Join([]string{
				"check_for_update_on_startup = false",
				"[analytics]", "enabled = false",
				"[feedback]", "enabled = false",
				"[features]", "plugins = false  # stops fetches from github.com and chatgpt.com",
				"",
			}, "\n"),
			"/etc/opencode/opencode.json": `{"$schema": "https://opencode.ai/config.json", "autoupdate": false, "share": "disabled"}` + "\n",
		},
	},
}

// quietSettings are the system settings of gemini and qwen: no usage
// statistics, telemetry or update checks.
const quietSettings = `{
  "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
  "privacy": {"usageStatisticsEnabled": false},
  "telemetry": {"enabled": false}
}
`

// AgentCLIs returns the directory of the commands of agent2env/agent's
// npm layer (claude, codex, gemini, opencode, qwen, node, npm) unpacked on
// the host: the layer is built first when the cache dir has none, and
// unpacked next to it once (the layer's hash names both). It is for tests
// that run the CLIs outside a sandbox (package agents/all's TestRealCLIs)
// exactly as the image has them; their shell tools then run on the host.
// Then it prunes other versions' builds from the cache dir.
func (s *Store) AgentCLIs(ctx context.Context, p ProgressFunc) (string, error) {
	n := recipes["agent2env/agent:latest"].npm
	layer, err := s.buildNPM(ctx, n, p)
	if err != nil {
		return "", fmt.Errorf("agent CLIs: %w", err)
	}
	dir := strings.TrimSuffix(layer, ".tar") + ".d"
	err = s.cached(ctx, dir, "unpacked npm layer", p, func(*os.File) error {
		partial := dir + ".partial"
		// A partial tree left by a process that died is stale: the lock is ours.
		if err := os.RemoveAll(partial); err != nil {
			return err
		}
		if err := os.Mkdir(partial, 0o755); err != nil {
			return err
		}
		f, err := os.Open(layer)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := unpack(ctx, f, partial, s.log); err != nil {
			return errors.Join(err, os.RemoveAll(partial))
		}
		return os.Rename(partial, dir)
	})
	if err != nil {
		return "", fmt.Errorf("agent CLIs: unpack %s: %w", layer, err)
	}
	s.pruneCache()
	return filepath.Join(dir, n.prefix, "node_modules", ".bin"), nil
}
