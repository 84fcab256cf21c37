package stocksdk

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/internal/testenv"
)

// E2BKey is an API key the daemon under test accepts: in hex, as some SDK
// versions check the form.
const E2BKey = "e2b_a2e0e2e00123456789abcdef0123456789abcdef"

// E2BImages are the images of the templates the scripts create sandboxes
// of, code-interpreter-v1 and base: the first sandbox of each waits for
// its image, so a caller makes one of each before [RunE2B].
var E2BImages = []string{"agent2env/code-interpreter", "agent2env/python"}

// E2B is a daemon to run the E2B SDKs against.
type E2B struct {
	// URL is the daemon's base URL (E2B_API_URL and E2B_SANDBOX_URL);
	// it accepts [E2BKey].
	URL string
	// Python is the interpreter with the newest SDKs
	// (AGENT2ENV_PYTHON, scripts/test-peers.sh).
	Python string
	// Clients are the other stock clients (clients.env of
	// scripts/test-peers.sh); nil runs the Python SDKs alone.
	Clients *E2BClients
	// Pause runs the pause and resume checks: the runtime pauses.
	Pause bool
	// Snapshots says the runtime takes snapshots (api.Capabilities'
	// Snapshots): the snapshot checks run; without, E2B's
	// create_snapshot must be refused, saying why.
	Snapshots bool
	// SetgidDirs says that directories made in the home directory have
	// the setgid bit, which envd's listing shows ("dgrwxr-xr-x"): on
	// kubernetes the home is an emptyDir the kubelet gives the Pod's
	// fsGroup, setgid, and new directories inherit it.
	SetgidDirs bool
	// NoSandboxes fails t when the daemon has sandboxes left.
	NoSandboxes func(t *testing.T)
}

// E2BClients are the stock E2B clients besides the newest Python SDKs,
// as scripts/test-peers.sh installs them.
type E2BClients struct {
	NodeBin           string // the directory of node
	E2BJS             string // node_modules with e2b and @e2b/code-interpreter
	E2BJSOldest       string // the same, the oldest supported e2b
	E2BCIJSOldest     string // the same, the oldest supported @e2b/code-interpreter
	PythonE2BOldest   string // a python with the oldest supported e2b
	PythonE2BCIOldest string // a python with the oldest supported e2b-code-interpreter
}

// E2BStockClients returns the E2B clients scripts/test-peers.sh installed
// (testenv.StockClients); one it names but is missing fails t.
func E2BStockClients(t *testing.T) *E2BClients {
	t.Helper()
	env := testenv.StockClients(t)
	c := &E2BClients{
		NodeBin: env["NODE_BIN"], E2BJS: env["E2B_JS"], E2BJSOldest: env["E2B_JS_OLDEST"], E2BCIJSOldest: env["E2B_CI_JS_OLDEST"],
		PythonE2BOldest: env["PYTHON_E2B_OLDEST"], PythonE2BCIOldest: env["PYTHON_E2B_CI_OLDEST"],
	}
	for _, p := range []string{c.NodeBin, c.E2BJS, c.E2BJSOldest, c.E2BCIJSOldest, c.PythonE2BOldest, c.PythonE2BCIOldest} {
		if _, err := os.Stat(p); p == "" || err != nil {
			t.Fatalf("clients.env names no E2B client, or a missing one: %q: %v", p, err)
		}
	}
	return c
}

// Flow runs testdata/e2b_flow.py in mode with the newest Python SDKs.
func (tg E2B) Flow(t *testing.T, mode string) map[string]any {
	t.Helper()
	return tg.python(t, tg.Python, "e2b_flow.py", mode)
}

// python runs testdata's script in mode with the interpreter bin.
func (tg E2B) python(t *testing.T, bin, script, mode string) map[string]any {
	t.Helper()
	return Script(t, tg.env(), bin, testdata(script), mode)
}

// node runs testdata/e2b_quickstart.mjs in mode on the SDKs in modules.
func (tg E2B) node(t *testing.T, modules, mode string) map[string]any {
	t.Helper()
	res := Script(t, tg.env(), filepath.Join(tg.Clients.NodeBin, "node"), testdata("e2b_quickstart.mjs"), modules, mode)
	if res["error"] != nil {
		t.Fatalf("e2b_quickstart.mjs %s: %v", mode, res["error"])
	}
	return res
}

func (tg E2B) env() []string {
	return append(os.Environ(), "E2B_API_URL="+tg.URL, "E2B_SANDBOX_URL="+tg.URL, "E2B_API_KEY="+E2BKey)
}

