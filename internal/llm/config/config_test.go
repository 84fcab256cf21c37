package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/llm/proxy"
)

const good = `# a local model and a hosted fallback
providers:
  - name: local
    type: openai
    base_url: http://127.0.0.1:9000/v1
    api_key_env: LOCAL_KEY
    forward_headers: [OpenAI-Project]
  - name: claude
    type: anthropic
    base_url: https://api.anthropic.com
models:
  - name: coder
    aliases: [gpt-4o]
    provider: local
    model: qwen2.5-coder
    fallbacks: [backup]
    timeout: 30s
  - name: backup
    provider: claude
retries:
  attempts: 3
  backoff: 100ms
limits:
  sandbox:
    requests_per_minute: 60
`

func TestParse(t *testing.T) {
	f, err := Parse("llm.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := f.Proxy(func(k string) string { return map[string]string{"LOCAL_KEY": "sk-local"}[k] })
	if err != nil {
		t.Fatal(err)
	}
	want := proxy.Config{
		Providers: []proxy.Provider{
			{Name: "local", Type: "openai", BaseURL: "http://127.0.0.1:9000/v1", APIKey: "sk-local", ForwardHeaders: []string{"OpenAI-Project"}},
			{Name: "claude", Type: "anthropic", BaseURL: "https://api.anthropic.com"},
		},
		Models: []proxy.Model{
			{Name: "coder", Provider: "local", Model: "qwen2.5-coder", Fallbacks: []string{"backup"}, Timeout: 30 * time.Second},
			{Name: "gpt-4o", Provider: "local", Model: "qwen2.5-coder", Fallbacks: []string{"backup"}, Timeout: 30 * time.Second},
			{Name: "backup", Provider: "claude", Model: "backup", Timeout: DefaultTimeout},
		},
		Retry: proxy.Retry{Attempts: 3, Backoff: 100 * time.Millisecond, MaxBackoff: DefaultMaxBackoff},
	}
	if d := cmp.Diff(want, cfg); d != "" {
		t.Errorf("proxy config (-want +got):\n%s", d)
	}
	if f.Limits.Sandbox.RequestsPerMinute != 60 {
		t.Errorf("limits: %+v", f.Limits)
	}
}

func TestParseErrorsNameTheLine(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"syntax", "providers:\n  - name: a\n    type: \"openai\n", "llm config llm.yaml:3: found unexpected end of stream"},
		{"unknown field", "providers:\n  - name: a\n    typ: openai\n", "llm config llm.yaml:3: unknown field typ"},
		{"wrong type", "models:\n  - name: a\n    fallbacks: b\n", `llm config llm.yaml:3: fallbacks must be a list, not "b"`},
		{"a number for a list", "models:\n  - name: a\n    aliases: 5\n", "llm config llm.yaml:3: aliases must be a list, not the number 5"},
		{"a list for a string", "models:\n  - name: [a]\n", "llm config llm.yaml:2: name must be a string, not a list"},
		{"bad duration", "timeout: soon\n", `llm config llm.yaml:1: timeout must be a duration such as 30s or 2m, not "soon"`},
		{"bad type", "providers:\n  - name: a\n    type: bedrock\n    base_url: http://x\n", `llm config llm.yaml:3: provider "a": type "bedrock" is not one of openai, openai-responses, anthropic, gemini, replay`},
		{"no base_url", "providers:\n  - name: a\n    type: openai\n", `llm config llm.yaml:2: provider "a": base_url is missing`},
		{"bad base_url", "providers:\n  - name: a\n    type: openai\n    base_url: 127.0.0.1:9000\n", `llm config llm.yaml:4: provider "a": base_url "127.0.0.1:9000" is not an http(s) URL`},
		{"provider twice", "providers:\n  - {name: a, type: openai, base_url: http://x}\n  - name: a\n    type: openai\n", `llm config llm.yaml:3: provider "a" is defined twice`},
		{"unknown provider", "providers:\n  - {name: a, type: openai, base_url: http://x}\nmodels:\n  - name: m\n    provider: b\n", `llm config llm.yaml:5: model "m": unknown provider "b"`},
		{"alias twice", "providers:\n  - {name: a, type: openai, base_url: http://x}\nmodels:\n  - name: m\n    provider: a\n  - name: n\n    provider: a\n    aliases: [x, m]\n", `llm config llm.yaml:8: model name "m" is used twice`},
		{"unknown fallback", "providers:\n  - {name: a, type: openai, base_url: http://x}\nmodels:\n  - name: m\n    provider: a\n    fallbacks:\n      - n\n", `llm config llm.yaml:7: model "m": unknown fallback "n"`},
		{"replay without script", "providers:\n  - name: r\n    type: replay\n", `llm config llm.yaml:2: provider "r": a replay provider needs a script`},
		{"forward a credential", "providers:\n  - name: a\n    type: openai\n    base_url: http://x\n    forward_headers:\n      - OpenAI-Organization\n      - authorization\n",
			`llm config llm.yaml:7: provider "a": forward_headers: authorization is never passed on: the proxy sets it, or it is the client's credential`},
		{"forward no header", "providers:\n  - name: a\n    type: openai\n    base_url: http://x\n    forward_headers: [\"OpenAI Project\"]\n",
			`llm config llm.yaml:5: provider "a": forward_headers: "OpenAI Project" is not a header name`},
		{"negative limit", "limits:\n  run:\n    budget_tokens: -1\n", "llm config llm.yaml:3: limits must not be negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("llm.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatal("no error")
			}
			if err.Error() != tc.want {
				t.Errorf("error:\n got %s\nwant %s", err, tc.want)
			}
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("%v is not ErrInvalidArgument", err)
			}
		})
	}
}

