package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/testenv"
)

// TestE2BSDK runs the stock E2B code-interpreter Python SDK
// (e2b-code-interpreter and its e2b, pinned in
// scripts/peers-requirements.txt), unchanged, against a daemon with API
// keys, configured by environment variables alone as the README says:
// create, run_code keeping state, a matplotlib chart as a png, an error,
// code contexts, files written and read, commands.run, set_timeout,
// get_info, get_metrics, list by metadata, kill and is_running() after; the base SDK
// (template base) on envd's process and filesystem services: commands,
// exit codes, a background command connected to, fed and killed, a PTY
// session with a resize, files listed, made, renamed, removed and
// watched; then a wrong key (401 at once) and an unknown template (a 4xx
// at create), each leaving no sandbox behind (issue 25).
func TestE2BSDK(t *testing.T) {
	pythonBin := os.Getenv("AGENT2ENV_PYTHON")
	if pythonBin == "" {
		testenv.Missing(t, "set AGENT2ENV_PYTHON to the python of scripts/test-peers.sh (make test does) to run the E2B SDK")
	}
	const (
		key   = "e2b_a2e0e2e00123456789abcdef0123456789abcdef" // hex: some SDK versions check the form
		image = "agent2env/code-interpreter"
	)
	d := startDaemon(t, "", func(c *exec.Cmd) { c.Env = append(os.Environ(), "AGENT2ENV_API_KEYS="+key) })
	d.key = key
	// The first sandbox of an image waits for the image to be built: build
	// it first, outside the SDK's request timeout.
	for _, img := range []string{image, "agent2env/python"} { // templates code-interpreter-v1 and base
		warm := d.create(api.CreateSandboxRequest{Image: img, CPU: "1", Memory: "1Gi"})
		if code := d.do("DELETE", "/api/v1/sandboxes/"+warm.ID, nil, nil); code != http.StatusNoContent {
			t.Fatalf("delete the warm-up sandbox: status %d", code)
		}
	}

	// pythonScript runs script in mode with the interpreter bin.
	pythonScript := func(t *testing.T, bin, script, mode string) map[string]any {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, script, mode)
		url := "http://" + d.addr
		cmd.Env = append(os.Environ(), "E2B_API_URL="+url, "E2B_SANDBOX_URL="+url, "E2B_API_KEY="+key)
		out, err := cmd.Output()
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		var res map[string]any
		if err != nil || json.Unmarshal([]byte(lines[len(lines)-1]), &res) != nil {
			t.Fatalf("%s %s: %v\nstdout: %s\nstderr: %s", script, mode, err, out, stderr)
		}
		return res
	}
	python := func(t *testing.T, mode string) map[string]any {
		t.Helper()
		return pythonScript(t, pythonBin, "testdata/e2b_flow.py", mode)
	}
	clients := stockClients(t)
	// node runs testdata/e2b_quickstart.mjs in mode on the SDKs in
	// modules.
	node := func(t *testing.T, modules, mode string) map[string]any {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(clients.nodeBin, "node"), "testdata/e2b_quickstart.mjs", modules, mode)
		url := "http://" + d.addr
		cmd.Env = append(os.Environ(), "E2B_API_URL="+url, "E2B_SANDBOX_URL="+url, "E2B_API_KEY="+key)
		out, err := cmd.CombinedOutput()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		var res map[string]any
		if err != nil || json.Unmarshal([]byte(lines[len(lines)-1]), &res) != nil || res["error"] != nil {
			t.Fatalf("e2b_quickstart.mjs %s: %v\n%s", mode, err, out)
		}
		return res
	}
	noSandboxes := func(t *testing.T) {
		t.Helper()
		var list api.List[api.Sandbox]
		if code := d.do("GET", "/api/v1/sandboxes", nil, &list); code != http.StatusOK || len(list.Items) != 0 {
			t.Errorf("sandboxes left: status %d, %+v", code, list.Items)
		}
	}

	t.Run("quickstart", func(t *testing.T) {
		res := python(t, "quickstart")
		want := map[string]string{
			"running":               "true",
			"text":                  "2",
			"stdout":                "hello\n",
			"stderr":                "warn\n",
			"error":                 "ZeroDivisionError",
			"png":                   "true",
			"png_prefix":            "iVBORw0K", // base64 of the PNG signature
			"in_context":            "42",
			"contexts":              "2", // the default python context and the new one
			"contexts_after_remove": "1",
			"after_restart":         "False",
			"timeout_extended":      "true",
			"info_metadata":         "map[suite:e2e-e2b]",
			"info_template":         "code-interpreter-v1",
			"metrics":               "[[true true true]]",
			"metrics_by_id":         "1",
			"listed":                "[true]",
			"listed_other":          "0",
			"running_after_kill":    "false",
			"written":               "/home/sandbox/notes/hello.txt",
			"read":                  "Hello World",
			"read_back":             "from code",
			"missing":               "FileNotFoundException",
			"connected_x":           "2",
			"commands_run":          "hi\n",
		}
		checkResult(t, res, want)
		noSandboxes(t)
	})
	t.Run("envd", func(t *testing.T) {
		res := python(t, "envd")
		want := map[string]string{
			"run":              "[hi\n/home/sandbox\n oops\n 0]",
			"exit":             "[CommandExitException 3 bad\n]",
			"env_cwd":          "hey\n/tmp\n",
			"root":             "SandboxException",
			"listed":           "[[true /bin/bash [-l -c read line; echo got $line; sleep 100]]]",
			"connected_stdout": "got ping\n",
			"killed":           "true",
			"killed_wait":      "-1",
			"kill_again":       "false",
			"listed_after":     "0",
			"closed_stdin":     "to cat",
			"timed_out":        "[TimeoutException true]",
			"after_timeout":    "[]", // the timeout ended the command
			"connect_unknown":  "NotFoundException",
			"pty_killed":       "true",
			"pty_exit":         "-1",
			"pty_sizes":        "[24 80 30 100]",
			"pty_term":         "true",
			"written":          "/home/sandbox/dir/a.txt",
			"read":             "hello",
			"cat":              "hello",
			"octet":            "[true true]",
			"exists":           "[true false]",
			"make_dir":         "[true false]",
			"list":             "[[a.txt file /home/sandbox/dir/a.txt 5 -rw-r--r-- user] [sub dir /home/sandbox/dir/sub 4096 drwxr-xr-x user]]",
			"list_deep":        "[/home/sandbox/dir/a.txt /home/sandbox/dir/sub]",
			"renamed":          "/home/sandbox/dir/sub/b.txt",
			"info":             "[true 5]",
			"removed":          "false",
			"events":           "[[w.txt create] [w.txt write] [w.txt remove] [c.txt create] [c.txt write]]",
			"killed_sandbox":   "true",
		}
		checkResult(t, res, want)
		noSandboxes(t)
	})
	t.Run("slow reader", func(t *testing.T) {
		// 16 MiB written at once, read slowly: the output waits for the
		// reader rather than overwrite what it has not read.
		const n = 16 << 20
		res := python(t, "slowreader")
		checkResult(t, res, map[string]string{
			"bytes": fmt.Sprint(n), "stdout": fmt.Sprintf("%d %d", n, n), "stderr": "done\n", "exit": "0", "killed": "true",
		})
		noSandboxes(t)
	})
	t.Run("pause and resume", func(t *testing.T) {
		res := python(t, "pause")
		want := map[string]string{
			"paused": "true", "paused_again": "false", "state": "paused",
			"listed_paused": "[true]", "listed_running": "0",
			// The files of a paused sandbox are out of reach until it resumes.
			"read_while_paused": "SandboxNotRunningException",
			"paused_says_so":    "true",
			"resumed_state":     "running", "x_plus_1": "42", "file": "kept", "killed": "true",
		}
		for k, v := range want {
			if got := fmt.Sprint(res[k]); got != v {
				t.Errorf("%s = %s, want %s (all: %v)", k, got, v, res)
			}
		}
		if s, _ := res["read_while_paused_seconds"].(float64); s > 3 {
			t.Errorf("a read from a paused sandbox took %.1f s to fail", s)
		}
		noSandboxes(t)
	})
	t.Run("js quickstart", func(t *testing.T) {
		res := node(t, clients.e2bJS, "quickstart")
		checkResult(t, res, map[string]string{
			"text":               "2",
			"png_prefix":         "iVBORw0K",
			"read":               "Hello World",
			"stdout":             "hi\n",
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
			"paused":             "true",
			"state":              "paused",
			"resumed_state":      "running",
			"x_after_resume":     "2",
			"file_after_resume":  "Hello World",
			"kill":               "true",
			"running_after_kill": "false",
		})
		noSandboxes(t)
	})
	t.Run("js base", func(t *testing.T) {
		res := node(t, clients.e2bJS, "base")
		checkResult(t, res, map[string]string{"run": "[hi\n/home/sandbox\n 0]", "read": "hello", "kill": "true", "running_after_kill": "false"})
		noSandboxes(t)
	})
	t.Run("js wrong key", func(t *testing.T) {
		res := node(t, clients.e2bJS, "badkey")
		if res["name"] != "AuthenticationError" {
			t.Errorf("create with a wrong key: %v, want AuthenticationError", res)
		}
		if s, _ := res["seconds"].(float64); s > 3 {
			t.Errorf("a wrong key took %.1f s to fail", s)
		}
		noSandboxes(t)
	})
	t.Run("js unknown template", func(t *testing.T) {
		res := node(t, clients.e2bJS, "badtemplate")
		if res["name"] == nil || !strings.Contains(fmt.Sprint(res["message"]), "no-such-template") {
			t.Errorf("create of an unknown template: %v, want an error naming it", res)
		}
		t.Logf("an unknown template failed in %.3f s: %v: %v", res["seconds"], res["name"], res["message"])
		noSandboxes(t)
	})
	// The oldest SDKs supported, their quickstarts.
	t.Run("oldest python e2b", func(t *testing.T) {
		res := pythonScript(t, clients.pythonE2BOldest, "testdata/e2b_oldest.py", "base")
		checkResult(t, res, map[string]string{"run": "[hi\n/home/sandbox\n 0]", "exit": "3", "read": "hello", "killed": "true", "running_after_kill": "false"})
		noSandboxes(t)
	})
	t.Run("oldest python code interpreter", func(t *testing.T) {
		res := pythonScript(t, clients.pythonE2BCIOldest, "testdata/e2b_oldest.py", "interpreter")
		checkResult(t, res, map[string]string{"text": "2", "png_prefix": "iVBORw0K", "read": "Hello World", "commands_run": "hi\n", "killed": "true", "running_after_kill": "false"})
		noSandboxes(t)
	})
	t.Run("oldest js e2b", func(t *testing.T) {
		res := node(t, clients.e2bJSOldest, "base")
		checkResult(t, res, map[string]string{"run": "[hi\n/home/sandbox\n 0]", "read": "hello", "running_after_kill": "false"})
		noSandboxes(t)
	})
	t.Run("oldest js code interpreter", func(t *testing.T) {
		res := node(t, clients.e2bCIJSOldest, "interpreter")
		checkResult(t, res, map[string]string{"text": "2", "png_prefix": "iVBORw0K", "read": "Hello World", "stdout": "hi\n", "running_after_kill": "false"})
		noSandboxes(t)
	})
	t.Run("readme", func(t *testing.T) {
		readme, err := os.ReadFile("../../README.md")
		if err != nil {
			t.Fatal(err)
		}
		// The script runs the README's example as the README has it.
		script, err := os.ReadFile("testdata/e2b_flow.py")
		if err != nil {
			t.Fatal(err)
		}
		_, example, _ := strings.Cut(string(script), "README = \"\"\"\n")
		example, _, _ = strings.Cut(example, "\"\"\"")
		if !strings.Contains(string(readme), "```python\n"+example+"```") {
			t.Errorf("the README's E2B example is not the one testdata/e2b_flow.py runs:\n%s", example)
		}
		res := python(t, "readme")
		if got := fmt.Sprint(res["printed"]); got != "[2 Hello World]" {
			t.Errorf("the README's example printed %s, want [2 Hello World]", got)
		}
		noSandboxes(t)
	})
	t.Run("routes on the real daemon", func(t *testing.T) {
		sb := d.create(api.CreateSandboxRequest{Image: image, CPU: "1", Memory: "1Gi"})
		defer d.do("DELETE", "/api/v1/sandboxes/"+sb.ID, nil, nil)
		get := func(host string, headers ...string) int {
			req, err := http.NewRequest("GET", "http://"+d.addr+"/health", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = host
			for i := 0; i+1 < len(headers); i += 2 {
				req.Header.Set(headers[i], headers[i+1])
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			return res.StatusCode
		}
		// envd's /health (204) by headers and by a wildcard host, past the
		// daemon's Bearer check and browser guard; the daemon's own
		// /health (200) without them.
		// A server of the sandbox's own, on a port of its loopback, reached
		// through the port gateway by E2B's port header.
		var started api.ExecResponse
		if code := d.do("POST", "/api/v1/sandboxes/"+sb.ID+"/exec", api.ExecRequest{Command: []string{"sh", "-c",
			"echo served > /tmp/index.txt; setsid python3 -m http.server 8000 --bind 127.0.0.1 --directory /tmp >/dev/null 2>&1 &"}}, &started); code != http.StatusOK {
			t.Fatalf("start a server in the sandbox: status %d", code)
		}
		var body string
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			req, _ := http.NewRequest("GET", "http://"+d.addr+"/index.txt", nil)
			req.Header.Set("E2b-Sandbox-Id", sb.ID)
			req.Header.Set("E2b-Sandbox-Port", "8000")
			req.Header.Set("X-Access-Token", sb.AccessToken)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if body = fmt.Sprintf("%d %s", res.StatusCode, b); res.StatusCode == http.StatusOK {
				break
			}
		}
		if body != "200 served\n" {
			t.Errorf("the sandbox's port 8000 by E2B's headers: %q, want 200 served", body)
		}
		for name, tc := range map[string]struct {
			host    string
			headers []string
			want    int
		}{
			"headers":           {d.addr, []string{"E2b-Sandbox-Id", sb.ID, "E2b-Sandbox-Port", "49983", "X-Access-Token", sb.AccessToken}, http.StatusNoContent},
			"host":              {"49983-" + sb.ID + ".localhost", []string{"X-Access-Token", sb.AccessToken}, http.StatusNoContent},
			"token only, no id": {d.addr, []string{"X-Access-Token", sb.AccessToken}, http.StatusNoContent},
			"wrong token":       {d.addr, []string{"E2b-Sandbox-Id", sb.ID, "X-Access-Token", "nope"}, http.StatusUnauthorized},
			"unknown":           {d.addr, []string{"E2b-Sandbox-Id", "nosuchsandbox", "X-Access-Token", sb.AccessToken}, http.StatusBadGateway},
			"daemon's own":      {d.addr, nil, http.StatusOK},
		} {
			if got := get(tc.host, tc.headers...); got != tc.want {
				t.Errorf("%s: status %d, want %d", name, got, tc.want)
			}
		}
	})
	t.Run("wrong key", func(t *testing.T) {
		res := python(t, "badkey")
		if res["type"] != "AuthenticationException" || !strings.HasPrefix(fmt.Sprint(res["message"]), "401") {
			t.Errorf("create with a wrong key: %v, want AuthenticationException 401", res)
		}
		if s, _ := res["seconds"].(float64); s > 3 {
			t.Errorf("a wrong key took %.1f s to fail", s)
		}
		noSandboxes(t)
	})
	t.Run("unknown template", func(t *testing.T) {
		res := python(t, "badtemplate")
		status, _ := res["status"].(float64)
		if status < 400 || status >= 500 {
			t.Errorf("create of an unknown template: %v, want a 4xx", res)
		}
		t.Logf("an unknown template failed in %.3f s: %v", res["seconds"], res["message"])
		noSandboxes(t)
	})
	d.assertNoLeaks()
}

// checkResult fails for each key of want whose value in res, printed, is
// not want's.
func checkResult(t *testing.T, res map[string]any, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := fmt.Sprint(res[k]); got != v {
			t.Errorf("%s = %q, want %q (all: %v)", k, got, v, res)
		}
	}
}
