package gate_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/gate"
	"github.com/agent2env/agent2env/internal/llm/llmtest"
	"github.com/agent2env/agent2env/internal/llm/proxy"
	"github.com/agent2env/agent2env/internal/store"
)

// TestConcurrentCallsReserve: calls in flight count against a budget
// (each reserves its estimate: its input and its max_tokens), so many
// calls made at once are not all admitted while the budget still has
// room: what they use stays within the budget and one call. (All were
// admitted: 8 calls of 10 tokens against a budget of 40.)
func TestConcurrentCallsReserve(t *testing.T) {
	const calls, budget, perCall = 8, 40, 10
	hold := make(chan struct{})
	var arrived atomic.Int32
	up := llmtest.NewFakeUpstream(t, proxy.Codecs[llm.FormatOpenAI], "", func(*llm.Request) (*llm.Response, *llm.Error) {
		arrived.Add(1)
		<-hold
		return &llm.Response{ID: "r", Model: "m", Content: []llm.Part{llm.Text("ok")}, StopReason: llm.StopEndTurn,
			Usage: llm.Usage{InputTokens: 6, OutputTokens: perCall - 6}}, nil
	})
	g := gate.New(gate.Config{})
	if err := g.Apply(proxy.Config{
		Providers: []proxy.Provider{{Name: "up", Type: "openai", BaseURL: up.URL}},
		Models:    []proxy.Model{{Name: "m", Provider: "up"}},
	}, gate.Limits{Sandbox: gate.Limit{BudgetTokens: budget}}); err != nil {
		t.Fatal(err)
	}
	h := g.SandboxHandler("/llm", "sb-1", nil)
	var (
		wg       sync.WaitGroup
		admitted atomic.Int32
		refused  atomic.Int32
	)
	for range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, body := post(t, h, llm.FormatOpenAI, "/v1/chat/completions",
				`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, "")
			switch code {
			case http.StatusOK:
				admitted.Add(1)
			case http.StatusTooManyRequests:
				refused.Add(1)
			default:
				t.Errorf("call: %d %s", code, body)
			}
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); arrived.Load()+refused.Load() < calls; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls upstream, %d refused, of %d", arrived.Load(), refused.Load(), calls)
		}
	}
	close(hold)
	wg.Wait()
	if n := int(admitted.Load()); n == 0 || n*perCall > budget+perCall {
		t.Errorf("%d of %d concurrent calls admitted (%d tokens) against a budget of %d", n, calls, n*perCall, budget)
	}
	// The reservations were released: what is left of the budget serves.
	if code, body := call(t, h, llm.FormatOpenAI, ""); admitted.Load()*perCall < budget && code != http.StatusOK {
		t.Errorf("a call after the others ended: %d %s", code, body)
	}
}

// TestRefusedCallsRecorded: calls refused by a limit (429, with
// Retry-After) and calls with a per-run key that is not valid (401) are
// recorded, as every call is, with their status and error and nothing
// sent upstream; a refused key's body is not read.
func TestRefusedCallsRecorded(t *testing.T) {
	g, rec := newGate(t, gate.Config{Keys: newKeys(t)}, gate.Limits{Sandbox: gate.Limit{RequestsPerMinute: 1}})
	h := g.SandboxHandler("/llm", "sb-1", func(context.Context) (string, string, error) { return "run-1", "t-1", nil })
	if code, body := call(t, h, llm.FormatAnthropic, ""); code != http.StatusOK {
		t.Fatalf("first call: %d %s", code, body)
	}
	r := httptest.NewRequest(http.MethodPost, "/llm/v1/messages", strings.NewReader(clientCalls[llm.FormatAnthropic].body))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "60" {
		t.Fatalf("past the rate limit: %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
	ex := rec.last()
	if ex.Status != http.StatusTooManyRequests || ex.Err == nil || ex.Provider != "" || ex.Model != "m" || ex.Caller.Run != "run-1" || ex.Caller.Tenant != "t-1" {
		t.Errorf("refused call recorded as %+v", ex)
	}
	n := len(rec.all)
	if code, _ := call(t, g.Handler("/llm"), llm.FormatOpenAI, gate.KeyPrefix+"00"); code != http.StatusUnauthorized {
		t.Fatalf("bad per-run key: %d", code)
	}
	if len(rec.all) != n+1 {
		t.Fatalf("the call with a bad per-run key was not recorded")
	}
	if ex := rec.last(); ex.Status != http.StatusUnauthorized || ex.Err == nil || ex.Provider != "" || ex.Model != "" {
		t.Errorf("bad key recorded as %+v (its body unread: no model)", ex)
	}
}

// spent is a Spent that says every sandbox and run has used n tokens,
// and counts how often it was asked.
type spent struct {
	n     int64
	asked atomic.Int32
}

func (s *spent) LLMTokens(context.Context, store.LLMExchangeFilter) (int64, error) {
	s.asked.Add(1)
	return s.n, nil
}

// TestBudgetsOutliveTheGate: a sandbox's or a run's budget starts from
// what the archive holds of its use (Config.Spent) the first time the gate
// counts it — after a restart, or once its idle count was forgotten — and
// the archive is read once, not on every call. (It started from zero.)
func TestBudgetsOutliveTheGate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limits gate.Limits
		want   string
	}{
		{"sandbox", gate.Limits{Sandbox: gate.Limit{BudgetTokens: 100}}, "sandbox sb-1 has used its budget of 100 tokens (105 used)"},
		{"run", gate.Limits{Run: gate.Limit{BudgetTokens: 100}}, "run run-1 has used its budget of 100 tokens (105 used)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := &spent{n: 95}
			g, _ := newGate(t, gate.Config{Spent: sp}, tc.limits)
			h := g.SandboxHandler("/llm", "sb-1", func(context.Context) (string, string, error) { return "run-1", "", nil })
			if code, body := call(t, h, llm.FormatOpenAI, ""); code != http.StatusOK { // 95 + 10
				t.Fatalf("first call: %d %s", code, body)
			}
			code, body := call(t, h, llm.FormatOpenAI, "")
			if msg := errorMessage(t, llm.FormatOpenAI, body); code != http.StatusTooManyRequests || !strings.Contains(msg, tc.want) {
				t.Errorf("second call: %d %s; want 429 saying %q", code, body, tc.want)
			}
			if n := sp.asked.Load(); n != 1 {
				t.Errorf("the archive was read %d times, want once", n)
			}
		})
	}
}

// TestHugeMaxTokensStillReserves: a call asking for more output than an
// int64 holds with its input (max_tokens near math.MaxInt64, in the body
// as the client sent it) reserves the whole budget while in flight, as
// any call asking past it does: the others are refused until it ends.
// (Its estimate overflowed to a negative reservation, which let every
// other call in flight past the budget.)
func TestHugeMaxTokensStillReserves(t *testing.T) {
	for _, tc := range []struct{ name, maxTokens string }{
		{"max int64", "9223372036854775807"},
		{"near max int64", "9223372036854775000"},
		{"past the budget", "1000000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hold := make(chan struct{})
			var arrived atomic.Int32
			up := llmtest.NewFakeUpstream(t, proxy.Codecs[llm.FormatOpenAI], "", func(*llm.Request) (*llm.Response, *llm.Error) {
				if arrived.Add(1) == 1 {
					<-hold
				}
				return &llm.Response{ID: "r", Model: "m", Content: []llm.Part{llm.Text("ok")}, StopReason: llm.StopEndTurn,
					Usage: llm.Usage{InputTokens: 6, OutputTokens: 4}}, nil
			})
			g := gate.New(gate.Config{})
			if err := g.Apply(proxy.Config{
				Providers: []proxy.Provider{{Name: "up", Type: "openai", BaseURL: up.URL}},
				Models:    []proxy.Model{{Name: "m", Provider: "up"}},
			}, gate.Limits{Sandbox: gate.Limit{BudgetTokens: 1000}}); err != nil {
				t.Fatal(err)
			}
			h := g.SandboxHandler("/llm", "sb-1", nil)
			done := make(chan int, 1)
			go func() {
				code, _ := post(t, h, llm.FormatOpenAI, "/v1/chat/completions",
					`{"model":"m","max_tokens":`+tc.maxTokens+`,"messages":[{"role":"user","content":"hi"}]}`, "")
				done <- code
			}()
			for deadline := time.Now().Add(10 * time.Second); arrived.Load() == 0; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the first call did not reach the upstream")
				}
			}
			code, body := post(t, h, llm.FormatOpenAI, "/v1/chat/completions",
				`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, "")
			close(hold)
			if first := <-done; first != http.StatusOK {
				t.Errorf("first call: %d", first)
			}
			if code != http.StatusTooManyRequests || !strings.Contains(errorMessage(t, llm.FormatOpenAI, body), "reserved") {
				t.Errorf("a call while the first reserves the budget: %d %s; want 429 naming the reservation", code, body)
			}
			// Its reservation released, the budget serves again.
			if code, body := call(t, h, llm.FormatOpenAI, ""); code != http.StatusOK {
				t.Errorf("a call after the first ended: %d %s", code, body)
			}
		})
	}
}
