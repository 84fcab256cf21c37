package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

// AddEvent appends ev to its sandbox's history; an unknown sandbox is
// ErrNotFound (the foreign key refuses the row). It first locks the
// sandbox's row, as UpdateSandbox does, in a statement of its own and in
// the same round trip (a batch, one implicit transaction): the writes to
// one history go one at a time, and each one's trim, a statement begun
// once the lock is held, sees the events the others added. Without it two
// events added at once could each drop the same oldest event, leaving
// the history over store.MaxEvents, or deadlock with an update: its trim
// waiting on the rows the update's deleted, the update on the sandbox's
// row the event's foreign key locks.
func (s *Store) AddEvent(ctx context.Context, ev store.Event) error {
	var b pgx.Batch
	b.Queue(`SELECT FROM sandboxes WHERE id = $1 FOR NO KEY UPDATE`, ev.SandboxID)
	sql, args := addEventsSQL(ev.SandboxID, []store.Event{ev})
	b.Queue(sql, args...)
	return addEventsErr(ev.SandboxID, s.w.SendBatch(ctx, &b).Close())
}

// addEvents appends evs to the history of sandbox id, in a transaction
// that holds the sandbox's row locked (UpdateSandbox) or made it
// (CreateSandbox): no other write to that history comes between its
// statements. See addEventsSQL.
func addEvents(ctx context.Context, q querier, id string, evs []store.Event) error {
	if len(evs) == 0 {
		return nil
	}
	sql, args := addEventsSQL(id, evs)
	_, err := q.Exec(ctx, sql, args...)
	return addEventsErr(id, err)
}

// addEventsSQL is the statement that appends evs (one at least) to the
// history of sandbox id, whatever their own SandboxID, drops its events
// older than the newest store.MaxEvents and adds their number to its
// event_drops row. Its parts see the table as it was before it, the new
// events not yet in it, so the delete keeps MaxEvents-len(evs) of the
// older ones; of a write of more than MaxEvents events, only the newest
// MaxEvents are stored and the rest counted as dropped. The history is
// found newest first by the index events_sandbox (sandbox_id, seq): the
// check reads as many entries of the index as the history has, MaxEvents
// at most, and deletes nothing until the history is full. It is exact
// only when no other write to the history runs at once (the row lock of
// the sandbox, taken by an earlier statement).
func addEventsSQL(id string, evs []store.Event) (string, []any) {
	skipped := max(len(evs)-store.MaxEvents, 0)
	evs = evs[skipped:]
	var (
		sql  strings.Builder
		args = []any{id, store.MaxEvents - len(evs), skipped}
	)
	sql.WriteString(`WITH added AS (INSERT INTO events (sandbox_id, at, status, message) VALUES `)
	for i, ev := range evs {
		if i > 0 {
			sql.WriteString(", ")
		}
		n := len(args)
		fmt.Fprintf(&sql, "($1, $%d, $%d, $%d)", n+1, n+2, n+3)
		args = append(args, ev.At, ev.Status, ev.Message)
	}
	sql.WriteString(`), gone AS (
		DELETE FROM events WHERE sandbox_id = $1 AND seq <= (
			SELECT seq FROM events WHERE sandbox_id = $1 ORDER BY seq DESC OFFSET $2 LIMIT 1)
		RETURNING 1)
	INSERT INTO event_drops (sandbox_id, dropped)
		SELECT $1, count(*) + $3 FROM gone HAVING count(*) + $3 > 0
	ON CONFLICT (sandbox_id) DO UPDATE SET dropped = event_drops.dropped + excluded.dropped`)
	return sql.String(), args
}

// addEventsErr is the error of a write of events to sandbox id.
func addEventsErr(id string, err error) error {
	switch {
	case err == nil:
		return nil
	case isForeignKey(err):
		return errdefs.NotFound("sandbox %s not found", id)
	}
	return fmt.Errorf("add event to sandbox %s: %w", id, serverErr(err))
}

// Events returns the history of sandbox sandboxID in the order it was
// added (seq, by the index events_sandbox), and how many older events it
// dropped, read in the same statement.
func (s *Store) Events(ctx context.Context, sandboxID string) ([]store.Event, int, error) {
	if !validText(sandboxID) {
		return []store.Event{}, 0, nil
	}
	rows, err := s.r.Query(ctx, `SELECT at, status, message,
		coalesce((SELECT dropped FROM event_drops WHERE sandbox_id = $1), 0)
		FROM events WHERE sandbox_id = $1 ORDER BY seq`, sandboxID)
	if err != nil {
		return nil, 0, fmt.Errorf("list events of sandbox %s: %w", sandboxID, err)
	}
	defer rows.Close()
	out, dropped, err := store.ReadEvents(rows, sandboxID, time.Time.UTC)
	if err != nil {
		return nil, 0, fmt.Errorf("list events of sandbox %s: %w", sandboxID, err)
	}
	return out, dropped, nil
}
