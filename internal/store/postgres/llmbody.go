package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

var _ store.LLMBodies = (*Store)(nil)

// PutLLMBody stores the records of exchange id (llm_bodies).
func (s *Store) PutLLMBody(ctx context.Context, id string, created time.Time, records []byte) error {
	_, err := s.w.Exec(ctx, `INSERT INTO llm_bodies (id, created_at, size, records) VALUES ($1, $2, $3, $4)
		ON CONFLICT (id) DO UPDATE SET created_at = excluded.created_at, stored_at = now(), size = excluded.size,
		records = excluded.records`, id, micro(created), len(records), records)
	if err != nil {
		return fmt.Errorf("store LLM exchange %s's records: %w", id, serverErr(err))
	}
	return nil
}

// LLMBody returns the records of exchange id; ErrNotFound if there are
// none.
func (s *Store) LLMBody(ctx context.Context, id string) ([]byte, error) {
	var b []byte
	err := s.r.QueryRow(ctx, `SELECT records FROM llm_bodies WHERE id = $1`, id).Scan(&b)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, errdefs.NotFound("LLM exchange %s has no records stored", id)
	case err != nil:
		return nil, fmt.Errorf("read LLM exchange %s's records: %w", id, err)
	}
	return b, nil
}

// UnindexedLLMBodies returns up to limit records stored more than age ago
// (by the server's clock) whose exchange is missing from llm_exchanges or
// in progress there.
func (s *Store) UnindexedLLMBodies(ctx context.Context, age time.Duration, limit int) (map[string][]byte, error) {
	rows, err := s.r.Query(ctx, `SELECT b.id, b.records FROM llm_bodies b LEFT JOIN llm_exchanges x ON x.id = b.id
		WHERE b.stored_at < now() - make_interval(secs => $1) AND (x.id IS NULL OR x.state = $2)
		ORDER BY b.stored_at LIMIT $3`, age.Seconds(), store.LLMInProgress, limit)
	if err != nil {
		return nil, fmt.Errorf("list unindexed LLM exchanges: %w", err)
	}
	defer rows.Close()
	out := map[string][]byte{}
	for rows.Next() {
		var id string
		var b []byte
		if err := rows.Scan(&id, &b); err != nil {
			return nil, fmt.Errorf("list unindexed LLM exchanges: %w", err)
		}
		out[id] = b
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list unindexed LLM exchanges: %w", err)
	}
	return out, nil
}

// DeleteLLMArchived deletes, in one transaction, the exchanges and
// records created before before, then the oldest records (and their
// exchanges) while those left total more than maxSize.
func (s *Store) DeleteLLMArchived(ctx context.Context, before time.Time, maxSize int64) (int, error) {
	var n int
	err := pgx.BeginFunc(ctx, s.w, func(tx pgx.Tx) error {
		n = 0
		if !before.IsZero() {
			tag, err := tx.Exec(ctx, `DELETE FROM llm_exchanges WHERE created_at < $1`, before)
			if err != nil {
				return err
			}
			n += int(tag.RowsAffected())
			if _, err := tx.Exec(ctx, `DELETE FROM llm_bodies WHERE created_at < $1`, before); err != nil {
				return err
			}
		}
		if maxSize <= 0 {
			return nil
		}
		// Newest first, the records past maxSize in all go.
		rows, err := tx.Query(ctx, `DELETE FROM llm_bodies WHERE id IN (
			SELECT id FROM (SELECT id, SUM(size) OVER (ORDER BY created_at DESC, id DESC) AS total FROM llm_bodies) t
			WHERE total > $1) RETURNING id`, maxSize)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || len(ids) == 0 {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM llm_exchanges WHERE id = ANY($1)`, ids)
		n += int(tag.RowsAffected())
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("delete archived LLM exchanges: %w", err)
	}
	return n, nil
}