func TestProxyErrors(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "script.yaml"), []byte("turns:\n  - text: hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, yaml, want string
	}{
		{"key not set", "providers:\n  - name: a\n    type: openai\n    base_url: http://x\n    api_key_env: NOPE\n",
			`llm config DIR/llm.yaml:5: provider "a": api_key_env NOPE is not set in the daemon's environment`},
		{"script missing", "providers:\n  - name: r\n    type: replay\n    script: missing.yaml\n",
			`llm config DIR/llm.yaml:4: provider "r": script: open DIR/missing.yaml: no such file or directory`},
		{"script ok", "providers:\n  - name: r\n    type: replay\n    script: script.yaml\nmodels:\n  - {name: m, provider: r}\n", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse(filepath.Join(dir, "llm.yaml"), []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.Proxy(func(string) string { return "" })
			got := ""
			if err != nil {
				got = err.Error()
			}
			if want := strings.ReplaceAll(tc.want, "DIR", dir); got != want {
				t.Errorf("error:\n got %s\nwant %s", got, want)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	f, err := Parse("llm.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := f.Proxy(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := proxy.Retry{Attempts: DefaultAttempts, Backoff: DefaultBackoff, MaxBackoff: DefaultMaxBackoff}
	if cfg.Retry != want || f.Timeout != DefaultTimeout {
		t.Errorf("defaults: %+v, timeout %v", cfg.Retry, f.Timeout)
	}
	zero := 0
	f, _ = Parse("llm.yaml", []byte("retries:\n  attempts: 0\n"))
	if *f.Retries.Attempts != zero {
		t.Errorf("explicit 0 attempts became %d", *f.Retries.Attempts)
	}
}

// TestReplayExamples: tasks/replay/llm.yaml, the configuration of the
// example tasks with no model, loads with all its scripts, and has a model
// replay-<task>-<agent> for each scripted task and agent CLI.
func TestReplayExamples(t *testing.T) {
	f, err := Load(filepath.Join("..", "..", "..", "tasks", "replay", "llm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := f.Proxy(nil)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, m := range cfg.Models {
		have[m.Name] = true
	}
	for _, task := range []string{"hello", "fix-failing-test", "remote-mcp", "analyse-csv", "local-mcp"} {
		for _, agent := range []string{"claude-code", "codex", "gemini-cli", "opencode", "qwen-code"} {
			if name := "replay-" + task + "-" + agent; !have[name] {
				t.Errorf("no model %s", name)
			}
		}
	}
}
