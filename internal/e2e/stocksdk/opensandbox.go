package stocksdk

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/testenv"
)

// OpenSandboxKey is an API key the daemon under test accepts from the
// OpenSandbox clients.
const OpenSandboxKey = "a2e_e2e-opensandbox-key-0123456789"

// OpenSandboxImages are the images the OpenSandbox checks create
// sandboxes of: the first sandbox of each waits for its image, longer
// than the SDK's 30 s readiness budget, so a caller makes one of each
// before [RunOpenSandbox]. The code interpreter's default image
// (opensandbox/code-interpreter) is served by agent2env's.
var OpenSandboxImages = []string{"agent2env/python", "agent2env/code-interpreter"}

// OpenSandbox is a daemon to run the OpenSandbox clients against.
type OpenSandbox struct {
	// Domain is the host:port the clients are given
	// (OPEN_SANDBOX_DOMAIN), the daemon's public URL's; it accepts
	// [OpenSandboxKey].
	Domain string
	// Python is the interpreter with the Python SDK, its code
	// interpreter and MCP server (AGENT2ENV_PYTHON).
	Python string
	// Clients are the JS SDK's (clients.env of scripts/test-peers.sh).
	Clients *OpenSandboxClients
	// Pause runs the pause and resume checks: the runtime pauses.
	Pause bool
	// NoSandboxes fails t when the daemon has sandboxes left.
	NoSandboxes func(t *testing.T)
}

// OpenSandboxClients are the stock OpenSandbox JS SDK and its node, as
// scripts/test-peers.sh installs them.
type OpenSandboxClients struct {
	NodeBin       string // the directory of node
	OpenSandboxJS string // node_modules with @alibaba-group/opensandbox
}

// OpenSandboxStockClients returns the OpenSandbox JS SDK
// scripts/test-peers.sh installed (testenv.StockClients); one it names
// but is missing fails t.
func OpenSandboxStockClients(t *testing.T) *OpenSandboxClients {
	t.Helper()
	env := testenv.StockClients(t)
	c := &OpenSandboxClients{NodeBin: env["NODE_BIN"], OpenSandboxJS: env["OPENSANDBOX_JS"]}
	for _, p := range []string{c.NodeBin, c.OpenSandboxJS} {
		if _, err := os.Stat(p); p == "" || err != nil {
			t.Fatalf("clients.env names no OpenSandbox client, or a missing one: %q: %v", p, err)
		}
	}
	return c
}

func (tg OpenSandbox) env() []string {
	return append(os.Environ(), "OPEN_SANDBOX_DOMAIN="+tg.Domain, "OPEN_SANDBOX_API_KEY="+OpenSandboxKey)
}

// flow runs testdata/opensandbox_flow.py with args.
func (tg OpenSandbox) flow(t *testing.T, args ...string) map[string]any {
	t.Helper()
	return Script(t, tg.env(), tg.Python, append([]string{testdata("opensandbox_flow.py")}, args...)...)
}

