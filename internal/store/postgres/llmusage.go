package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agent2env/agent2env/internal/store"
)

var _ store.LLMUsage = (*Store)(nil)

// How long the usage is kept: the seconds for two minutes (the rate
// limits look one back), a scope's total while it was used within a day.
const (
	llmUsageSeconds = 120
	llmUsageIdle    = 24 * time.Hour
)

// AddLLMUsage adds counts in one transaction, in the order of their
// scope and second (so that daemons adding at once never deadlock), and
// deletes what is past keeping.
func (s *Store) AddLLMUsage(ctx context.Context, counts []store.LLMUsageCount) error {
	if len(counts) == 0 {
		return nil
	}
	counts = slices.Clone(counts)
	slices.SortFunc(counts, func(a, b store.LLMUsageCount) int {
		return cmp.Or(cmp.Compare(a.Scope, b.Scope), cmp.Compare(a.Sec, b.Sec))
	})
	totals := map[string]int64{}
	var scopes []string
	for _, c := range counts {
		if _, ok := totals[c.Scope]; !ok {
			scopes = append(scopes, c.Scope)
		}
		totals[c.Scope] += c.Tokens
	}
	err := pgx.BeginFunc(ctx, s.w, func(tx pgx.Tx) error {
		var b pgx.Batch
		for _, c := range counts {
			b.Queue(`INSERT INTO llm_usage (scope, sec, requests, tokens) VALUES ($1, $2, $3, $4)
				ON CONFLICT (scope, sec) DO UPDATE SET requests = llm_usage.requests + excluded.requests,
				tokens = llm_usage.tokens + excluded.tokens`, c.Scope, c.Sec, c.Requests, c.Tokens)
		}
		for _, sc := range scopes {
			b.Queue(`INSERT INTO llm_usage_totals (scope, tokens, used_at) VALUES ($1, $2, now())
				ON CONFLICT (scope) DO UPDATE SET tokens = llm_usage_totals.tokens + excluded.tokens, used_at = now()`,
				sc, totals[sc])
		}
		b.Queue(`DELETE FROM llm_usage WHERE sec < $1`, time.Now().Unix()-llmUsageSeconds)
		b.Queue(`DELETE FROM llm_usage_totals WHERE used_at < $1`, time.Now().Add(-llmUsageIdle))
		return tx.SendBatch(ctx, &b).Close()
	})
	if err != nil {
		return fmt.Errorf("add LLM usage: %w", serverErr(err))
	}
	return nil
}

// LLMUsageOf returns the stored counts of scopes after since, and their
// totals.
func (s *Store) LLMUsageOf(ctx context.Context, scopes []string, since int64) ([]store.LLMUsageCount, map[string]int64, error) {
	rows, err := s.r.Query(ctx, `SELECT scope, sec, requests, tokens FROM llm_usage WHERE scope = ANY($1) AND sec > $2`, scopes, since)
	if err != nil {
		return nil, nil, fmt.Errorf("read LLM usage: %w", err)
	}
	counts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.LLMUsageCount, error) {
		var c store.LLMUsageCount
		err := r.Scan(&c.Scope, &c.Sec, &c.Requests, &c.Tokens)
		return c, err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read LLM usage: %w", err)
	}
	rows, err = s.r.Query(ctx, `SELECT scope, tokens FROM llm_usage_totals WHERE scope = ANY($1)`, scopes)
	if err != nil {
		return nil, nil, fmt.Errorf("read LLM usage: %w", err)
	}
	totals := map[string]int64{}
	var sc string
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&sc, &n}, func() error { totals[sc] = n; return nil }); err != nil {
		return nil, nil, fmt.Errorf("read LLM usage: %w", err)
	}
	return counts, totals, nil
}
