package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/testenv"
)

// The MCP server driven by stock clients, not by our own code: the MCP
// Inspector CLI (npm) and the official Python SDK (PyPI), over stdio (the
// bridge `agent2env mcp` serves) and over the daemon's /mcp. make test
// installs them (scripts/test-peers.sh).

// mcpClients are the paths scripts/test-peers.sh wrote for the MCP
// clients (the SDKs' are stocksdk's).
type mcpClients struct {
	nodeBin, inspector, python string
}

// stockClients returns the installed clients: a missing install is a
// failure under CI, else a skip that says how to install them.
func stockClients(t *testing.T) mcpClients {
	t.Helper()
	env := testenv.StockClients(t)
	c := mcpClients{nodeBin: env["NODE_BIN"], inspector: env["INSPECTOR"], python: env["PYTHON"]}
	for _, p := range []string{c.inspector, c.python} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("clients.env names a missing client: %v", err)
		}
	}
	return c
}

// stdioServer returns the command line of the stdio MCP server.
func stdioServer(t *testing.T) []string {
	t.Helper()
	return []string{binary, "mcp"}
}

// inspector runs one Inspector CLI call and returns the result it prints
// (its first JSON document).
func (c mcpClients) runInspector(t *testing.T, target []string, tool string, args ...string) map[string]any {
	t.Helper()
	argv := append([]string{"--cli"}, target...)
	argv = append(argv, "--method", "tools/call", "--tool-name", tool)
	for _, a := range args {
		argv = append(argv, "--tool-arg", a)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.inspector, argv...)
	cmd.Env = append(os.Environ(), "PATH="+c.nodeBin+":"+os.Getenv("PATH"), "CI=true")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Run() // a tool error exits non-zero: the result says it
	var res map[string]any
	if err := json.NewDecoder(&stdout).Decode(&res); err != nil || res["content"] == nil {
		t.Fatalf("inspector %s %v: no result (%v)\nstdout: %s\nstderr: %s", tool, args, err, stdout.String(), stderr.String())
	}
	return res
}

// structured returns a result's structured content; textJSON the JSON of
// its first text content.
func structured(t *testing.T, res map[string]any) map[string]any {
	t.Helper()
	m, ok := res["structuredContent"].(map[string]any)
	if !ok {
		t.Fatalf("no structured content in %v", res)
	}
	return m
}

func textJSON(t *testing.T, res map[string]any) map[string]any {
	t.Helper()
	content, _ := res["content"].([]any)
	first, _ := content[0].(map[string]any)
	var m map[string]any
	if err := json.Unmarshal([]byte(first["text"].(string)), &m); err != nil {
		t.Fatalf("text content %v: %v", first, err)
	}
	return m
}