// RunE2B runs the E2B SDKs' checks against tg, each a subtest: both quickstarts
// (create, run_code keeping state, a matplotlib chart as a png, an error,
// IPython's syntax in the Python one, code contexts, files written and
// read, commands.run, set_timeout, get_info, get_metrics, list by
// metadata, kill and is_running() after);
// the base SDK on envd's process and filesystem services (commands, exit
// codes, a background command connected to, fed and killed, a PTY session
// with a resize, files listed, made, renamed, removed and watched, an
// unknown process the SDK's NotFoundException); E2B's home /home/user and
// a sandbox's web server opened as a browser opens it, public or with its
// traffic token (web); pause and resume when
// tg.Pause; snapshots made, listed, restored and deleted when
// tg.Snapshots, else their refusal; the JavaScript SDKs and the oldest supported SDKs when
// tg.Clients; then a wrong key (401 at once) and an unknown template (a
// 4xx at create). None leaves a sandbox behind.
func RunE2B(t *testing.T, tg E2B) {
	t.Run("quickstart", func(t *testing.T) {
		Check(t, tg.Flow(t, "quickstart"), map[string]string{
			"running":               "true",
			"text":                  "2",
			"stdout":                "hello\n",
			"stderr":                "warn\n",
			"error":                 "ZeroDivisionError",
			"png":                   "true",
			"png_prefix":            "iVBORw0K", // base64 of the PNG signature
			"shell":                 "hi\n",
			"bash_magic":            "from-bash\n",
			"ipython_html":          "[<b>x</b>]",
			"inline_png":            "[true]", // the figure, a png result
			"in_context":            "42",
			"run_code_envs":         "['per run|per run' False]",
			"contexts":              "2", // the default python context and the new one
			"contexts_after_remove": "1",
			"after_restart":         "False",
			"timeout_extended":      "true",
			"connect_kept_end":      "true",
			"info_metadata":         "map[suite:e2e-e2b]",
			"info_template":         "code-interpreter-v1",
			"metrics":               "[[true true true]]",
			"metrics_by_id":         "1",
			"listed":                "[true]",
			"listed_other":          "0",
			"unsupported":           "[TemplateException true]",
			"running_after_kill":    "false", // an unknown sandbox: the SDK's own not-found answer
			"written":               "/home/sandbox/notes/hello.txt",
			"read":                  "Hello World",
			"read_by_code_relative": "['Hello World' True]",
			"read_by_code_home":     "'Hello World'",
			"context_cwd":           "true",
			"read_back":             "from code",
			"missing":               "FileNotFoundException",
			"connected_x":           "2",
			"commands_run":          "hi\n",
		})
		tg.NoSandboxes(t)
	})
	t.Run("envd", func(t *testing.T) {
		dirMode := "drwxr-xr-x"
		if tg.SetgidDirs {
			dirMode = "dgrwxr-xr-x"
		}
		Check(t, tg.Flow(t, "envd"), map[string]string{
			"run":                 "[hi\n/home/sandbox\n oops\n 0]",
			"exit":                "[CommandExitException 3 bad\n]",
			"env_cwd":             "hey\n/tmp\n",
			"root":                "SandboxException",
			"listed":              "[[true /bin/bash [-l -c read line; echo got $line; sleep 100]]]",
			"connected_stdout":    "got ping\n",
			"killed":              "true",
			"killed_wait":         "-1",
			"kill_again":          "false",
			"listed_after":        "0",
			"closed_stdin":        "to cat",
			"timed_out":           "[TimeoutException true]",
			"after_timeout":       "[]", // the timeout ended the command
			"connect_unknown":     "NotFoundException",
			"pty_killed":          "true",
			"pty_exit":            "-1",
			"pty_sizes":           "[24 80 30 100 24 120]",
			"pty_term":            "true",
			"written":             "/home/sandbox/dir/a.txt",
			"read":                "hello",
			"cat":                 "hello",
			"write_files":         "[/home/sandbox/many/1.txt /home/sandbox/many/2.txt]",
			"write_files_refused": "InvalidArgumentException",
			"write_files_kept":    "[one 2]",
			"octet":               "[true true]",
			"exists":              "[true false]",
			"make_dir":            "[true false]",
			"list":                "[[a.txt file /home/sandbox/dir/a.txt 5 -rw-r--r-- user] [sub dir /home/sandbox/dir/sub 4096 " + dirMode + " user]]",
			"list_deep":           "[/home/sandbox/dir/a.txt /home/sandbox/dir/sub]",
			"renamed":             "/home/sandbox/dir/sub/b.txt",
			"info":                "[true 5]",
			"removed":             "false",
			"events":              "[[w.txt create] [w.txt write] [w.txt remove] [c.txt create] [c.txt write]]",
			"killed_sandbox":      "true",
		})
		tg.NoSandboxes(t)
	})
	t.Run("web", func(t *testing.T) {
		// /home/user is E2B's home, everywhere; a sandbox's web server opens
		// as on E2B: public at <port>-<id>.<domain>, its page and its
		// subresources, unless made with allow_public_traffic False (a
		// browser's preflight, without the token, is cleared).
		Check(t, tg.Flow(t, "web"), map[string]string{
			"written":              "/home/user/x",
			"cat":                  "by files",
			"cd":                   "by files",
			"listed":               "[/home/user/x]",
			"info":                 "[dir /home/user]",
			"info_x":               "/home/user/x",
			"events":               "[w.txt]",
			"host":                 "true",
			"page":                 "[200 page\n]",
			"subresource":          "[200 script\n]",
			"private_no_token":     "403",
			"private_token":        "[200 page\n]",
			"private_preflight":    "[204  * e2b-traffic-access-token]",
			"allow_public_traffic": "[true false]",
			"killed":               "[true true]",
		})
		tg.NoSandboxes(t)
	})
	t.Run("slow reader", func(t *testing.T) {
		// 16 MiB written at once, read slowly: the output waits for the
		// reader rather than overwrite what it has not read.
		const n = 16 << 20
		Check(t, tg.Flow(t, "slowreader"), map[string]string{
			"bytes": fmt.Sprint(n), "stdout": fmt.Sprintf("%d %d", n, n), "stderr": "done\n", "exit": "0", "killed": "true",
		})
		tg.NoSandboxes(t)
	})
	if tg.Pause {
		t.Run("pause and resume", func(t *testing.T) {
			res := tg.Flow(t, "pause")
			Check(t, res, map[string]string{
				"paused": "true", "paused_again": "false", "state": "paused",
				"listed_paused": "[true]", "listed_running": "0",
				// The files of a paused sandbox are out of reach until it resumes.
				"read_while_paused": "SandboxNotRunningException",
				"paused_says_so":    "true",
				"resumed_state":     "running", "x_plus_1": "42", "file": "kept", "killed": "true",
			})
			if s, _ := res["read_while_paused_seconds"].(float64); s > 3 {
				t.Errorf("a read from a paused sandbox took %.1f s to fail", s)
			}
			tg.NoSandboxes(t)
		})
	}
	if tg.Snapshots {
		t.Run("snapshots", func(t *testing.T) {
			Check(t, tg.Flow(t, "snapshot"), map[string]string{
				"names":           "[]",
				"source_x_plus_1": "42", "source_state": "running",
				"listed": "true", "listed_all": "true", "listed_by_id": "[true]", "listed_by_other_name": "0", "pages": "true",
				"named":         "[SandboxException 400 true]",
				"source_killed": "true",
				// A sandbox made from the snapshot: its kernel's variable
				// and its files, the source gone.
				"restored_other": "true", "restored_x_plus_1": "42", "restored_file": "kept",
				"deleted":        "[true false]",
				"create_deleted": "[SandboxException true]",
				"killed":         "[true]",
			})
			tg.NoSandboxes(t)
		})
	} else {
		t.Run("snapshots refused", func(t *testing.T) {
			// The runtime cannot: E2B's error form, saying so, not a 500.
			Check(t, tg.Flow(t, "nosnapshot"), map[string]string{
				"refused": "[SandboxException 501 true]", "running": "true", "listed": "0", "deleted": "false", "killed": "true",
			})
			tg.NoSandboxes(t)
		})
	}
	if tg.Clients != nil {
		tg.runClients(t)
	}
	t.Run("wrong key", func(t *testing.T) {
		res := tg.Flow(t, "badkey")
		if res["type"] != "AuthenticationException" || !strings.HasPrefix(fmt.Sprint(res["message"]), "401") {
			t.Errorf("create with a wrong key: %v, want AuthenticationException 401", res)
		}
		if s, _ := res["seconds"].(float64); s > 3 {
			t.Errorf("a wrong key took %.1f s to fail", s)
		}
		tg.NoSandboxes(t)
	})
	t.Run("unknown template", func(t *testing.T) {
		res := tg.Flow(t, "badtemplate")
		status, _ := res["status"].(float64)
		if status < 400 || status >= 500 {
			t.Errorf("create of an unknown template: %v, want a 4xx", res)
		}
		t.Logf("an unknown template failed in %.3f s: %v", res["seconds"], res["message"])
		tg.NoSandboxes(t)
	})
}

