package gate

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/store"
)

// Limit bounds one caller: requests and tokens in the last minute, and
// tokens in all. Zero fields mean no limit.
type Limit struct {
	RequestsPerMinute int   `yaml:"requests_per_minute"`
	TokensPerMinute   int   `yaml:"tokens_per_minute"`
	BudgetTokens      int64 `yaml:"budget_tokens"`
}

func (l Limit) zero() bool { return l == Limit{} }

// or is l with its zero fields taken from d.
func (l Limit) or(d Limit) Limit {
	if l.RequestsPerMinute == 0 {
		l.RequestsPerMinute = d.RequestsPerMinute
	}
	if l.TokensPerMinute == 0 {
		l.TokensPerMinute = d.TokensPerMinute
	}
	if l.BudgetTokens == 0 {
		l.BudgetTokens = d.BudgetTokens
	}
	return l
}

// scope is one thing counted: a key, a sandbox or a run.
type scope struct {
	kind, id string // "key", "sandbox", "run"
	limit    Limit
}

// limiter counts requests and tokens per scope over a sliding minute of
// one-second buckets, and tokens in all, and holds what the calls in
// flight reserved of the budgets: a call is admitted only while what was
// used and what the others in flight reserved leave room, so concurrent
// calls overrun a budget by no more than one call's use beyond its
// estimate. On a store other daemons share,
// share adds what it counted to the store and reads back the others'
// counts, which admit adds to its own: the limits hold across daemons,
// each seeing the others' use about two sharing intervals late. It is
// safe for concurrent use.
type limiter struct {
	mu     sync.Mutex
	now    func() time.Time
	counts map[string]*counter // by kind + "/" + id
}

type counter struct {
	buckets [60]bucket
	total   int64
	last    time.Time // last use, for pruning
	// budget: its scope had a budget when last counted, for pruning.
	budget bool
	// reserved is what the calls in flight reserved (admit), until they
	// settle.
	reserved int64
	// pending is what was counted since share last added it to the
	// store; local the tokens charged here in all.
	pending [60]bucket
	local   int64
	// others and othersTotal are the other daemons' counts, as share
	// last read them.
	others      [60]bucket
	othersTotal int64
}

type bucket struct {
	sec            int64
	requests, toks int64
}

func newLimiter() *limiter {
	return &limiter{now: time.Now, counts: map[string]*counter{}}
}

// at is the bucket of second sec in ring.
func at(ring *[60]bucket, sec int64) *bucket {
	b := &ring[sec%60]
	if b.sec != sec {
		*b = bucket{sec: sec}
	}
	return b
}

// add counts requests and tokens in second sec.
func (c *counter) add(sec, requests, tokens int64) {
	for _, b := range []*bucket{at(&c.buckets, sec), at(&c.pending, sec)} {
		b.requests += requests
		b.toks += tokens
	}
}

// minute sums the buckets of the last 60 seconds, the other daemons'
// too.
func (c *counter) minute(sec int64) (requests, tokens int64) {
	for _, ring := range []*[60]bucket{&c.buckets, &c.others} {
		for _, b := range ring {
			if b.sec > sec-60 {
				requests += b.requests
				tokens += b.toks
			}
		}
	}
	return requests, tokens
}

func (l *limiter) counter(s scope, initial int64) *counter {
	k := s.kind + "/" + s.id
	c := l.counts[k]
	if c == nil {
		c = &counter{total: initial}
		l.counts[k] = c
	}
	return c
}

// uncounted returns the scopes of scopes the limiter has no count of.
func (l *limiter) uncounted(scopes []scope) []scope {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []scope
	for _, s := range scopes {
		if l.counts[s.kind+"/"+s.id] == nil {
			out = append(out, s)
		}
	}
	return out
}

// admit counts a request against every scope and reserves tokens of
// each, or does neither and returns a rate limit error naming the first
// limit it would pass: a budget counts what the calls in flight reserved
// as used. used holds the total a key scope starts from (its stored
// usage) the first time it is seen. The scope's kind comes with the
// error.
func (l *limiter) admit(scopes []scope, used map[string]int64, reserve int64) (string, *llm.Error) {
	now := l.now()
	sec := now.Unix()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range scopes {
		if s.limit.zero() {
			continue
		}
		c := l.counter(s, used[s.id])
		reqs, toks := c.minute(sec)
		// A key's usage may have grown on other daemons (Keys.Sync);
		// a sandbox's or a run's is shared here.
		total := max(c.total, used[s.id])
		if s.kind != "key" {
			total += c.othersTotal
		}
		switch {
		case s.limit.BudgetTokens > 0 && total >= s.limit.BudgetTokens:
			return s.kind, limitError("%s %s has used its budget of %d tokens (%d used)", s.kind, s.id, s.limit.BudgetTokens, total)
		case s.limit.BudgetTokens > 0 && c.reserved >= s.limit.BudgetTokens-total:
			return s.kind, limitError("%s %s has used or reserved for the calls in flight its budget of %d tokens (%d used, %d reserved); try again when they end",
				s.kind, s.id, s.limit.BudgetTokens, total, c.reserved)
		case s.limit.RequestsPerMinute > 0 && reqs >= int64(s.limit.RequestsPerMinute):
			return s.kind, limitError("%s %s is over its rate limit of %d requests per minute; try again in a minute", s.kind, s.id, s.limit.RequestsPerMinute)
		case s.limit.TokensPerMinute > 0 && toks >= int64(s.limit.TokensPerMinute):
			return s.kind, limitError("%s %s is over its rate limit of %d tokens per minute (%d in the last minute); try again in a minute", s.kind, s.id, s.limit.TokensPerMinute, toks)
		}
	}
	for _, s := range scopes {
		c := l.counter(s, used[s.id])
		c.add(sec, 1, 0)
		c.reserved = addSat(c.reserved, reserve)
		c.last = now
		c.budget = s.limit.BudgetTokens > 0
	}
	return "", nil
}