// inspectorFlow runs seed 004's test flow and the session checks with the
// Inspector against target.
func inspectorFlow(t *testing.T, c mcpClients, target []string) {
	call := func(tool string, args ...string) map[string]any { return c.runInspector(t, target, tool, args...) }
	created := structured(t, call("create_context", "name=test", "language=python"))
	id, _ := created["context_id"].(string)
	if !strings.HasPrefix(id, "ctx-") || created["message"] != "Python context created successfully" || created["status"] != "active" {
		t.Fatalf("create_context: %v", created)
	}
	if run := structured(t, call("run_code", "code=x = 100\nprint(x)", "context_id="+id)); run["stdout"] != "100\n" || run["success"] != true {
		t.Errorf("run_code: %v", run)
	}
	if run := structured(t, call("run_code", "code=print(x + 1)", "context_id="+id)); run["stdout"] != "101\n" {
		t.Errorf("state kept: %v", run)
	}
	listed := structured(t, call("list_contexts"))
	if !strings.Contains(mustJSON(listed), id) {
		t.Errorf("list_contexts: %v", listed)
	}
	if stopped := structured(t, call("stop_context", "context_id="+id)); stopped["status"] != "stopped" {
		t.Errorf("stop_context: %v", stopped)
	}
	gone := call("run_code", "code=print(x)", "context_id="+id)
	if gone["isError"] != true || textJSON(t, gone)["code"] != "CONTEXT_NOT_FOUND" {
		t.Errorf("run_code after stop: %v", gone)
	}
	first := structured(t, call("execute_code", "code=y = 41\nprint(y)"))
	sid, _ := first["session_id"].(string)
	if first["created"] != true || sid == "" || first["stdout"] != "41\n" {
		t.Fatalf("execute_code, new session: %v", first)
	}
	if again := structured(t, call("execute_code", "code=y + 1", "session_id="+sid)); again["created"] != false || again["result"] != "42" {
		t.Errorf("execute_code, reused session: %v", again)
	}
	fig := call("execute_code", "code=import matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\nplt.show()", "session_id="+sid)
	if !strings.Contains(mustJSON(fig["content"]), `"mimeType":"image/png"`) {
		t.Errorf("figure: %.300s", mustJSON(fig))
	}
	// The Inspector reads code=1 as the number 1: a bad argument.
	bad := call("run_code", "code=1", "context_id="+id)
	if bad["isError"] != true || textJSON(t, bad)["code"] != "INVALID_PARAMS" {
		t.Errorf("bad argument: %v", bad)
	}
	call("stop_session", "session_id="+sid)
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestMCPStockClients drives the MCP server with the MCP Inspector and the
// Python SDK, over stdio and HTTP.
func TestMCPStockClients(t *testing.T) {
	clients := stockClients(t)
	d := startDaemon(t, "")
	stdio := stdioServer(t)
	inspectorStdio := append([]string{"-e", "AGENT2ENV_URL=" + d.url("")}, stdio...)
	t.Run("inspector stdio", func(t *testing.T) { inspectorFlow(t, clients, inspectorStdio) })
	t.Run("inspector http", func(t *testing.T) { inspectorFlow(t, clients, []string{d.url("/mcp")}) })
	python := func(t *testing.T, args ...string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, clients.python, append([]string{"testdata/mcp_flow.py"}, args...)...)
		cmd.Env = append(os.Environ(), "AGENT2ENV_URL="+d.url(""))
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "done") {
			t.Errorf("python mcp client %v: %v\n%s", args, err, out)
		}
	}
	t.Run("python stdio", func(t *testing.T) { python(t, append([]string{"stdio"}, stdio...)...) })
	t.Run("python http", func(t *testing.T) { python(t, "http", d.url("/mcp")) })

	// One connection carries concurrent calls: HTTP/2 cleartext.
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	resp, err := (&http.Client{Transport: tr}).Get(d.url("/health"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Errorf("h2c: served over %s", resp.Proto)
	}
	d.deleteAll()
	d.assertNoLeaks()
}

// TestMCPStdioPipe: `agent2env mcp` fed by a one-shot pipe, its requests
// then the end of its input (printf ... | agent2env mcp), answers every
// request, the execution's progress included, before it exits. (The
// output comes well before the result: progress the daemon sends just
// before a result may be forwarded after it, too late once the input has
// ended.)
func TestMCPStdioPipe(t *testing.T) {
	d := startDaemon(t, "")
	input := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"pipe","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_contexts","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"import time\nprint('piped', flush=True)\ntime.sleep(0.5)"},"_meta":{"progressToken":"p"}}}`,
	}, "\n") + "\n"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "mcp")
	cmd.Env = append(os.Environ(), "AGENT2ENV_URL="+d.url(""))
	cmd.Stdin = strings.NewReader(input)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("agent2env mcp: %v\nstderr: %s", err, stderr.String())
	}
	answers, progress := map[float64]map[string]any{}, ""
	dec := json.NewDecoder(&stdout)
	for dec.More() {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("stdout: %v", err)
		}
		if id, ok := m["id"].(float64); ok {
			answers[id] = m
		} else if params, _ := m["params"].(map[string]any); m["method"] == "notifications/progress" && params["progressToken"] == "p" {
			progress += fmt.Sprint(params["message"])
		}
	}
	for _, id := range []float64{1, 2, 3} {
		if res, _ := answers[id]["result"].(map[string]any); res == nil || res["isError"] == true {
			t.Errorf("answer to %v: %v", id, answers[id])
		}
	}
	if res, _ := answers[3]["result"].(map[string]any); !strings.Contains(mustJSON(res), `piped\n`) || progress != "piped\n" {
		t.Errorf("execute_code: %v, progress %q", res, progress)
	}
	d.deleteAll()
	d.assertNoLeaks()
}
