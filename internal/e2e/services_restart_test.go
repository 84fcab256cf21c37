package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/llmtest"
	"github.com/agent2env/agent2env/internal/llm/proxy"
)

// callLoopScript calls the LLM proxy from a sandbox every 50 ms, each call
// once (urllib does not retry), until /tmp/stop exists, then writes each
// call's outcome and duration to /tmp/calls.json.
const callLoopScript = `import json, os, time, urllib.request
calls = []
while not os.path.exists("/tmp/stop"):
    req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions",
        data=json.dumps({"model": "coder", "messages": [{"role": "user", "content": "hi"}]}).encode(),
        headers={"Content-Type": "application/json"})
    start = time.monotonic()
    try:
        answer = json.load(urllib.request.urlopen(req, timeout=30))["choices"][0]["message"]["content"]
    except Exception as e:
        answer = "failed: " + repr(e)
    calls.append([answer, time.monotonic() - start])
    time.sleep(0.05)
open("/tmp/calls.json.tmp", "w").write(json.dumps(calls))
os.rename("/tmp/calls.json.tmp", "/tmp/calls.json")
`

// TestServicesDuringDaemonRestart: a sandbox's calls to the daemon's
// services made while the daemon restarts (stopped, then started again on
// its data) are not refused: the agent's forwarder holds each one until
// the daemon is back, so that a model client without retries, or with few,
// loses no call to an upgrade of the daemon.
func TestServicesDuringDaemonRestart(t *testing.T) {
	withConfig := withAnsweringModel(t, "here")
	d := startDaemon(t, "", withConfig)
	sb := d.create(api.CreateSandboxRequest{Image: "agent2env/python"})
	if code, body := d.upload(sb.ID, "/tmp/loop.py", []byte(callLoopScript)); code/100 != 2 {
		t.Fatalf("upload: %d %s", code, body)
	}
	d.exec(sb.ID, "sh", "-c", "nohup python3 /tmp/loop.py >/tmp/loop.log 2>&1 &")
	time.Sleep(500 * time.Millisecond)
	stopped := time.Now()
	d.stop()
	time.Sleep(time.Second) // an upgrade: the binary replaced
	d = startDaemon(t, d.dataDir, withConfig)
	away := time.Since(stopped)
	time.Sleep(500 * time.Millisecond)
	d.exec(sb.ID, "touch", "/tmp/stop")
	var calls [][2]any
	deadline := time.Now().Add(30 * time.Second)
	for {
		res := d.exec(sb.ID, "sh", "-c", "cat /tmp/calls.json 2>/dev/null || true")
		if res.Stdout != "" {
			if err := json.Unmarshal([]byte(res.Stdout), &calls); err != nil {
				t.Fatalf("calls.json: %v\n%s", err, res.Stdout)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the loop wrote no calls.json: %+v", d.exec(sb.ID, "cat", "/tmp/loop.log"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	var longest float64
	for i, c := range calls {
		if c[0] != "here" {
			t.Errorf("call %d of %d: %v", i, len(calls), c[0])
		}
		if s, _ := c[1].(float64); s > longest {
			longest = s
		}
	}
	// The loop called every 50 ms while the daemon was away for `away`:
	// one of its calls must have waited for it, or the test saw no restart.
	if want := away.Seconds() / 2; longest < want {
		t.Errorf("the longest of %d calls took %.3f s, the daemon was away %v: no call was made while it was", len(calls), longest, away)
	}
	d.deleteAll()
	d.stop()
	d.assertNoLeaks()
}

// withAnsweringModel has a daemon serve model "coder" through its LLM
// proxy, from a fake OpenAI upstream that answers every call with answer.
func withAnsweringModel(t *testing.T, answer string) func(*exec.Cmd) {
	t.Helper()
	up := llmtest.NewFakeUpstream(t, proxy.Codecs[llm.FormatOpenAI], "", func(*llm.Request) (*llm.Response, *llm.Error) {
		return &llm.Response{ID: "r", Model: "coder", Content: []llm.Part{llm.Text(answer)}, StopReason: llm.StopEndTurn}, nil
	})
	cfg := filepath.Join(t.TempDir(), "llm.yaml")
	if err := os.WriteFile(cfg, []byte("providers:\n  - {name: p, type: openai, base_url: "+up.URL+"}\nmodels:\n  - {name: coder, provider: p}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return func(c *exec.Cmd) { c.Args = append(c.Args, "--llm-config", cfg) }
}
