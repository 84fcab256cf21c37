package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// table is how records of type T are kept in one table keyed by its first
// column: the one place their rows are read, inserted, updated and
// deleted.
type table[T any] struct {
	kind string // what a record is called in messages: "sandbox"
	name string
	// columns are the table's columns, the key first; scan reads them in
	// this order and values returns them in this order.
	columns string
	scan    func(scanner) (*T, error)
	values  func(*T) ([]any, error)
	// normalize, when set, rounds a record to what the table keeps before
	// it is written, so that what a write returns equals later reads.
	normalize func(*T)
	setKey    func(*T, string)

	key, selectByKey, insertSQL, updateSQL string
}

// newTable completes t's statements from its columns.
func newTable[T any](t table[T]) *table[T] {
	cols := strings.Split(t.columns, ", ")
	t.key = cols[0]
	t.selectByKey = `SELECT ` + t.columns + ` FROM ` + t.name + ` WHERE ` + t.key + ` = $1`
	marks := make([]string, len(cols))
	sets := make([]string, len(cols)-1)
	for i := range cols {
		marks[i] = "$" + strconv.Itoa(i+1)
		if i > 0 {
			sets[i-1] = cols[i] + " = $" + strconv.Itoa(i+1)
		}
	}
	t.insertSQL = `INSERT INTO ` + t.name + ` (` + t.columns + `) VALUES (` + strings.Join(marks, ", ") + `)`
	t.updateSQL = `UPDATE ` + t.name + ` SET ` + strings.Join(sets, ", ") + ` WHERE ` + t.key + ` = $1`
	return &t
}

// insert writes v as a new row and returns the server's error as is, for
// the caller to classify.
func (t *table[T]) insert(ctx context.Context, q querier, v *T) error {
	if t.normalize != nil {
		t.normalize(v)
	}
	args, err := t.values(v)
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, t.insertSQL, args...)
	return serverErr(err)
}

// get reads the record key; ErrNotFound if there is none. suffix ends the
// query (" FOR UPDATE").
func (t *table[T]) get(ctx context.Context, q querier, key, suffix string) (*T, error) {
	if !validText(key) {
		return nil, errdefs.NotFound("%s %q not found", t.kind, key)
	}
	v, err := t.scan(q.QueryRow(ctx, t.selectByKey+suffix, key))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, errdefs.NotFound("%s %s not found", t.kind, key)
	case err != nil:
		return nil, fmt.Errorf("get %s %s: %w", t.kind, key, err)
	}
	return v, nil
}

// update applies fn to the record key and stores the result under the
// same key, in one transaction that holds the row's lock from the read to
// the write: concurrent updates, from any connection or daemon, take
// turns and none is lost. fn's error aborts and is returned as is.
func (t *table[T]) update(ctx context.Context, db *pgxpool.Pool, key string, fn func(*T) error) (*T, error) {
	var out *T
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		v, err := t.updateIn(ctx, tx, key, fn)
		out = v
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// updateIn is update's locked read, fn and write inside tx, which the
// caller commits.
func (t *table[T]) updateIn(ctx context.Context, tx pgx.Tx, key string, fn func(*T) error) (*T, error) {
	v, err := t.get(ctx, tx, key, ` FOR UPDATE`)
	if err != nil {
		return nil, err
	}
	if err := fn(v); err != nil {
		return nil, err
	}
	t.setKey(v, key) // the key is the record's, not fn's to change
	if t.normalize != nil {
		t.normalize(v)
	}
	args, err := t.values(v)
	if err != nil {
		return nil, fmt.Errorf("update %s %s: %w", t.kind, key, err)
	}
	if _, err := tx.Exec(ctx, t.updateSQL, args...); err != nil {
		return nil, fmt.Errorf("update %s %s: %w", t.kind, key, serverErr(err))
	}
	return v, nil
}

// remove deletes the record key; ErrNotFound if there is none.
func (t *table[T]) remove(ctx context.Context, q querier, key string) error {
	return deleteWhere(ctx, q, t.kind, t.name, t.key, key)
}

// deleteWhere deletes the rows of table whose column col is value, and
// says the kind of record named value is not found when there are none.
func deleteWhere(ctx context.Context, q querier, kind, table, col, value string) error {
	if !validText(value) {
		return errdefs.NotFound("%s %q not found", kind, value)
	}
	tag, err := q.Exec(ctx, `DELETE FROM `+table+` WHERE `+col+` = $1`, value)
	if err != nil {
		return fmt.Errorf("delete %s %s: %w", kind, value, err)
	}
	if tag.RowsAffected() == 0 {
		return errdefs.NotFound("%s %s not found", kind, value)
	}
	return nil
}
