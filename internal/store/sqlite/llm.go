package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agent2env/agent2env/internal/store"
)

var llmExchanges = newTable(table[store.LLMExchange]{
	kind: "LLM exchange", name: "llm_exchanges",
	columns: `id, sandbox_id, run_id, key_id, inbound, method, path, model, provider, upstream_model, stream, passthrough, ` +
		`status, state, error, input_tokens, output_tokens, cached_tokens, reasoning_tokens, attempts, first_byte, duration, ` +
		`created_at, request_bytes, response_bytes, stored_bytes, segment, locations, msg_count, msg_hash, conversation, tenant, ended`,
	scan: scanLLMExchange,
	values: func(x *store.LLMExchange) ([]any, error) {
		return []any{x.ID, x.SandboxID, x.RunID, x.KeyID, x.Inbound, x.Method, x.Path, x.Model, x.Provider, x.UpstreamModel,
			x.Stream, x.Passthrough, x.Status, x.State, x.Error, x.InputTokens, x.OutputTokens, x.CachedTokens,
			x.ReasoningTokens, x.Attempts, x.FirstByte.Microseconds(), x.Duration.Microseconds(), toUnix(x.CreatedAt),
			x.RequestBytes, x.ResponseBytes, x.StoredBytes, x.Segment, x.Locations, x.MsgCount, x.MsgHash, x.Conversation, x.Tenant, x.Ended}, nil
	},
	normalize: func(x *store.LLMExchange) {
		x.CreatedAt = fromUnix(toUnix(x.CreatedAt))
		x.FirstByte, x.Duration = x.FirstByte.Truncate(time.Microsecond), x.Duration.Truncate(time.Microsecond)
	},
	setID: func(x *store.LLMExchange, id string) { x.ID = id },
})

func scanLLMExchange(row scanner) (*store.LLMExchange, error) {
	var (
		x                  store.LLMExchange
		first, dur, create int64
	)
	if err := row.Scan(&x.ID, &x.SandboxID, &x.RunID, &x.KeyID, &x.Inbound, &x.Method, &x.Path, &x.Model, &x.Provider,
		&x.UpstreamModel, &x.Stream, &x.Passthrough, &x.Status, &x.State, &x.Error, &x.InputTokens, &x.OutputTokens,
		&x.CachedTokens, &x.ReasoningTokens, &x.Attempts, &first, &dur, &create, &x.RequestBytes, &x.ResponseBytes,
		&x.StoredBytes, &x.Segment, &x.Locations, &x.MsgCount, &x.MsgHash, &x.Conversation, &x.Tenant, &x.Ended); err != nil {
		return nil, err
	}
	x.FirstByte, x.Duration = time.Duration(first)*time.Microsecond, time.Duration(dur)*time.Microsecond
	x.CreatedAt = fromUnix(create)
	return &x, nil
}

