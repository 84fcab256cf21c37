package gate

import (
	"fmt"
	"math"
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
	l.prune(24*time.Hour, false)
	if len(l.counts) != 0 {
		t.Errorf("after prune: %d counters left", len(l.counts))
	}
}

// TestLimiterPrune: the counts of scopes without a budget are forgotten
// countIdle after their last use, so a daemon whose sandboxes come and go
// does not keep one per sandbox for a day; those a budget, a call in
// flight or an unshared count still needs are kept.
func TestLimiterPrune(t *testing.T) {
	const n = 1000
	tests := []struct {
		name    string
		limit   Limit
		reserve int64 // of each call, never settled when not 0
		shared  bool  // on a shared store, share not run since
		idle    time.Duration
		want    int // counters left
	}{
		{name: "no budget, idle", idle: 3 * time.Minute, want: 0},
		{name: "no budget, rate limited, idle", limit: Limit{RequestsPerMinute: 5}, idle: 3 * time.Minute, want: 0},
		{name: "no budget, used lately", idle: 30 * time.Second, want: n},
		{name: "no budget, calls in flight", reserve: 10, idle: 3 * time.Minute, want: n},
		{name: "no budget, not shared yet", shared: true, idle: 3 * time.Minute, want: n},
		{name: "budget", limit: Limit{BudgetTokens: 1000}, idle: 3 * time.Minute, want: n},
		{name: "budget, a day idle", limit: Limit{BudgetTokens: 1000}, idle: 25 * time.Hour, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Unix(1_000_000, 0)
			l := newLimiter()
			l.now = func() time.Time { return now }
			for i := range n {
				sc := []scope{{kind: "sandbox", id: fmt.Sprintf("sb%d", i), limit: tt.limit}}
				if _, err := l.admit(sc, nil, tt.reserve); err != nil {
					t.Fatal(err)
				}
				if tt.reserve == 0 {
					l.settle(sc, nil, 0, 7)
				}
			}
			now = now.Add(tt.idle)
			l.prune(24*time.Hour, tt.shared)
			if len(l.counts) != tt.want {
				t.Errorf("%d counters left, want %d", len(l.counts), tt.want)
			}
		})
	}
}

// TestLimiterReservesNoWrap: reservations that together pass what an
// int64 holds stop there, and a budget partly used still refuses the
// calls they leave no room for. (The sum wrapped negative, admitting
// every call past the budget.)
func TestLimiterReservesNoWrap(t *testing.T) {
	l := newLimiter()
	sb := []scope{{kind: "sandbox", id: "s", limit: Limit{BudgetTokens: 1000}}}
	for i, tc := range []struct {
		reserve int64
		want    string
	}{
		{0, ""},                  // uses 500 below, reserving nothing
		{math.MaxInt64 - 10, ""}, // the budget has room: admitted
		{10, "sandbox"},          // 500 used + MaxInt64-10 reserved
	} {
		kind, _ := l.admit(sb, nil, tc.reserve)
		if kind != tc.want {
			t.Fatalf("call %d: admit = %q; want %q", i+1, kind, tc.want)
		}
		if i == 0 {
			l.settle(sb, nil, 0, 500)
		}
	}
	l.mu.Lock()
	c := l.counts["sandbox/s"]
	c.reserved = addSat(c.reserved, math.MaxInt64)
	got := c.reserved
	l.mu.Unlock()
	if got != math.MaxInt64 {
		t.Errorf("reserved = %d after adding past the maximum; want math.MaxInt64", got)
	}
	if kind, _ := l.admit(sb, nil, 1); kind != "sandbox" {
		t.Errorf("admit with the reservations at the maximum = %q; want refused", kind)
	}
}
