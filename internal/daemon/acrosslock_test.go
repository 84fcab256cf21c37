package daemon

import (
	"context"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/agent2env/agent2env/internal/contexts"
	"github.com/agent2env/agent2env/internal/llm"
)

// Executions of one session sent to two daemons of one PostgreSQL store
// at once, into a session neither has yet: one session is made, with one
// sandbox and one kernel, and the executions run in it one at a time.
func TestSessionAcrossDaemons(t *testing.T) {
	ctx := context.Background()
	ds := startShared(t, func(cfg *Config) {
		cfg.Contexts.Defaults = map[string]contexts.Source{api.LanguagePython: {Image: tinyRef}}
	})
	for _, d := range ds {
		d.importTiny()
	}
	// Each execution counts itself in the kernel's state and says when
	// it ran.
	code := "import time\nn = globals().get('n', 0) + 1\nstart = time.time()\ntime.sleep(0.3)\n" +
		"print(n, start, time.time())"
	const each = 3
	type span struct {
		n          int
		start, end float64
	}
	var (
		mu    sync.Mutex
		spans []span
		wg    sync.WaitGroup
	)
	for i := range 2 * each {
		wg.Go(func() {
			resp, err := ds[i%2].api.Sessions().ExecuteCode(ctx, api.SessionExecuteRequest{SessionID: "shared", Code: code})
			if err != nil {
				t.Errorf("execution %d on daemon %d: %v", i, i%2, err)
				return
			}
			f := strings.Fields(resp.Output.Stdout)
			if !resp.Success || len(f) != 3 {
				t.Errorf("execution %d on daemon %d: %+v", i, i%2, resp)
				return
			}
			var sp span
			var err1, err2, err3 error
			sp.n, err1 = strconv.Atoi(f[0])
			sp.start, err2 = strconv.ParseFloat(f[1], 64)
			sp.end, err3 = strconv.ParseFloat(f[2], 64)
			if err1 != nil || err2 != nil || err3 != nil {
				t.Errorf("execution %d: output %q", i, resp.Output.Stdout)
				return
			}
			mu.Lock()
			spans = append(spans, sp)
			mu.Unlock()
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
	for i, sp := range spans {
		if sp.n != i+1 {
			t.Errorf("execution %d in start order counted itself %d: not one kernel (%+v)", i+1, sp.n, spans)
		}
		if i > 0 && sp.start < spans[i-1].end {
			t.Errorf("executions overlap: %+v then %+v", spans[i-1], sp)
		}
	}
	for i, d := range ds {
		sessions, err := d.api.Sessions().List(ctx)
		if err != nil || len(sessions) != 1 || sessions[0].SessionID != "shared" {
			t.Errorf("daemon %d lists sessions %+v, %v; want the one", i, sessions, err)
		}
		sbs, err := d.api.Sandbox.List(ctx)
		if err != nil || len(sbs) != 1 {
			t.Errorf("daemon %d lists sandboxes %+v, %v; want the session's", i, sbs, err)
		}
		cs, err := d.api.Contexts().List(ctx, client.ListContextsOptions{SessionName: "shared"})
		if err != nil || len(cs) != 1 {
			t.Errorf("daemon %d lists the session's contexts %+v, %v; want one kernel", i, cs, err)
		}
	}
}

// A per-run LLM key's budget spent across two daemons of one PostgreSQL
// store is refused on both, within the stated bound: each daemon writes
// its usage and reads back the others' every second, so within about 2 s
// of the spending call. A key revoked on one is refused on the other
// within the same bound.
func TestLLMBudgetAcrossDaemons(t *testing.T) {
	ctx := context.Background()
	ds := startSharedLLM(t, llm.Usage{InputTokens: 11, OutputTokens: 7})
	// 18 tokens a call: two calls on one daemon and one on the other
	// spend 54, past the budget, while each daemon counted less.
	k, err := ds[0].api.LLMKeys().Create(ctx, api.LLMKeyRequest{Name: "b", BudgetTokens: 50, ExpiresIn: 600})
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range []int{0, 1, 0} {
		if code, body := llmCall(t, ds[d].addr, k.Key, false); code != http.StatusOK {
			t.Fatalf("call %d on daemon %d: %d %s", i, d, code, body)
		}
	}
	spent := time.Now()
	time.Sleep(2500 * time.Millisecond) // the bound, and some room
	for i, d := range ds {
		if code, body := llmCall(t, d.addr, k.Key, false); code != http.StatusTooManyRequests || !strings.Contains(body, "budget of 50 tokens (54 used)") {
			t.Errorf("daemon %d %v after the budget was spent: %d %s; want 429, 54 used", i, time.Since(spent).Round(time.Millisecond), code, body)
		}
	}

	// Revoked on daemon 1, which daemon 0 has used and cached.
	k2, err := ds[0].api.LLMKeys().Create(ctx, api.LLMKeyRequest{Name: "r", ExpiresIn: 600})
	if err != nil {
		t.Fatal(err)
	}
	if code, body := llmCall(t, ds[0].addr, k2.Key, false); code != http.StatusOK {
		t.Fatalf("call with a new key: %d %s", code, body)
	}
	if err := ds[1].api.LLMKeys().Revoke(ctx, k2.ID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond)
	if code, body := llmCall(t, ds[0].addr, k2.Key, false); code != http.StatusUnauthorized {
		t.Errorf("a key revoked on the other daemon: %d %s; want 401", code, body)
	}
}