// PutLLMExchanges stores xs, replacing the records of the same ids, and
// the archive's mark, in one write transaction: the index and the point
// of the log it reached never disagree. Each exchange that has ended gets
// the next Ended number and joins its conversation (findConversation).
func (s *Store) PutLLMExchanges(ctx context.Context, xs []*store.LLMExchange, mark string) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("index LLM exchanges: %w", err)
	}
	defer tx.Rollback()
	// An exchange's Ended, once set, stays: a follower has seen it.
	upsert, err := tx.PrepareContext(ctx, llmExchanges.insertSQL+` ON CONFLICT(id) DO UPDATE SET `+
		strings.Replace(upsertSet(llmExchanges.columns), "ended = excluded.ended",
			"ended = CASE WHEN llm_exchanges.ended > 0 THEN llm_exchanges.ended ELSE excluded.ended END", 1))
	if err != nil {
		return fmt.Errorf("index LLM exchanges: %w", err)
	}
	defer upsert.Close()
	// The last Ended given, which no other writer can change before this
	// transaction commits: the writer is one connection. "ended > 0" lets
	// SQLite take MAX from the end of the partial index llm_exchanges_ended.
	var ended int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(ended), 0) FROM llm_exchanges WHERE ended > 0`).Scan(&ended); err != nil {
		return fmt.Errorf("index LLM exchanges: %w", err)
	}
	for _, x := range xs {
		x.Ended = 0
		if x.State != store.LLMInProgress {
			ended++
			x.Ended = ended
		}
		if x.Conversation == "" && x.MsgHash != "" {
			if x.Conversation, err = findConversation(ctx, tx, x); err != nil {
				return fmt.Errorf("index LLM exchange %s: %w", x.ID, err)
			}
		}
		llmExchanges.normalize(x)
		args, _ := llmExchanges.values(x)
		if _, err := upsert.ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("index LLM exchange %s: %w", x.ID, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO llm_archive (id, mark) VALUES (1, ?) ON CONFLICT(id) DO UPDATE SET mark = excluded.mark`, mark); err != nil {
		return fmt.Errorf("index LLM exchanges: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("index LLM exchanges: %w", err)
	}
	return nil
}

// upsertSet is the SET clause that replaces every column but the first.
func upsertSet(columns string) string {
	cols := strings.Split(columns, ", ")[1:]
	for i, c := range cols {
		cols[i] = c + " = excluded." + c
	}
	return strings.Join(cols, ", ")
}

// findConversation is the conversation x continues: that of the newest
// exchange of its sandbox and run whose messages are the longest prefix of
// x's; else x's own id. (msg_hash != ” lets SQLite use the partial
// index: without it, each lookup scanned the table.)
func findConversation(ctx context.Context, q querier, x *store.LLMExchange) (string, error) {
	if len(x.PrefixHashes) == 0 {
		return x.ID, nil
	}
	args := []any{x.SandboxID, x.RunID}
	for _, h := range x.PrefixHashes {
		args = append(args, h)
	}
	args = append(args, x.ID)
	var conv string
	err := q.QueryRowContext(ctx, `SELECT conversation FROM llm_exchanges
		WHERE sandbox_id = ? AND run_id = ? AND msg_hash != '' AND msg_hash IN (?`+strings.Repeat(`,?`, len(x.PrefixHashes)-1)+`)
		AND id != ? AND conversation != ''
		ORDER BY msg_count DESC, created_at DESC LIMIT 1`, args...).Scan(&conv)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return x.ID, nil
	case err != nil:
		return "", err
	}
	return conv, nil
}

// LLMArchiveMark returns the mark PutLLMExchanges stored last, "" before
// the first.
func (s *Store) LLMArchiveMark(ctx context.Context) (string, error) {
	var mark string
	err := s.r.QueryRowContext(ctx, `SELECT mark FROM llm_archive WHERE id = 1`).Scan(&mark)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read LLM archive mark: %w", err)
	}
	return mark, nil
}

// GetLLMExchange returns the exchange id; ErrNotFound if there is none.
func (s *Store) GetLLMExchange(ctx context.Context, id string) (*store.LLMExchange, error) {
	return llmExchanges.get(ctx, s.r, id)
}

// ListLLMExchangePage returns the page p of the exchanges f selects,
// oldest first (or newest, p.Desc), and the next page's cursor (""
// after the last).
func (s *Store) ListLLMExchangePage(ctx context.Context, f store.LLMExchangeFilter, p store.Page) ([]*store.LLMExchange, string, error) {
	cond, order, args, err := pageClause(p)
	if err != nil {
		return nil, "", err
	}
	fc, fargs := llmFilter(f)
	out, err := list(ctx, s.r, scanLLMExchange,
		`SELECT `+llmExchanges.columns+` FROM llm_exchanges WHERE 1=1`+cond+fc+order, append(args, fargs...)...)
	if err != nil {
		return nil, "", fmt.Errorf("list LLM exchanges: %w", err)
	}
	out, next := cutPage(out, p, func(x *store.LLMExchange) (time.Time, string) { return x.CreatedAt, x.ID })
	return out, next, nil
}