// addSat is a+b for b >= 0, stopping at math.MaxInt64 rather than
// wrapping: reservations of calls asking for all the output an int64
// holds add up to no less than any budget.
func addSat(a, b int64) int64 {
	if b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}

func limitError(format string, args ...any) *llm.Error {
	e := llm.Errorf(llm.ErrorRateLimit, format, args...)
	e.Message = "agent2env LLM proxy: " + e.Message
	e.RetryAfter = time.Minute
	return e
}

// settle releases what a finished call reserved and counts the tokens it
// used against every scope.
func (l *limiter) settle(scopes []scope, used map[string]int64, reserved, tokens int64) {
	if reserved <= 0 && tokens <= 0 {
		return
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range scopes {
		c := l.counter(s, used[s.id])
		c.reserved = max(0, c.reserved-reserved)
		if tokens > 0 {
			c.add(now.Unix(), 0, tokens)
			c.total += tokens
			c.local += tokens
			c.last = now
		}
	}
}

// countIdle is how long a count no budget needs is kept unused: past its
// minute, nothing reads it.
const countIdle = 2 * time.Minute

// prune forgets the counts of scopes unused for idle: their minute is
// long over, and a sandbox or run gone that long is not coming back. A
// count whose scope has no budget goes after countIdle already, unless
// calls are in flight or, on a shared store (shared), it holds counts not
// added to the store yet: else every sandbox that ever called a model
// would hold its count, some 5 KiB, for idle.
func (l *limiter) prune(idle time.Duration, shared bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, c := range l.counts {
		early := !c.budget && c.reserved == 0 && c.last.Before(now.Add(-countIdle)) && !(shared && c.unshared())
		if early || c.last.Before(now.Add(-idle)) {
			delete(l.counts, k)
		}
	}
}

// unshared reports whether c holds counts share has not added to the
// store yet.
func (c *counter) unshared() bool {
	for _, p := range c.pending {
		if p.requests != 0 || p.toks != 0 {
			return true
		}
	}
	return false
}

// share adds what was counted since the last share to st, then reads
// back every scope's counts of the last minute and total, of which the
// other daemons' are the stored ones less what this one added. What st
// refuses is kept for the next share.
func (l *limiter) share(ctx context.Context, st store.LLMUsage) error {
	sec := l.now().Unix()
	l.mu.Lock()
	var adds []store.LLMUsageCount
	scopes := make([]string, 0, len(l.counts))
	for k, c := range l.counts {
		scopes = append(scopes, k)
		for i := range c.pending {
			if p := &c.pending[i]; p.requests != 0 || p.toks != 0 {
				adds = append(adds, store.LLMUsageCount{Scope: k, Sec: p.sec, Requests: p.requests, Tokens: p.toks})
			}
			c.pending[i] = bucket{}
		}
	}
	l.mu.Unlock()
	if err := st.AddLLMUsage(ctx, adds); err != nil {
		l.mu.Lock()
		for _, a := range adds {
			if c := l.counts[a.Scope]; c != nil {
				p := at(&c.pending, a.Sec)
				p.requests += a.Requests
				p.toks += a.Tokens
			}
		}
		l.mu.Unlock()
		return fmt.Errorf("share llm usage: %w", err)
	}
	if len(scopes) == 0 {
		return nil
	}
	counts, totals, err := st.LLMUsageOf(ctx, scopes, sec-60)
	if err != nil {
		return fmt.Errorf("share llm usage: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range scopes {
		if c := l.counts[k]; c != nil {
			c.others = [60]bucket{}
			var pending int64
			for _, p := range c.pending {
				pending += p.toks
			}
			c.othersTotal = max(0, totals[k]-(c.local-pending))
		}
	}
	for _, u := range counts {
		c := l.counts[u.Scope]
		if c == nil {
			continue
		}
		// This daemon's part of the stored second: what it counted, less
		// what it has not added yet.
		var mine bucket
		if b := c.buckets[u.Sec%60]; b.sec == u.Sec {
			mine = b
		}
		if p := c.pending[u.Sec%60]; p.sec == u.Sec {
			mine.requests -= p.requests
			mine.toks -= p.toks
		}
		o := at(&c.others, u.Sec)
		o.requests, o.toks = max(0, u.Requests-mine.requests), max(0, u.Tokens-mine.toks)
	}
	return nil
}
