package gate

import (
	"testing"
	"time"
)

func TestLimiterWindow(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	l := newLimiter()
	l.now = func() time.Time { return now }
	sb := []scope{{kind: "sandbox", id: "s", limit: Limit{RequestsPerMinute: 2, TokensPerMinute: 100, BudgetTokens: 250}}}
	steps := []struct {
		advance time.Duration
		charge  int64
		want    string // the admitted scope kind of an error, "" when admitted
	}{
		{0, 10, ""},
		{10 * time.Second, 10, ""},
		{10 * time.Second, 0, "sandbox"},  // 2 requests in the minute
		{41 * time.Second, 90, ""},        // the first request left the window
		{0, 0, "sandbox"},                 // 100 tokens in the minute
		{61 * time.Second, 100, ""},       // a new minute: 210 tokens in all
		{61 * time.Second, 0, ""},         // still under the budget of 250
		{0, 50, ""},                       // the request of step 6 left the window
		{61 * time.Second, 0, "sandbox"},  // 260 tokens: past the budget for good
		{600 * time.Second, 0, "sandbox"}, // the budget does not renew
	}
	for i, s := range steps {
		now = now.Add(s.advance)
		kind, err := l.admit(sb, nil, 0)
		if kind != s.want || (err == nil) != (s.want == "") {
			t.Fatalf("step %d: admit = %q, %v; want %q", i+1, kind, err, s.want)
		}
		l.settle(sb, nil, 0, s.charge)
	}
	// Idle counts are forgotten.
	l.admit([]scope{{kind: "run", id: "r"}}, nil, 0)
	now = now.Add(25 * time.Hour)
	l.prune(24 * time.Hour)
	if len(l.counts) != 0 {
		t.Errorf("after prune: %d counters left", len(l.counts))
	}
}
