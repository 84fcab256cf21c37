package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

const prepullColumns = `id, image, template, status, ready, total, error, started_at, completed_at`

func (s *Store) CreatePrepull(ctx context.Context, p *store.Prepull) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO prepull_tasks (`+prepullColumns+`) VALUES (?,?,?,?,?,?,?,?,?)`,
		p.ID, p.Image, p.Template, p.Status, p.Ready, p.Total, p.Error, toUnix(p.StartedAt), toNullUnix(p.CompletedAt))
	if err != nil {
		if strings.Contains(err.Error(), "UNIQUE constraint") {
			return errdefs.Conflict("prepull task %s already exists", p.ID)
		}
		return fmt.Errorf("insert prepull task %s: %w", p.ID, err)
	}
	return nil
}

func scanPrepull(row scanner) (*store.Prepull, error) {
	var (
		p         store.Prepull
		started   int64
		completed sql.NullInt64
	)
	if err := row.Scan(&p.ID, &p.Image, &p.Template, &p.Status, &p.Ready, &p.Total, &p.Error, &started, &completed); err != nil {
		return nil, err
	}
	p.StartedAt = fromUnix(started)
	if completed.Valid {
		t := fromUnix(completed.Int64)
		p.CompletedAt = &t
	}
	return &p, nil
}

func (s *Store) GetPrepull(ctx context.Context, id string) (*store.Prepull, error) {
	p, err := scanPrepull(s.db.QueryRowContext(ctx, `SELECT `+prepullColumns+` FROM prepull_tasks WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errdefs.NotFound("prepull task %s not found", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get prepull task %s: %w", id, err)
	}
	return p, nil
}

func (s *Store) ListPrepulls(ctx context.Context, f store.PrepullFilter) ([]*store.Prepull, error) {
	q := `SELECT ` + prepullColumns + ` FROM prepull_tasks WHERE 1=1`
	var args []any
	if f.Image != "" {
		q += ` AND image = ?`
		args = append(args, f.Image)
	}
	if f.Status != "" {
		q += ` AND status = ?`
		args = append(args, f.Status)
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY started_at DESC, id DESC`, args...)
	if err != nil {
		return nil, fmt.Errorf("list prepull tasks: %w", err)
	}
	defer rows.Close()
	out := []*store.Prepull{}
	for rows.Next() {
		p, err := scanPrepull(rows)
		if err != nil {
			return nil, fmt.Errorf("list prepull tasks: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

func (s *Store) UpdatePrepull(ctx context.Context, id string, fn func(*store.Prepull) error) (*store.Prepull, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("update prepull task %s: %w", id, err)
	}
	defer tx.Rollback()
	p, err := scanPrepull(tx.QueryRowContext(ctx, `SELECT `+prepullColumns+` FROM prepull_tasks WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errdefs.NotFound("prepull task %s not found", id)
	}
	if err != nil {
		return nil, fmt.Errorf("update prepull task %s: %w", id, err)
	}
	if err := fn(p); err != nil {
		return nil, err
	}
	p.ID = id
	_, err = tx.ExecContext(ctx, `UPDATE prepull_tasks SET image=?, template=?, status=?, ready=?, total=?, error=?, started_at=?, completed_at=? WHERE id=?`,
		p.Image, p.Template, p.Status, p.Ready, p.Total, p.Error, toUnix(p.StartedAt), toNullUnix(p.CompletedAt), id)
	if err != nil {
		return nil, fmt.Errorf("update prepull task %s: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("update prepull task %s: %w", id, err)
	}
	return p, nil
}

func (s *Store) DeletePrepull(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM prepull_tasks WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("delete prepull task %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errdefs.NotFound("prepull task %s not found", id)
	}
	return nil
}
