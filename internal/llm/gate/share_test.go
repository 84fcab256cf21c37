package gate

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/store"
)

// memUsage is store.LLMUsage in memory.
type memUsage struct {
	mu     sync.Mutex
	secs   map[string]map[int64]store.LLMUsageCount
	totals map[string]int64
}

func (m *memUsage) AddLLMUsage(_ context.Context, counts []store.LLMUsageCount) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range counts {
		if m.secs[c.Scope] == nil {
			m.secs[c.Scope] = map[int64]store.LLMUsageCount{}
		}
		s := m.secs[c.Scope][c.Sec]
		s.Scope, s.Sec, s.Requests, s.Tokens = c.Scope, c.Sec, s.Requests+c.Requests, s.Tokens+c.Tokens
		m.secs[c.Scope][c.Sec] = s
		m.totals[c.Scope] += c.Tokens
	}
	return nil
}

func (m *memUsage) LLMUsageOf(_ context.Context, scopes []string, since int64) ([]store.LLMUsageCount, map[string]int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []store.LLMUsageCount
	totals := map[string]int64{}
	for _, sc := range scopes {
		for sec, c := range m.secs[sc] {
			if sec > since {
				out = append(out, c)
			}
		}
		totals[sc] = m.totals[sc]
	}
	return out, totals, nil
}

// Two daemons' limiters sharing their counts through a store: a rate
// limit and a budget hold over their sum once shared, shared again a
// daemon's own counts are not counted twice, and the other's leave the
// window as they age.
func TestLimiterShared(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_000_000, 0)
	st := &memUsage{secs: map[string]map[int64]store.LLMUsageCount{}, totals: map[string]int64{}}
	var ls [2]*limiter
	for i := range ls {
		ls[i] = newLimiter()
		ls[i].now = func() time.Time { return now }
	}
	sb := []scope{{kind: "sandbox", id: "s", limit: Limit{RequestsPerMinute: 4}}}
	run := []scope{{kind: "run", id: "r", limit: Limit{BudgetTokens: 100}}}
	admit := func(i int, sc []scope) string {
		t.Helper()
		kind, _ := ls[i].admit(sc, nil, 0)
		return kind
	}
	share := func() {
		t.Helper()
		for range 2 { // a second share changes nothing
			for _, l := range ls {
				if err := l.share(ctx, st); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for i, d := range []int{0, 0, 1} {
		if k := admit(d, sb); k != "" {
			t.Fatalf("request %d on daemon %d refused (%s)", i, d, k)
		}
		ls[d].settle(run, nil, 0, 40) // 120 tokens in all, 80 on daemon 0
	}
	if k := admit(0, run); k != "" {
		t.Fatalf("daemon 0 before sharing, 80 of 100 tokens of its own: refused (%s)", k)
	}
	share()
	if k := admit(1, sb); k != "" { // the fourth of 4
		t.Fatalf("the fourth request: refused (%s)", k)
	}
	share()
	for d := range ls {
		if k := admit(d, sb); k != "sandbox" {
			t.Errorf("daemon %d, a fifth request in the minute: %q; want the sandbox's limit", d, k)
		}
		if k := admit(d, run); k != "run" {
			t.Errorf("daemon %d, the run's budget spent over both: %q; want the run's budget", d, k)
		}
	}
	now = now.Add(61 * time.Second)
	share()
	for d := range ls {
		if k := admit(d, sb); k != "" {
			t.Errorf("daemon %d a minute later: refused (%s)", d, k)
		}
	}
}
