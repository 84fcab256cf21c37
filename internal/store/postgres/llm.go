package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

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
			x.ReasoningTokens, x.Attempts, x.FirstByte.Microseconds(), x.Duration.Microseconds(), x.CreatedAt,
			x.RequestBytes, x.ResponseBytes, x.StoredBytes, x.Segment, x.Locations, x.MsgCount, x.MsgHash, x.Conversation, x.Tenant, x.Ended}, nil
	},
	normalize: func(x *store.LLMExchange) {
		x.CreatedAt = micro(x.CreatedAt)
		x.FirstByte, x.Duration = x.FirstByte.Truncate(time.Microsecond), x.Duration.Truncate(time.Microsecond)
	},
	setKey: func(x *store.LLMExchange, id string) { x.ID = id },
})

func scanLLMExchange(row scanner) (*store.LLMExchange, error) {
	var (
		x          store.LLMExchange
		first, dur int64
	)
	if err := row.Scan(&x.ID, &x.SandboxID, &x.RunID, &x.KeyID, &x.Inbound, &x.Method, &x.Path, &x.Model, &x.Provider,
		&x.UpstreamModel, &x.Stream, &x.Passthrough, &x.Status, &x.State, &x.Error, &x.InputTokens, &x.OutputTokens,
		&x.CachedTokens, &x.ReasoningTokens, &x.Attempts, &first, &dur, &x.CreatedAt, &x.RequestBytes, &x.ResponseBytes,
		&x.StoredBytes, &x.Segment, &x.Locations, &x.MsgCount, &x.MsgHash, &x.Conversation, &x.Tenant, &x.Ended); err != nil {
		return nil, err
	}
	x.FirstByte, x.Duration = durationOf(first), durationOf(dur)
	x.CreatedAt = x.CreatedAt.UTC()
	return &x, nil
}

// upsertExchange stores an exchange over the record of the same id. An
// exchange's ended, once set, stays: a follower has seen it.
var upsertExchange = func() string {
	cols := strings.Split(llmExchanges.columns, ", ")[1:]
	sets := make([]string, len(cols))
	for i, c := range cols {
		sets[i] = c + " = excluded." + c
		if c == "ended" {
			sets[i] = "ended = CASE WHEN llm_exchanges.ended > 0 THEN llm_exchanges.ended ELSE excluded.ended END"
		}
	}
	return llmExchanges.insertSQL + ` ON CONFLICT (id) DO UPDATE SET ` + strings.Join(sets, ", ")
}()