// RunOpenSandbox runs the stock OpenSandbox clients' checks against tg,
// each a subtest: the Python SDK's README quickstart (Sandbox.create,
// commands.run, destroy) with a failing command and a
// files.write_file/read_file round trip, lifecycle, pause and resume
// when tg.Pause, background commands, files, metrics and egress, the
// network policy, the JS SDK's quickstart, the MCP server over stdio,
// bash sessions, the code interpreter, then the failures a user meets
// first: a wrong key, an unknown id, an image that does not exist. Each
// must fail at once with the server's {code, message}, and none leaves a
// sandbox behind.
func RunOpenSandbox(t *testing.T, tg OpenSandbox) {
	image := OpenSandboxImages[0]
	t.Run("quickstart", func(t *testing.T) {
		res := tg.flow(t, "quickstart", image)
		want := map[string]any{
			// Output events carry their line endings (the SDK's text
			// joins them as it joins stock execd's).
			"stdout": "Hello Sandbox!\n", "text": "Hello Sandbox!", "exit_code": float64(0),
			"failed_exit_code": float64(3), "failed_stderr": "oops\n",
			"read": "Hello World", "state": "Running",
		}
		for k, v := range want {
			if res[k] != v {
				t.Errorf("%s = %#v, want %#v (all: %v)", k, res[k], v, res)
			}
		}
		if id, _ := res["id"].(string); id == "" {
			t.Errorf("no sandbox id: %v", res)
		}
		tg.NoSandboxes(t) // destroy killed it
	})
	t.Run("lifecycle", func(t *testing.T) {
		res := tg.flow(t, "lifecycle", image)
		want := map[string]string{
			"metadata":              "map[run:1 suite:e2e]",
			"by_state_and_metadata": "map[ids:[true] next:false pages:1 total:1]",
			"by_other_metadata":     "map[ids:[] next:false pages:0 total:0]",
			"by_other_state":        "map[ids:[] next:false pages:0 total:0]",
			"renewed_hours":         "2",
			"patched":               "map[owner:ci suite:e2e]",
			"expires_in_hours":      "2",
		}
		Check(t, res, want)
		tg.NoSandboxes(t)
	})
	if tg.Pause {
		t.Run("pause and resume", func(t *testing.T) {
			res := tg.flow(t, "pause", image)
			want := map[string]string{
				"state": "Paused", "listed_paused": "[true]", "run_while_paused": "SandboxApiException",
				"resumed_state": "Running", "file": "kept",
				"counter_running": "true", "counting_on": "true", "count_kept": "True",
			}
			Check(t, res, want)
			// The loop turns every 50 ms, and made no turn for the second the
			// sandbox was paused.
			if gap, _ := res["gap"].(float64); gap < 0.9 {
				t.Errorf("longest gap of the counting loop %.2f s, want about the 1 s it was paused", gap)
			}
			tg.NoSandboxes(t)
		})
	}
	t.Run("background commands", func(t *testing.T) {
		res := tg.flow(t, "background", image)
		want := map[string]string{
			"content": "echo first; sleep 1; echo second >&2; exit 4",
			"running": "true", "running_exit_code": "<nil>", "running_finished": "false",
			// The cursor is a byte offset into stdout and stderr together.
			"logs1": "first\n", "cursor1": "6",
			"ended_running": "false", "exit_code": "4", "finished": "true",
			"logs2": "second\n", "cursor2": "13",
			// SIGTERM ends the sleep; the interrupt answers once it has.
			// A command a signal ended has stock execd's exit code -1
			// (Go's) and Go's words for it, in the background and in the
			// foreground.
			"interrupted_running": "false", "interrupted_exit_code": "-1",
			"interrupted_error": "signal: terminated",
			"killed_exit_code":  "-1", "killed_error": "[signal: terminated]",
			// A foreground command is killed at once.
			"fg_interrupted_exit_code": "-1", "fg_interrupted_error": "[signal: killed]",
			// A foreground command's status, by its init event's id, is
			// stock execd's: while it runs and once it has ended (an
			// interrupted one's too); its logs are a 400, as stock
			// execd's (its output went to its stream).
			"fg_interrupted_status": "[false -1 signal: killed]",
			"fg_running":            "[sleep 1; echo hi true <nil> <nil>]",
			"fg_ended":              "[hi\n false 0 true]",
			"fg_logs_status":        "400",
			"unknown_status":        "404",
		}
		Check(t, res, want)
		for _, k := range []string{"interrupt_seconds", "fg_interrupt_seconds"} {
			if s, _ := res[k].(float64); s > 2 {
				t.Errorf("%s: %.1f s, want well under the 3 s before SIGKILL", k, s)
			}
		}
		tg.NoSandboxes(t)
	})
	t.Run("files", func(t *testing.T) {
		res := tg.flow(t, "files", image)
		want := map[string]string{
			"info":               "map[group:sandbox mode:644 owner:sandbox size:26 type:file]",
			"search":             "[/workspace/notes/a.txt]",
			"list":               "[/workspace/notes/a.txt /workspace/notes/b.py]",
			"replaced":           "[2]",
			"after_replace":      "1 two 1\nline 2\nline 3\n",
			"range":              "two",
			"lines":              "line 2\n",
			"moved":              "1 two 1\nline 2\nline 3\n",
			"mode_after_chmod":   "600",
			"chown_root":         "403",
			"dir":                "map[mode:700 type:directory]",
			"delete_link_to_dir": "400",
			"remaining":          "[/workspace/notes]",
			"deleted_info":       "404",
			"big_tail":           "true",
			"big_size":           "10485760",
		}
		Check(t, res, want)
		tg.NoSandboxes(t)
	})
	t.Run("metrics and egress", func(t *testing.T) {
		res := tg.flow(t, "metrics", image)
		want := map[string]string{
			// The SDK's default limits: 1 CPU, 2 GiB.
			"cpu_count": "1", "memory_total_in_mib": "2048",
			"busy": "true", "memory_used": "true", "timestamp_now": "true",
			"policy": "map[default:deny egress:[]]",
			"allow":  "400", "deleted": "true",
		}
		Check(t, res, want)
		t.Logf("cpu_used_percentage: %v idle, %v with a busy loop", res["idle_pct"], res["busy_pct"])
		tg.NoSandboxes(t)
	})
	t.Run("network policy", func(t *testing.T) {
		// As TestEgressPolicy proves a template's allow-list, on loopback
		// only: the proxy answers a denied host 403 itself, and dials an
		// allowed one, which does not resolve here: 502.
		res := tg.flow(t, "egress", image)
		want := map[string]string{
			"denied": "403", "allowed": "502",
			"policy":     "map[default:deny egress:[allow *.allowed.test]]",
			"patch_held": "ok", "patch_new": "400",
			"cidr": "400", "cidr_names_field": "true",
		}
		Check(t, res, want)
		if s, _ := res["cidr_seconds"].(float64); s > 3 {
			t.Errorf("a create with a CIDR target took %.1f s to fail", s)
		}
		tg.NoSandboxes(t)
	})
	t.Run("js sdk", func(t *testing.T) {
		res := Script(t, tg.env(), filepath.Join(tg.Clients.NodeBin, "node"), testdata("opensandbox_quickstart.mjs"), tg.Clients.OpenSandboxJS, image,
			"opensandbox/code-interpreter:v1.1.0")
		want := map[string]string{
			"stdout": "Hello Sandbox!\n", "exitCode": "0", "failedExitCode": "3", "failedStderr": "oops\n",
			"read": "Hello World", "error": "<nil>",
			// The code-interpreter quickstart, through the SDK's execd client.
			"firstErrors": "0", "xPlus1": "2", "errorName": "ZeroDivisionError", "errorValue": "division by zero",
			"chartErrors": "0", "chartPng": "true", "lastEvent": "execution_complete",
		}
		Check(t, res, want)
		if ep, _ := res["endpoint"].(string); !strings.HasPrefix(ep, tg.Domain+"/opensandbox/") {
			t.Errorf("execd endpoint %q, want %s/opensandbox/… without a scheme", ep, tg.Domain)
		}
		tg.NoSandboxes(t)
	})
	t.Run("mcp server", func(t *testing.T) {
		// The stock opensandbox-mcp over stdio, driven by the official MCP
		// client.
		res := Script(t, tg.env(), tg.Python, testdata("opensandbox_mcp_flow.py"), image)
		want := map[string]string{
			"tools_missing": "[]", "state": "Running",
			"stdout": "hi from mcp\n", "stderr": "err\n", "exit_code": "0", "failed_exit_code": "7",
			"write": "map[status:written]", "read": "one two one\n",
			"replaced": "[2]", "after_replace": "1 two 1\n",
			"listed": "[true]", "kill": "map[status:killed]", "listed_after_kill": "0",
		}
		Check(t, res, want)
		tg.NoSandboxes(t)
	})
	t.Run("session", func(t *testing.T) {
		res := tg.flow(t, "session", image)
		want := map[string]string{
			"pwd":  "/workspace/sess\n",
			"kept": "1 2 /tmp f3\n", "kept_exit_code": "0",
			// exit ends the run, not the session's shell.
			"failed": "before\n", "failed_exit_code": "3", "after_exit": "1 /tmp\n",
			"own_cwd":           "/workspace\n",
			"timeout_exit_code": "-1",
			"turns":             "[one\n two\n]",
			"deleted_run":       "404",
		}
		Check(t, res, want)
		if s, _ := res["timeout_seconds"].(float64); s > 10 {
			t.Errorf("a run with a 1 s timeout took %.1f s", s)
		}
		tg.NoSandboxes(t)
	})
	t.Run("code interpreter", func(t *testing.T) {
		res := tg.flow(t, "code", "opensandbox/code-interpreter:v1.1.0")
		want := map[string]string{
			"context_language": "python", "first_error": "<nil>", "x_plus_1": "2", "execution_count": "2",
			"error_name": "ZeroDivisionError", "error_value": "division by zero", "traceback_mentions": "true",
			"stdout": "hello from python\n", "chart_error": "<nil>", "saved_png": "true", "raw_png": "true",
			"default_context": "42", "bash_stdout": "hi from bash\n", "java": "400",
			"listed_has_ctx": "true", "deleted": "true", "bash_left": "0",
			"interrupted_error": "KeyboardInterrupt", "after_interrupt": "1",
		}
		Check(t, res, want)
		// The readiness probe succeeds at once: not after the SDK's 30 s.
		if s, _ := res["ready_seconds"].(float64); s > 10 {
			t.Errorf("CodeInterpreter.create took %.1f s", s)
		}
		t.Logf("CodeInterpreter.create took %.3f s", res["ready_seconds"])
		tg.NoSandboxes(t)
	})
	t.Run("wrong key", func(t *testing.T) {
		res := tg.flow(t, "badkey", image)
		if res["status"] != float64(http.StatusUnauthorized) || res["code"] != "INVALID_API_KEY" {
			t.Errorf("create with a wrong key: %v, want 401 INVALID_API_KEY", res)
		}
		// At once: well under the SDK's 30 s readiness loop.
		if s, _ := res["seconds"].(float64); s > 3 {
			t.Errorf("a wrong key took %.1f s to fail", s)
		}
		t.Logf("a wrong key failed in %.3f s", res["seconds"])
		tg.NoSandboxes(t)
	})
	t.Run("unknown id", func(t *testing.T) {
		res := tg.flow(t, "unknown")
		if res["status"] != float64(http.StatusNotFound) || res["code"] != api.CodeSandboxNotFound {
			t.Errorf("info of an unknown id: %v, want 404 %s", res, api.CodeSandboxNotFound)
		}
	})
	t.Run("missing image", func(t *testing.T) {
		res := tg.flow(t, "badimage", "agent2env/no-such-image")
		status, _ := res["status"].(float64)
		if status < 400 || status >= 500 || res["code"] == nil {
			t.Errorf("create of a missing image: %v, want a 4xx with a code", res)
		}
		if s, _ := res["seconds"].(float64); s > 25 {
			t.Errorf("a missing image took %.1f s to fail", s)
		}
		t.Logf("a missing image failed in %.3f s: %v", res["seconds"], res["message"])
		tg.NoSandboxes(t)
	})
}