// runClients runs the JavaScript SDKs' checks and the oldest supported
// SDKs' quickstarts.
func (tg E2B) runClients(t *testing.T) {
	c := tg.Clients
	t.Run("js quickstart", func(t *testing.T) {
		want := map[string]string{
			"text":               "2",
			"png_prefix":         "iVBORw0K",
			"read":               "Hello World",
			"stdout":             "hi\n",
			"run_code_envs":      "['per run' 'unset']",
			"connected_stdout":   "true",
			"killed":             "true",
			"killed_wait":        "CommandExitError -1",
			"listed_after":       "0",
			"exit":               "[true 3 bad\n]",
			"listed":             "[true]",
			"listed_other":       "0",
			"timeout_extended":   "true",
			"info_metadata":      "map[suite:e2e-e2b-js]",
			"info_template":      "code-interpreter-v1",
			"metrics":            "[[true true]]",
			"kill":               "true",
			"running_after_kill": "false",
		}
		mode := "quickstart-nopause"
		if tg.Pause {
			mode = "quickstart"
			for k, v := range map[string]string{"paused": "true", "state": "paused", "resumed_state": "running", "x_after_resume": "2", "file_after_resume": "Hello World"} {
				want[k] = v
			}
		}
		Check(t, tg.node(t, c.E2BJS, mode), want)
		tg.NoSandboxes(t)
	})
	t.Run("js base", func(t *testing.T) {
		Check(t, tg.node(t, c.E2BJS, "base"), map[string]string{"run": "[hi\n/home/sandbox\n 0]", "read": "hello", "kill": "true", "running_after_kill": "false"})
		tg.NoSandboxes(t)
	})
	t.Run("js wrong key", func(t *testing.T) {
		res := tg.node(t, c.E2BJS, "badkey")
		if res["name"] != "AuthenticationError" {
			t.Errorf("create with a wrong key: %v, want AuthenticationError", res)
		}
		if s, _ := res["seconds"].(float64); s > 3 {
			t.Errorf("a wrong key took %.1f s to fail", s)
		}
		tg.NoSandboxes(t)
	})
	t.Run("js unknown template", func(t *testing.T) {
		res := tg.node(t, c.E2BJS, "badtemplate")
		if res["name"] == nil || !strings.Contains(fmt.Sprint(res["message"]), "no-such-template") {
			t.Errorf("create of an unknown template: %v, want an error naming it", res)
		}
		t.Logf("an unknown template failed in %.3f s: %v: %v", res["seconds"], res["name"], res["message"])
		tg.NoSandboxes(t)
	})
	// The oldest SDKs supported, their quickstarts.
	t.Run("oldest python e2b", func(t *testing.T) {
		res := tg.python(t, c.PythonE2BOldest, "e2b_oldest.py", "base")
		Check(t, res, map[string]string{"run": "[hi\n/home/sandbox\n 0]", "exit": "3", "read": "hello", "killed": "true", "running_after_kill": "false"})
		tg.NoSandboxes(t)
	})
	t.Run("oldest python code interpreter", func(t *testing.T) {
		res := tg.python(t, c.PythonE2BCIOldest, "e2b_oldest.py", "interpreter")
		Check(t, res, map[string]string{"text": "2", "png_prefix": "iVBORw0K", "read": "Hello World", "commands_run": "hi\n", "killed": "true", "running_after_kill": "false"})
		tg.NoSandboxes(t)
	})
	t.Run("oldest js e2b", func(t *testing.T) {
		Check(t, tg.node(t, c.E2BJSOldest, "base"), map[string]string{"run": "[hi\n/home/sandbox\n 0]", "read": "hello", "running_after_kill": "false"})
		tg.NoSandboxes(t)
	})
	t.Run("oldest js code interpreter", func(t *testing.T) {
		Check(t, tg.node(t, c.E2BCIJSOldest, "interpreter"), map[string]string{"text": "2", "png_prefix": "iVBORw0K", "read": "Hello World", "stdout": "hi\n", "running_after_kill": "false"})
		tg.NoSandboxes(t)
	})
}