// llmFilter returns the conditions (each beginning " AND ") that select
// what f does, and their arguments.
func llmFilter(f store.LLMExchangeFilter) (cond string, args []any) {
	eq := func(col, v string) {
		if v != "" {
			cond += ` AND ` + col + ` = ?`
			args = append(args, v)
		}
	}
	eq("sandbox_id", f.SandboxID)
	eq("run_id", f.RunID)
	eq("model", f.Model)
	eq("conversation", f.Conversation)
	eq("state", f.State)
	if f.StatusMin != 0 {
		cond += ` AND status >= ?`
		args = append(args, f.StatusMin)
	}
	if f.StatusMax != 0 {
		cond += ` AND status <= ?`
		args = append(args, f.StatusMax)
	}
	if !f.Since.IsZero() {
		cond += ` AND created_at >= ?`
		args = append(args, toUnix(f.Since))
	}
	if !f.Until.IsZero() {
		cond += ` AND created_at < ?`
		args = append(args, toUnix(f.Until))
	}
	if f.ByTenant {
		cond += ` AND tenant IN ('', ?)`
		args = append(args, f.Tenant)
	}
	return cond, args
}

// ListEndedLLMExchanges returns, in the order they ended, up to limit of
// the exchanges f selects whose Ended is above after: what a follower has
// not seen yet.
func (s *Store) ListEndedLLMExchanges(ctx context.Context, f store.LLMExchangeFilter, after int64, limit int) ([]*store.LLMExchange, error) {
	cond, args := llmFilter(f)
	out, err := list(ctx, s.r, scanLLMExchange,
		`SELECT `+llmExchanges.columns+` FROM llm_exchanges WHERE ended > ?`+cond+` ORDER BY ended LIMIT ?`,
		append(append([]any{after}, args...), limit)...)
	if err != nil {
		return nil, fmt.Errorf("list ended LLM exchanges: %w", err)
	}
	return out, nil
}

// LLMTokens implements store.LLMExchanges.
func (s *Store) LLMTokens(ctx context.Context, f store.LLMExchangeFilter) (int64, error) {
	cond, args := llmFilter(f)
	var n int64
	if err := s.r.QueryRowContext(ctx, `SELECT COALESCE(SUM(input_tokens + output_tokens), 0) FROM llm_exchanges WHERE 1=1`+cond,
		args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("sum LLM tokens: %w", err)
	}
	return n, nil
}

// LLMEndedMark returns the Ended of the exchange f selects that ended
// skip exchanges before the last one, 0 when there are no more than skip:
// where a follower that wants the last skip exchanges starts.
func (s *Store) LLMEndedMark(ctx context.Context, f store.LLMExchangeFilter, skip int) (int64, error) {
	cond, args := llmFilter(f)
	var mark int64
	// "ended > 0" matches the partial index llm_exchanges_ended, which
	// SQLite can read backwards instead of sorting the rows.
	err := s.r.QueryRowContext(ctx, `SELECT ended FROM llm_exchanges WHERE ended > 0`+cond+` ORDER BY ended DESC LIMIT 1 OFFSET ?`,
		append(args, skip)...).Scan(&mark)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("read the LLM archive's ended mark: %w", err)
	}
	return mark, nil
}

// DeleteLLMExchanges deletes the exchanges whose segment is below segment
// (the log's segments retention removed) and returns how many.
func (s *Store) DeleteLLMExchanges(ctx context.Context, segment int64) (int, error) {
	res, err := s.w.ExecContext(ctx, `DELETE FROM llm_exchanges WHERE segment < ?`, segment)
	if err != nil {
		return 0, fmt.Errorf("delete LLM exchanges before segment %d: %w", segment, err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}
