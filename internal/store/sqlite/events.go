package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

// AddEvent appends ev to its sandbox's history; an unknown sandbox is
// ErrNotFound (the foreign key refuses the row).
func (s *Store) AddEvent(ctx context.Context, ev store.Event) error {
	return s.b.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return addEvents(ctx, tx, ev.SandboxID, []store.Event{ev})
	})
}

// addEvents appends evs to the history of sandbox id, whatever their own
// SandboxID, then drops its events older than the newest store.MaxEvents
// and adds their number to its event_drops row. The history is found
// newest first by the index events_sandbox (sandbox_id, seq): the check
// reads as many entries of the index as the history has, MaxEvents at
// most (some 0.15 ms then, beside a change of status that took the
// runtime milliseconds), and deletes nothing until the history is full.
func addEvents(ctx context.Context, q querier, id string, evs []store.Event) error {
	if len(evs) == 0 {
		return nil
	}
	for _, ev := range evs {
		_, err := q.ExecContext(ctx, `INSERT INTO events (sandbox_id, at, status, message) VALUES (?,?,?,?)`,
			id, toUnix(ev.At), ev.Status, ev.Message)
		switch {
		case err == nil:
		case isForeignKey(err):
			return errdefs.NotFound("sandbox %s not found", id)
		default:
			return fmt.Errorf("add event to sandbox %s: %w", id, err)
		}
	}
	res, err := q.ExecContext(ctx, `DELETE FROM events WHERE sandbox_id = ? AND seq <= (
		SELECT seq FROM events WHERE sandbox_id = ? ORDER BY seq DESC LIMIT 1 OFFSET ?)`, id, id, store.MaxEvents)
	if err != nil {
		return fmt.Errorf("drop old events of sandbox %s: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("drop old events of sandbox %s: %w", id, err)
	}
	if n == 0 {
		return nil
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO event_drops (sandbox_id, dropped) VALUES (?, ?)
		ON CONFLICT (sandbox_id) DO UPDATE SET dropped = dropped + excluded.dropped`, id, n); err != nil {
		return fmt.Errorf("count dropped events of sandbox %s: %w", id, err)
	}
	return nil
}

// Events returns the history of sandbox sandboxID in the order it was
// added (seq, which the index events_sandbox keeps in order), and how
// many older events it dropped, read in the same statement.
func (s *Store) Events(ctx context.Context, sandboxID string) ([]store.Event, int, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT at, status, message,
		coalesce((SELECT dropped FROM event_drops WHERE sandbox_id = ?), 0)
		FROM events WHERE sandbox_id = ? ORDER BY seq`, sandboxID, sandboxID)
	if err != nil {
		return nil, 0, fmt.Errorf("list events of sandbox %s: %w", sandboxID, err)
	}
	defer rows.Close()
	out, dropped, err := store.ReadEvents(rows, sandboxID, fromUnix)
	if err != nil {
		return nil, 0, fmt.Errorf("list events of sandbox %s: %w", sandboxID, err)
	}
	return out, dropped, nil
}
