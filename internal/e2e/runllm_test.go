package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/llmtest"
	"github.com/agent2env/agent2env/internal/llm/proxy"
)

// askTwiceScript is a custom agent: two turns of one conversation with
// the model the run was given, through the LLM proxy at the base URL in
// its environment, with no key of its own.
const askTwiceScript = `import json, os, urllib.request
base, model = os.environ["OPENAI_BASE_URL"], os.environ["AGENT2ENV_MODEL"]
messages = [{"role": "user", "content": "fix the bug"}]
for turn in range(2):
    req = urllib.request.Request(base + "/chat/completions", data=json.dumps({"model": model, "messages": messages}).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
    answer = json.load(urllib.request.urlopen(req, timeout=60))["choices"][0]["message"]["content"]
    print("model:", answer)
    messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": "and now?"}]
open("done.txt", "w").write("ok\n")
`

// TestRunLLMCalls: `agent2env task run` of a custom agent that calls the
// LLM proxy from its sandbox: the calls are the run's (no key, no help
// from the agent), its result has their requests, tokens and
// conversation, and --out has the conversation's export beside
// result.json.
func TestRunLLMCalls(t *testing.T) {
	up := llmtest.NewFakeUpstream(t, proxy.Codecs[llm.FormatOpenAI], "", func(*llm.Request) (*llm.Response, *llm.Error) {
		return &llm.Response{ID: "r", Model: "qwen", Content: []llm.Part{llm.Text("done")}, StopReason: llm.StopEndTurn,
			Usage: llm.Usage{InputTokens: 11, OutputTokens: 5}}, nil
	})
	dir := t.TempDir()
	cfg := filepath.Join(dir, "llm.yaml")
	if err := os.WriteFile(cfg, []byte("providers:\n  - {name: fake, type: openai, base_url: "+up.URL+"}\nmodels:\n  - {name: coder, provider: fake, model: qwen}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "", func(c *exec.Cmd) { c.Args = append(c.Args, "--llm-config", cfg) })
	os.WriteFile(filepath.Join(dir, "ask.py"), []byte(askTwiceScript), 0o644)
	taskFile := filepath.Join(dir, "ask.yaml")
	os.WriteFile(taskFile, []byte(`name: ask
image: agent2env/python
agent: custom
model: coder
goal: ask the model
entrypoint: python3 /workspace/ask.py
inputs: [{source: ./ask.py, destination: /workspace/ask.py}]
end: {timeout: 2m, success_file: /workspace/done.txt}
`), 0o644)
	out := filepath.Join(dir, "results")
	cmd := exec.Command(binary, "--url", d.url(""), "task", "run", taskFile, "--out", out)
	text, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("task run: %v\n%s", err, text)
	}
	results, _ := filepath.Glob(filepath.Join(out, "run-*", "result.json"))
	if len(results) != 1 {
		t.Fatalf("results in --out: %v\n%s", results, text)
	}
	var r api.Run
	if b, err := os.ReadFile(results[0]); err != nil || json.Unmarshal(b, &r) != nil {
		t.Fatalf("result.json: %v", err)
	}
	if want := (api.RunLLMUsage{Requests: 2, InputTokens: 22, OutputTokens: 10, Source: "proxy"}); r.Status != api.RunSucceeded || r.LLM != want {
		t.Errorf("run %s (%s), llm %+v; want succeeded with %+v", r.Status, r.Reason, r.LLM, want)
	}
	if r.ConversationID == "" || len(r.ConversationIDs) != 1 {
		t.Errorf("conversations %q %q, want the one of the two turns", r.ConversationID, r.ConversationIDs)
	}
	conv, err := os.ReadFile(filepath.Join(filepath.Dir(results[0]), "conversation.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(conv)), "\n")
	if len(lines) != 2 {
		t.Fatalf("conversation.jsonl has %d lines, want the 2 exchanges:\n%s", len(lines), conv)
	}
	for i, l := range lines {
		var x api.LLMExchangeDetail
		if err := json.Unmarshal([]byte(l), &x); err != nil || x.RunID != r.ID || x.ConversationID != r.ConversationID {
			t.Errorf("exchange %d: run %q conversation %q, %v; want %s %s", i, x.RunID, x.ConversationID, err, r.ID, r.ConversationID)
		}
	}
	if !strings.Contains(string(text), fmt.Sprintf("%d/%d", 1, 1)) {
		t.Errorf("task run's summary:\n%s", text)
	}
	d.stop()
	d.assertNoLeaks()
}
