package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/llmtest"
	"github.com/agent2env/agent2env/internal/llm/proxy"
)

// TestLLMFromSandbox: a command in a sandbox without network calls the
// daemon's LLM proxy at 127.0.0.1:4000 with no key of its own, reaches a
// fake upstream with the operator's key, and is counted as that sandbox's
// (its rate limit names it); the upstream key is nowhere in the sandbox.
func TestLLMFromSandbox(t *testing.T) {
	const upstreamKey = "sk-upstream-e2e-0123456789-secret"
	up := llmtest.NewFakeUpstream(t, proxy.Codecs[llm.FormatOpenAI], upstreamKey, func(*llm.Request) (*llm.Response, *llm.Error) {
		return &llm.Response{ID: "r1", Model: "qwen", Content: []llm.Part{llm.Text("hello from upstream")},
			StopReason: llm.StopEndTurn, Usage: llm.Usage{InputTokens: 3, OutputTokens: 2}}, nil
	})
	cfg := filepath.Join(t.TempDir(), "llm.yaml")
	err := os.WriteFile(cfg, []byte(fmt.Sprintf(`providers:
  - name: fake
    type: openai
    base_url: %s
    api_key_env: E2E_UPSTREAM_KEY
models:
  - name: coder
    provider: fake
    model: qwen
limits:
  sandbox:
    requests_per_minute: 2
`, up.URL)), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "", func(c *exec.Cmd) {
		c.Args = append(c.Args, "--llm-config", cfg)
		c.Env = append(os.Environ(), "E2E_UPSTREAM_KEY="+upstreamKey)
	})
	sb := d.create(api.CreateSandboxRequest{Image: "agent2env/python"})

	ask := func() llmAnswer {
		t.Helper()
		return askFromSandbox(t, d, sb.ID)
	}
	for i := range 2 {
		a := ask()
		if a.Status != 200 || len(a.Body.Choices) != 1 || a.Body.Choices[0].Message.Content != "hello from upstream" {
			t.Fatalf("call %d: %+v", i+1, a)
		}
	}
	calls := up.Calls()
	if len(calls) != 2 || calls[0].Request == nil || calls[0].Request.Model != "qwen" {
		t.Fatalf("upstream calls: %+v", calls)
	}
	// The third is past the sandbox's limit, which names the sandbox: the
	// call was known to be this sandbox's with no key.
	a := ask()
	if want := "sandbox " + sb.ID + " is over its rate limit"; a.Status != 429 || !strings.Contains(a.Body.Error.Message, want) {
		t.Errorf("third call: %+v, want 429 saying %q", a, want)
	}
	// The archive has the two answered calls (and the refused one) under
	// this sandbox, though no call named it. The index trails the log.
	var xs api.LLMExchangeList
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		xs = api.LLMExchangeList{}
		if code := d.do("GET", "/api/v1/llm/exchanges?sandbox="+sb.ID, nil, &xs); code != http.StatusOK {
			t.Fatalf("list exchanges: status %d", code)
		}
		if len(xs.Items) >= 2 || time.Now().After(deadline) {
			break
		}
	}
	answered := 0
	for _, x := range xs.Items {
		if x.SandboxID != sb.ID {
			t.Errorf("exchange %s of sandbox %q listed for %s", x.ID, x.SandboxID, sb.ID)
		}
		if x.Status == http.StatusOK {
			answered++
		}
	}
	if answered != 2 {
		t.Errorf("archived answered calls of the sandbox = %d, want 2: %+v", answered, xs.Items)
	}
	// Listing models is not counted against the limit.
	res := d.exec(sb.ID, "python3", "-c", `import os, urllib.request; print(urllib.request.urlopen(os.environ["AGENT2ENV_LLM_URL"] + "/v1/models").read().decode())`)
	if !strings.Contains(res.Stdout, `"id":"coder"`) {
		t.Errorf("models: %+v", res)
	}

	// The environment points at the proxy; the upstream key is neither in
	// it nor in any file the sandbox can read.
	env := d.exec(sb.ID, "env").Stdout
	for _, want := range []string{"OPENAI_BASE_URL=http://127.0.0.1:4000/llm/v1", "ANTHROPIC_BASE_URL=http://127.0.0.1:4000/llm",
		"GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:4000/llm", "AGENT2ENV_LLM_URL=http://127.0.0.1:4000/llm", "OPENAI_API_KEY=agent2env"} {
		if !strings.Contains(env, want+"\n") {
			t.Errorf("sandbox env lacks %s:\n%s", want, env)
		}
	}
	if strings.Contains(env, upstreamKey) {
		t.Errorf("the upstream key is in the sandbox's environment")
	}
	// (grep lists the files that match; it exits 2 for the files it may
	// not read, such as root's.)
	grep := d.exec(sb.ID, "sh", "-c", "grep -rlsF --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev -e "+upstreamKey+" / ; echo exit=$?")
	if out := strings.TrimSpace(grep.Stdout); out != "exit=1" && out != "exit=2" {
		t.Errorf("the upstream key is in files the sandbox reads: %+v", grep)
	}

	// MCP is there too, for task agents.
	mcp := d.exec(sb.ID, "python3", "-c", `import json, urllib.request
req = urllib.request.Request("http://127.0.0.1:4000/mcp", data=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}}).encode(),
    headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
print(urllib.request.urlopen(req, timeout=30).status)`)
	if strings.TrimSpace(mcp.Stdout) != "200" {
		t.Errorf("MCP from the sandbox: %+v", mcp)
	}

	// A sandbox's own values win over the proxy's.
	own := d.create(api.CreateSandboxRequest{Image: "agent2env/python", Env: map[string]string{"OPENAI_BASE_URL": "http://mine/v1"}})
	env = d.exec(own.ID, "env").Stdout
	if !strings.Contains(env, "OPENAI_BASE_URL=http://mine/v1\n") || !strings.Contains(env, "ANTHROPIC_BASE_URL=http://127.0.0.1:4000/llm\n") {
		t.Errorf("a sandbox's own OPENAI_BASE_URL:\n%s", env)
	}
	d.deleteAll()
	d.assertNoLeaks()
}

