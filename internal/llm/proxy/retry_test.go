package proxy_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/llmtest"
	"github.com/agent2env/agent2env/internal/llm/proxy"
)

// flaky fails its first n calls with e, then answers.
func flaky(n int32, e *llm.Error) func(*llm.Request) (*llm.Response, *llm.Error) {
	var calls atomic.Int32
	ok := answer("after retries")
	return func(r *llm.Request) (*llm.Response, *llm.Error) {
		if calls.Add(1) <= n {
			return nil, e
		}
		return ok(r)
	}
}

func TestRetries(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	tests := []struct {
		name         string
		answer       func(*llm.Request) (*llm.Response, *llm.Error)
		url          string
		retry        proxy.Retry
		timeout      time.Duration
		wantStatus   int
		wantAttempts int
		wantProvider string
	}{
		{name: "429 then ok", answer: flaky(2, &llm.Error{Kind: llm.ErrorRateLimit, Message: "slow down"}),
			retry: proxy.Retry{Attempts: 2, Backoff: time.Millisecond}, wantStatus: 200, wantAttempts: 3, wantProvider: "p"},
		{name: "5xx then ok", answer: flaky(1, &llm.Error{Kind: llm.ErrorOverloaded, Message: "busy"}),
			retry: proxy.Retry{Attempts: 1, Backoff: time.Millisecond}, wantStatus: 200, wantAttempts: 2, wantProvider: "p"},
		{name: "retries spent, fallback answers", answer: flaky(5, &llm.Error{Kind: llm.ErrorInternal, Message: "boom"}),
			retry: proxy.Retry{Attempts: 1, Backoff: time.Millisecond}, wantStatus: 200, wantAttempts: 3, wantProvider: "backup"},
		{name: "connect error retried then fallback", url: closed.URL + "/v1",
			retry: proxy.Retry{Attempts: 2, Backoff: time.Millisecond}, wantStatus: 200, wantAttempts: 4, wantProvider: "backup"},
		{name: "bad request not retried", answer: flaky(5, &llm.Error{Kind: llm.ErrorInvalidRequest, Message: "bad"}),
			retry: proxy.Retry{Attempts: 3, Backoff: time.Millisecond}, wantStatus: 400, wantAttempts: 1, wantProvider: "p"},
		{name: "back-off bounded by the timeout", answer: flaky(5, &llm.Error{Kind: llm.ErrorRateLimit, Message: "slow down"}),
			retry: proxy.Retry{Attempts: 3, Backoff: time.Hour}, timeout: 200 * time.Millisecond, wantStatus: 504, wantAttempts: 2, wantProvider: "backup"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			url := tc.url
			if url == "" {
				url = llmtest.NewFakeUpstream(t, proxy.Codecs[llm.FormatOpenAI], "", tc.answer).URL
			}
			backup := llmtest.NewFakeUpstream(t, proxy.Codecs[llm.FormatOpenAI], "", answer("from backup"))
			base, x := serve(t, proxy.Config{
				Providers: []proxy.Provider{{Name: "p", Type: "openai", BaseURL: url}, {Name: "backup", Type: "openai", BaseURL: backup.URL}},
				Models: []proxy.Model{
					{Name: "m", Provider: "p", Fallbacks: []string{"b"}, Timeout: tc.timeout},
					{Name: "b", Provider: "backup"},
				},
				Retry: tc.retry,
			})
			if tc.name == "bad request not retried" {
				base, x = serve(t, proxy.Config{
					Providers: []proxy.Provider{{Name: "p", Type: "openai", BaseURL: url}},
					Models:    []proxy.Model{{Name: "m", Provider: "p"}},
					Retry:     tc.retry,
				})
			}
			start := time.Now()
			resp, _, got := post(t, base, llm.FormatOpenAI, "m", false)
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.wantStatus, got)
			}
			if ex := x.last(t); ex.Attempts != tc.wantAttempts || ex.Provider != tc.wantProvider {
				t.Errorf("exchange: %d attempts at %s, want %d at %s", ex.Attempts, ex.Provider, tc.wantAttempts, tc.wantProvider)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

// TestFallbackErrorNamesTried: when a model's fallbacks fail too, the
// client's error (and the exchange's) says how each model tried before
// failed, not only the last one, whose failure alone would not say why
// the model asked for did not answer; retries of a single model add
// nothing.
func TestFallbackErrorNamesTried(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	down := closed.URL + "/v1"
	refusing := llmtest.NewFakeUpstream(t, proxy.Codecs[llm.FormatAnthropic], "",
		failing(&llm.Error{Kind: llm.ErrorAuthentication, Message: "invalid x-api-key"})).URL
	tests := []struct {
		name       string
		backup     string // the fallback's provider: "" for none
		backupType string
		wantStatus int
		want       []string // in the error's message, in order
		notWant    string
	}{
		{name: "fallback cannot be reached", backup: down, backupType: "openai", wantStatus: 502,
			want: []string{"call provider backup: ", "connection refused", ` (tried before: model "m": call provider p: `, "connection refused)"}},
		{name: "fallback refuses", backup: refusing, backupType: "anthropic", wantStatus: 401,
			want: []string{"invalid x-api-key", ` (tried before: model "m": call provider p: `, "connection refused)"}},
		{name: "no fallback", wantStatus: 502, want: []string{"call provider p: ", "connection refused"}, notWant: "tried before"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := proxy.Config{
				Providers: []proxy.Provider{{Name: "p", Type: "openai", BaseURL: down}},
				Models:    []proxy.Model{{Name: "m", Provider: "p"}},
				Retry:     proxy.Retry{Attempts: 1, Backoff: time.Millisecond},
			}
			if tc.backup != "" {
				cfg.Providers = append(cfg.Providers, proxy.Provider{Name: "backup", Type: tc.backupType, BaseURL: tc.backup})
				cfg.Models = append(cfg.Models, proxy.Model{Name: "b", Provider: "backup"})
				cfg.Models[0].Fallbacks = []string{"b"}
			}
			base, x := serve(t, cfg)
			resp, _, got := post(t, base, llm.FormatOpenAI, "m", false)
			var body struct{ Error struct{ Message string } }
			if err := json.Unmarshal(got, &body); err != nil || resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.wantStatus, got)
			}
			for _, msg := range []string{body.Error.Message, x.last(t).Err.Error()} {
				rest := msg
				for _, w := range tc.want {
					_, after, ok := strings.Cut(rest, w)
					if !ok {
						t.Errorf("error %q: no %q where expected", msg, w)
						break
					}
					rest = after
				}
				if tc.notWant != "" && strings.Contains(msg, tc.notWant) {
					t.Errorf("error %q has %q", msg, tc.notWant)
				}
			}
		})
	}
}
