package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

// querier is what *sql.DB and *sql.Tx have in common.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

type scanner interface{ Scan(...any) error }

// table is how records of type T are kept in one table keyed by an id
// column: the one place their rows are read, inserted, updated and
// deleted.
type table[T any] struct {
	kind string // what a record is called in messages: "sandbox"
	name string
	// columns are the table's columns, the id first; scan reads them in
	// this order and values returns them in this order.
	columns string
	scan    func(scanner) (*T, error)
	values  func(*T) ([]any, error)
	// normalize, when set, rounds a record to what the table keeps before
	// it is written, so that what a write returns equals later reads.
	normalize func(*T)
	setID     func(*T, string)

	selectByID, insertSQL, updateSQL string
}

// newTable completes t's statements from its columns.
func newTable[T any](t table[T]) *table[T] {
	cols := strings.Split(t.columns, ", ")
	t.selectByID = `SELECT ` + t.columns + ` FROM ` + t.name + ` WHERE ` + cols[0] + ` = ?`
	t.insertSQL = `INSERT INTO ` + t.name + ` (` + t.columns + `) VALUES (?` + strings.Repeat(`,?`, len(cols)-1) + `)`
	t.updateSQL = `UPDATE ` + t.name + ` SET ` + strings.Join(cols[1:], `=?, `) + `=? WHERE ` + cols[0] + ` = ?`
	return &t
}

// insert writes v as a new row and returns the driver's error as is, for
// the caller to classify.
func (t *table[T]) insert(ctx context.Context, q querier, v *T) error {
	if t.normalize != nil {
		t.normalize(v)
	}
	args, err := t.values(v)
	if err != nil {
		return err
	}
	_, err = q.ExecContext(ctx, t.insertSQL, args...)
	return noSpace(err)
}

// get reads the record id; ErrNotFound if there is none.
func (t *table[T]) get(ctx context.Context, q querier, id string) (*T, error) {
	v, err := t.scan(q.QueryRowContext(ctx, t.selectByID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errdefs.NotFound("%s %s not found", t.kind, id)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s %s: %w", t.kind, id, err)
	}
	return v, nil
}

// update applies fn to the record id in one write transaction and stores
// the result under the same id; fn's error aborts and is returned as is.
func (t *table[T]) update(ctx context.Context, db *sql.DB, id string, fn func(*T) error) (*T, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("update %s %s: %w", t.kind, id, err)
	}
	defer tx.Rollback()
	v, err := t.updateIn(ctx, tx, id, fn)
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("update %s %s: %w", t.kind, id, noSpace(err))
	}
	return v, nil
}

// updateIn is update's read, fn and write inside tx, which the caller
// commits.
func (t *table[T]) updateIn(ctx context.Context, tx querier, id string, fn func(*T) error) (*T, error) {
	v, err := t.get(ctx, tx, id)
	if err != nil {
		return nil, err
	}
	if err := fn(v); err != nil {
		return nil, err
	}
	t.setID(v, id) // the id is the key, not fn's to change
	if t.normalize != nil {
		t.normalize(v)
	}
	args, err := t.values(v)
	if err == nil {
		_, err = tx.ExecContext(ctx, t.updateSQL, append(args[1:], id)...)
	}
	if err != nil {
		return nil, fmt.Errorf("update %s %s: %w", t.kind, id, noSpace(err))
	}
	return v, nil
}

// remove deletes the record id; ErrNotFound if there is none.
func (t *table[T]) remove(ctx context.Context, q querier, id string) error {
	return deleteWhere(ctx, q, t.kind, t.name, strings.Split(t.columns, ", ")[0], id)
}

// deleteWhere deletes the rows of table whose column key is value, and
// says the kind of record named value is not found when there are none.
func deleteWhere(ctx context.Context, q querier, kind, table, key, value string) error {
	res, err := q.ExecContext(ctx, `DELETE FROM `+table+` WHERE `+key+` = ?`, value)
	if err != nil {
		return fmt.Errorf("delete %s %s: %w", kind, value, noSpace(err))
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("delete %s %s: %w", kind, value, err)
	} else if n == 0 {
		return errdefs.NotFound("%s %s not found", kind, value)
	}
	return nil
}

// list reads every row query returns, with scan.
func list[T any](ctx context.Context, q querier, scan func(scanner) (*T, error), query string, args ...any) ([]*T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// pageClause returns the condition and the ORDER BY and LIMIT that select
// page p of a listing ordered by created_at, id (descending with p.Desc),
// and the arguments of the condition. It asks for one row beyond the page,
// which tells whether another page follows.
func pageClause(p store.Page) (cond, order string, args []any, err error) {
	return pageClauseBy(p, "id")
}

// pageClauseBy is pageClause of a listing whose ties of created_at go by
// the column tie (the table's key) rather than id.
func pageClauseBy(p store.Page, tie string) (cond, order string, args []any, err error) {
	cmp, order := ">", ` ORDER BY created_at, `+tie
	if p.Desc {
		cmp, order = "<", ` ORDER BY created_at DESC, `+tie+` DESC`
	}
	if p.After != "" {
		at, id, err := store.ParseCursor(p.After)
		if err != nil {
			return "", "", nil, err
		}
		// A row value comparison: with an index on (created_at, id), or on
		// (filter column, created_at, id), SQLite seeks to the cursor (read
		// backwards for newest first) rather than skipping rows as an
		// OFFSET would, so a page costs the same wherever it is, and a row
		// added or deleted before the cursor moves nothing after it.
		cond = ` AND (created_at, ` + tie + `) ` + cmp + ` (?, ?)`
		args = append(args, toUnix(at), id)
	}
	if p.Limit > 0 {
		order += fmt.Sprintf(` LIMIT %d`, p.Limit+1)
	}
	return cond, order, args, nil
}

// columnIn is the condition (" AND …") that a row's column is one of
// values, which must not be empty, and its arguments.
func columnIn(column string, values []string) (string, []any) {
	args := make([]any, len(values))
	for i, v := range values {
		args[i] = v
	}
	return ` AND ` + column + ` IN (?` + strings.Repeat(`,?`, len(values)-1) + `)`, args
}

// cutPage trims the row pageClause asked for beyond the page and returns
// the cursor of the next page, if one follows.
func cutPage[T any](items []*T, p store.Page, key func(*T) (time.Time, string)) ([]*T, string) {
	if p.Limit <= 0 || len(items) <= p.Limit {
		return items, ""
	}
	items = items[:p.Limit]
	return items, store.Cursor(key(items[len(items)-1]))
}

// Times are stored as Unix microseconds, in UTC.
func toUnix(t time.Time) int64 { return t.UnixMicro() }

func fromUnix(us int64) time.Time { return time.UnixMicro(us).UTC() }

func toNullUnix(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMicro()
}

// isUnique and isForeignKey classify an insert's constraint failures by
// SQLite's message ("UNIQUE constraint failed: …"), so that the package
// needs nothing of the driver but its registration.
func isUnique(err error) bool {
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint")
}

func isForeignKey(err error) bool {
	return err != nil && strings.Contains(err.Error(), "FOREIGN KEY")
}

// noSpace makes SQLite's SQLITE_FULL, by its message as isUnique does (the
// file system of the database or its WAL is full, or the database reached
// max_page_count), an errdefs.NoSpace: 507, not the daemon's own failure.
// Other errors, nil included, are returned as they are.
func noSpace(err error) error {
	if err != nil && strings.Contains(err.Error(), "database or disk is full") {
		return errdefs.NoSpace(err)
	}
	return err
}