// TestLLMConfigReloadOnHangup: SIGHUP makes the daemon read its LLM
// configuration again; a file with an error keeps the one in use, and the
// log names the line.
func TestLLMConfigReloadOnHangup(t *testing.T) {
	answer := func(text string) func(*llm.Request) (*llm.Response, *llm.Error) {
		return func(*llm.Request) (*llm.Response, *llm.Error) {
			return &llm.Response{ID: "r", Model: "m", Content: []llm.Part{llm.Text(text)}, StopReason: llm.StopEndTurn}, nil
		}
	}
	one := llmtest.NewFakeUpstream(t, proxy.Codecs[llm.FormatOpenAI], "", answer("from one"))
	two := llmtest.NewFakeUpstream(t, proxy.Codecs[llm.FormatAnthropic], "", answer("from two"))
	cfg := filepath.Join(t.TempDir(), "llm.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(cfg, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("providers:\n  - {name: p, type: openai, base_url: " + one.URL + "}\nmodels:\n  - {name: m, provider: p}\n")
	d := startDaemon(t, "", func(c *exec.Cmd) { c.Args = append(c.Args, "--llm-config", cfg) })
	ask := func() string {
		t.Helper()
		var out struct {
			Choices []struct{ Message struct{ Content string } }
		}
		if code := d.do("POST", "/llm/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, &out); code != 200 || len(out.Choices) != 1 {
			t.Fatalf("call: %d %+v", code, out)
		}
		return out.Choices[0].Message.Content
	}
	// hangup sends SIGHUP and waits for the n-th wantLog in the log.
	hangup := func(wantLog string, n int) {
		t.Helper()
		if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); strings.Count(d.log.String(), wantLog) < n; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in the log after SIGHUP:\n%s", wantLog, d.log.String())
			}
		}
	}
	if got := ask(); got != "from one" {
		t.Fatalf("before: %q", got)
	}
	write("providers:\n  - {name: p, type: anthropic, base_url: " + two.URL + "}\nmodels:\n  - {name: m, provider: p}\n")
	hangup(`msg="llm proxy configured"`, 2)
	if got := ask(); got != "from two" {
		t.Errorf("after SIGHUP: %q, want the new configuration's answer", got)
	}
	write("providers:\n  - {name: p, type: anthropic, base_url: " + two.URL + "}\nmodels:\n  - {name: m, provider: q}\n")
	hangup(`llm.yaml:4: model \"m\": unknown provider \"q\"`, 1)
	if got := ask(); got != "from two" {
		t.Errorf("after a bad file: %q, want the configuration in use", got)
	}
}

// llmCallScript calls the proxy the way an OpenAI client in a sandbox
// would, with no key, and prints the status and the JSON answer.
const llmCallScript = `import json, os, sys, urllib.request, urllib.error
req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions",
    data=json.dumps({"model": "coder", "messages": [{"role": "user", "content": "hi"}]}).encode(),
    headers={"Content-Type": "application/json"})
try:
    print(json.dumps({"status": 200, "body": json.load(urllib.request.urlopen(req, timeout=30))}))
except urllib.error.HTTPError as e:
    print(json.dumps({"status": e.code, "body": json.load(e)}))`

type llmAnswer struct {
	Status int
	Body   struct {
		Choices []struct{ Message struct{ Content string } }
		Error   struct{ Message, Type string }
	}
}

func askFromSandbox(t *testing.T, d *daemon, id string) llmAnswer {
	t.Helper()
	res := d.exec(id, "python3", "-c", llmCallScript)
	var a llmAnswer
	if err := json.Unmarshal([]byte(res.Stdout), &a); err != nil {
		t.Fatalf("call from the sandbox: %+v", res)
	}
	return a
}

// TestLLMAfterDaemonRestart: a sandbox reaches the proxy again once a
// killed daemon is back: Recover serves its services socket anew.
func TestLLMAfterDaemonRestart(t *testing.T) {
	withConfig := withAnsweringModel(t, "still here")
	d := startDaemon(t, "", withConfig)
	sb := d.create(api.CreateSandboxRequest{Image: "agent2env/python"})
	if a := askFromSandbox(t, d, sb.ID); a.Status != 200 {
		t.Fatalf("before the restart: %+v", a)
	}
	d.kill()
	d = startDaemon(t, d.dataDir, withConfig)
	if a := askFromSandbox(t, d, sb.ID); a.Status != 200 || len(a.Body.Choices) != 1 || a.Body.Choices[0].Message.Content != "still here" {
		t.Errorf("after the restart: %+v", a)
	}
	d.deleteAll()
	d.stop()
	d.assertNoLeaks()
}