// PutLLMExchanges stores xs, replacing the records of the same ids, and
// the archive's mark, in one transaction: the index and the point of the
// log it reached never disagree. Each exchange that has ended gets the
// next Ended number and joins its conversation (findConversation). The
// numbering holds the lock lockLLMEnded until the transaction commits, so
// numbers are committed in the order they are given, by any daemon: a
// follower that has read up to n never finds a smaller one after.
func (s *Store) PutLLMExchanges(ctx context.Context, xs []*store.LLMExchange, mark string) error {
	err := pgx.BeginFunc(ctx, s.w, func(tx pgx.Tx) error {
		if err := lock(ctx, tx, lockLLMEnded); err != nil {
			return err
		}
		// "ended > 0" lets the server take MAX from the end of the partial
		// index llm_exchanges_ended.
		var ended int64
		if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(ended), 0) FROM llm_exchanges WHERE ended > 0`).Scan(&ended); err != nil {
			return err
		}
		for _, x := range xs {
			x.Ended = 0
			if x.State != store.LLMInProgress {
				ended++
				x.Ended = ended
			}
			if x.Conversation == "" && x.MsgHash != "" {
				var err error
				if x.Conversation, err = findConversation(ctx, tx, x); err != nil {
					return fmt.Errorf("exchange %s: %w", x.ID, err)
				}
			}
			llmExchanges.normalize(x)
			args, _ := llmExchanges.values(x)
			if _, err := tx.Exec(ctx, upsertExchange, args...); err != nil {
				return fmt.Errorf("exchange %s: %w", x.ID, err)
			}
		}
		_, err := tx.Exec(ctx, `INSERT INTO llm_archive (id, mark) VALUES (1, $1) ON CONFLICT (id) DO UPDATE SET mark = excluded.mark`, mark)
		return err
	})
	if err != nil {
		return fmt.Errorf("index LLM exchanges: %w", serverErr(err))
	}
	return nil
}

// findConversation is the conversation x continues: that of the newest
// exchange of its sandbox and run whose messages are the longest prefix of
// x's; else x's own id. The query asks for a msg_hash not empty, which
// lets the server use the partial index llm_exchanges_hash.
func findConversation(ctx context.Context, q querier, x *store.LLMExchange) (string, error) {
	if len(x.PrefixHashes) == 0 {
		return x.ID, nil
	}
	var conv string
	err := q.QueryRow(ctx, `SELECT conversation FROM llm_exchanges
		WHERE sandbox_id = $1 AND run_id = $2 AND msg_hash <> '' AND msg_hash = ANY($3)
		AND id <> $4 AND conversation <> ''
		ORDER BY msg_count DESC, created_at DESC LIMIT 1`, x.SandboxID, x.RunID, x.PrefixHashes, x.ID).Scan(&conv)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
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
	err := s.r.QueryRow(ctx, `SELECT mark FROM llm_archive WHERE id = 1`).Scan(&mark)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("read LLM archive mark: %w", err)
	}
	return mark, nil
}

// GetLLMExchange returns the exchange id; ErrNotFound if there is none.
func (s *Store) GetLLMExchange(ctx context.Context, id string) (*store.LLMExchange, error) {
	return llmExchanges.get(ctx, s.r, id, "")
}

// ListLLMExchangePage returns the page p of the exchanges f selects,
// oldest first (or newest, p.Desc), and the next page's cursor (""
// after the last).
func (s *Store) ListLLMExchangePage(ctx context.Context, f store.LLMExchangeFilter, p store.Page) ([]*store.LLMExchange, string, error) {
	var a args
	cond, order, err := pageClause(p, &a)
	if err != nil {
		return nil, "", err
	}
	fc := llmFilter(f, &a)
	out, err := list(ctx, s.r, scanLLMExchange,
		`SELECT `+llmExchanges.columns+` FROM llm_exchanges WHERE true`+cond+fc+order, a...)
	if err != nil {
		return nil, "", fmt.Errorf("list LLM exchanges: %w", err)
	}
	out, next := cutPage(out, p, func(x *store.LLMExchange) (time.Time, string) { return x.CreatedAt, x.ID })
	return out, next, nil
}

// llmFilter returns the conditions (each beginning " AND ") that select
// what f does, their arguments added to a.
func llmFilter(f store.LLMExchangeFilter, a *args) string {
	var cond string
	eq := func(col, v string) {
		if v != "" {
			cond += ` AND ` + col + ` = ` + a.add(v)
		}
	}
	eq("sandbox_id", f.SandboxID)
	eq("run_id", f.RunID)
	eq("model", f.Model)
	eq("conversation", f.Conversation)
	eq("state", f.State)
	if f.StatusMin != 0 {
		cond += ` AND status >= ` + a.add(f.StatusMin)
	}
	if f.StatusMax != 0 {
		cond += ` AND status <= ` + a.add(f.StatusMax)
	}
	if !f.Since.IsZero() {
		cond += ` AND created_at >= ` + a.add(f.Since)
	}
	if !f.Until.IsZero() {
		cond += ` AND created_at < ` + a.add(f.Until)
	}
	if f.ByTenant {
		cond += ` AND tenant IN ('', ` + a.add(f.Tenant) + `)`
	}
	return cond
}

// ListEndedLLMExchanges returns, in the order they ended, up to limit of
// the exchanges f selects whose Ended is above after: what a follower has
// not seen yet.
func (s *Store) ListEndedLLMExchanges(ctx context.Context, f store.LLMExchangeFilter, after int64, limit int) ([]*store.LLMExchange, error) {
	a := args{after}
	cond := llmFilter(f, &a)
	query := `SELECT ` + llmExchanges.columns + ` FROM llm_exchanges WHERE ended > $1` + cond + ` ORDER BY ended LIMIT ` + a.add(limit)
	out, err := list(ctx, s.r, scanLLMExchange, query, a...)
	if err != nil {
		return nil, fmt.Errorf("list ended LLM exchanges: %w", err)
	}
	return out, nil
}

// LLMTokens implements store.LLMExchanges.
func (s *Store) LLMTokens(ctx context.Context, f store.LLMExchangeFilter) (int64, error) {
	var a args
	cond := llmFilter(f, &a)
	var n int64
	if err := s.r.QueryRow(ctx, `SELECT COALESCE(SUM(input_tokens + output_tokens), 0)::bigint FROM llm_exchanges WHERE true`+cond,
		a...).Scan(&n); err != nil {
		return 0, fmt.Errorf("sum LLM tokens: %w", err)
	}
	return n, nil
}

// LLMEndedMark returns the Ended of the exchange f selects that ended
// skip exchanges before the last one, 0 when there are no more than skip:
// where a follower that wants the last skip exchanges starts.
func (s *Store) LLMEndedMark(ctx context.Context, f store.LLMExchangeFilter, skip int) (int64, error) {
	var a args
	cond := llmFilter(f, &a)
	var mark int64
	// "ended > 0" matches the partial index llm_exchanges_ended, which
	// the server reads backwards instead of sorting the rows.
	query := `SELECT ended FROM llm_exchanges WHERE ended > 0` + cond + ` ORDER BY ended DESC LIMIT 1 OFFSET ` + a.add(skip)
	err := s.r.QueryRow(ctx, query, a...).Scan(&mark)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("read the LLM archive's ended mark: %w", err)
	}
	return mark, nil
}

// DeleteLLMExchanges deletes the exchanges whose segment is below segment
// (the log's segments retention removed) and returns how many.
func (s *Store) DeleteLLMExchanges(ctx context.Context, segment int64) (int, error) {
	tag, err := s.w.Exec(ctx, `DELETE FROM llm_exchanges WHERE segment < $1`, segment)
	if err != nil {
		return 0, fmt.Errorf("delete LLM exchanges before segment %d: %w", segment, err)
	}
	return int(tag.RowsAffected()), nil
}
