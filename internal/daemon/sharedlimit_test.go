package daemon

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/llmtest"
	"github.com/agent2env/agent2env/internal/llm/proxy"
)

// A per-run key's rate limit holds across two daemons of one PostgreSQL
// store, within the stated bound (each shares its counts every second,
// so the others see them within about 2 s): calls spread over both are
// refused past the limit on either.
func TestLLMRateLimitAcrossDaemons(t *testing.T) {
	ctx := context.Background()
	ds := startSharedLLM(t, llm.Usage{InputTokens: 1, OutputTokens: 1})
	k, err := ds[0].api.LLMKeys().Create(ctx, api.LLMKeyRequest{Name: "rl", RequestsPerMinute: 3, ExpiresIn: 600})
	if err != nil {
		t.Fatal(err)
	}
	// Two calls on one daemon, one on the other: each under the limit of
	// 3 by its own count, the limit by their sum.
	for i, d := range []int{0, 1, 0} {
		if code, body := llmCall(t, ds[d].addr, k.Key, false); code != http.StatusOK {
			t.Fatalf("call %d on daemon %d: %d %s", i, d, code, body)
		}
	}
	time.Sleep(2500 * time.Millisecond) // the bound, and some room
	for i, d := range ds {
		if code, body := llmCall(t, d.addr, k.Key, false); code != http.StatusTooManyRequests || !strings.Contains(body, "rate limit of 3 requests per minute") {
			t.Errorf("daemon %d, a fourth call in the minute: %d %s; want 429, the key's rate limit", i, code, body)
		}
	}
}

// startSharedLLM starts two daemons of one PostgreSQL store whose LLM
// proxy has model m, answering "hi" with usage.
func startSharedLLM(t *testing.T, usage llm.Usage) [2]*testDaemon {
	t.Helper()
	up := llmtest.NewFakeUpstream(t, proxy.Codecs[llm.FormatOpenAI], "", func(*llm.Request) (*llm.Response, *llm.Error) {
		return &llm.Response{ID: "r", Model: "m", Content: []llm.Part{llm.Text("hi")}, StopReason: llm.StopEndTurn, Usage: usage}, nil
	})
	path := filepath.Join(t.TempDir(), "llm.yaml")
	writeLLMConfig(t, path, up.URL)
	return startShared(t, func(cfg *Config) { cfg.LLMConfig = path })
}
