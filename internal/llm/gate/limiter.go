package gate

import (
	"sync"
	"time"

	"github.com/agent2env/agent2env/internal/llm"
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
// one-second buckets, and tokens in all. It is safe for concurrent use.
type limiter struct {
	mu     sync.Mutex
	now    func() time.Time
	counts map[string]*counter // by kind + "/" + id
}

type counter struct {
	buckets [60]bucket
	total   int64
	last    time.Time // last use, for pruning
}

type bucket struct {
	sec            int64
	requests, toks int64
}

func newLimiter() *limiter {
	return &limiter{now: time.Now, counts: map[string]*counter{}}
}

func (c *counter) bucket(sec int64) *bucket {
	b := &c.buckets[sec%60]
	if b.sec != sec {
		*b = bucket{sec: sec}
	}
	return b
}

// minute sums the buckets of the last 60 seconds.
func (c *counter) minute(sec int64) (requests, tokens int64) {
	for _, b := range c.buckets {
		if b.sec > sec-60 {
			requests += b.requests
			tokens += b.toks
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

// admit counts a request against every scope, or none and returns a rate
// limit error naming the first limit it would pass. used holds the total
// a key scope starts from (its stored usage) the first time it is seen.
// The scope's kind comes with the error.
func (l *limiter) admit(scopes []scope, used map[string]int64) (string, *llm.Error) {
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
		// A key's usage may have grown on other daemons (Keys.Sync).
		total := max(c.total, used[s.id])
		switch {
		case s.limit.BudgetTokens > 0 && total >= s.limit.BudgetTokens:
			return s.kind, limitError("%s %s has used its budget of %d tokens (%d used)", s.kind, s.id, s.limit.BudgetTokens, total)
		case s.limit.RequestsPerMinute > 0 && reqs >= int64(s.limit.RequestsPerMinute):
			return s.kind, limitError("%s %s is over its rate limit of %d requests per minute; try again in a minute", s.kind, s.id, s.limit.RequestsPerMinute)
		case s.limit.TokensPerMinute > 0 && toks >= int64(s.limit.TokensPerMinute):
			return s.kind, limitError("%s %s is over its rate limit of %d tokens per minute (%d in the last minute); try again in a minute", s.kind, s.id, s.limit.TokensPerMinute, toks)
		}
	}
	for _, s := range scopes {
		c := l.counter(s, used[s.id])
		c.bucket(sec).requests++
		c.last = now
	}
	return "", nil
}

func limitError(format string, args ...any) *llm.Error {
	e := llm.Errorf(llm.ErrorRateLimit, format, args...)
	e.Message = "agent2env LLM proxy: " + e.Message
	return e
}

// charge counts tokens a finished call used against every scope.
func (l *limiter) charge(scopes []scope, used map[string]int64, tokens int64) {
	if tokens <= 0 {
		return
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range scopes {
		c := l.counter(s, used[s.id])
		c.bucket(now.Unix()).toks += tokens
		c.total += tokens
		c.last = now
	}
}

// prune forgets the counts of scopes unused for idle: their minute is
// long over, and a sandbox or run gone that long is not coming back.
func (l *limiter) prune(idle time.Duration) {
	cut := l.now().Add(-idle)
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, c := range l.counts {
		if c.last.Before(cut) {
			delete(l.counts, k)
		}
	}
}
