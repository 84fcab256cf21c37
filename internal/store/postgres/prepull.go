package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

var prepulls = newTable(table[store.Prepull]{
	kind: "prepull task", name: "prepull_tasks",
	columns: `id, image, template, status, ready, total, error, started_at, completed_at`,
	scan:    scanPrepull,
	values: func(p *store.Prepull) ([]any, error) {
		return []any{p.ID, p.Image, p.Template, p.Status, p.Ready, p.Total, p.Error, p.StartedAt, p.CompletedAt}, nil
	},
	setKey: func(p *store.Prepull, id string) { p.ID = id },
})

func scanPrepull(row scanner) (*store.Prepull, error) {
	var (
		p         store.Prepull
		completed *time.Time
	)
	if err := row.Scan(&p.ID, &p.Image, &p.Template, &p.Status, &p.Ready, &p.Total, &p.Error, &p.StartedAt, &completed); err != nil {
		return nil, err
	}
	p.StartedAt, p.CompletedAt = p.StartedAt.UTC(), utcPtr(completed)
	return &p, nil
}

// CreatePrepull stores p; a taken id is ErrConflict.
func (s *Store) CreatePrepull(ctx context.Context, p *store.Prepull) error {
	err := prepulls.insert(ctx, s.w, p)
	switch {
	case err == nil:
		return nil
	case isUnique(err):
		return errdefs.Conflict("prepull task %s already exists", p.ID)
	}
	return fmt.Errorf("insert prepull task %s: %w", p.ID, err)
}

// GetPrepull returns the prepull task id; ErrNotFound if there is none.
func (s *Store) GetPrepull(ctx context.Context, id string) (*store.Prepull, error) {
	return prepulls.get(ctx, s.r, id, "")
}

// ListPrepulls returns the tasks f selects, newest first.
func (s *Store) ListPrepulls(ctx context.Context, f store.PrepullFilter) ([]*store.Prepull, error) {
	var a args
	cond := ""
	if f.Image != "" {
		cond += ` AND image = ` + a.add(f.Image)
	}
	if f.Status != "" {
		cond += ` AND status = ` + a.add(f.Status)
	}
	out, err := list(ctx, s.r, scanPrepull,
		`SELECT `+prepulls.columns+` FROM prepull_tasks WHERE true`+cond+` ORDER BY started_at DESC, id DESC`, a...)
	if err != nil {
		return nil, fmt.Errorf("list prepull tasks: %w", err)
	}
	return out, nil
}

// UpdatePrepull applies fn to the task id and stores the result, with the
// row locked from the read to the write; fn's error aborts it and is
// returned as is.
func (s *Store) UpdatePrepull(ctx context.Context, id string, fn func(*store.Prepull) error) (*store.Prepull, error) {
	return prepulls.update(ctx, s.w, id, fn)
}

// DeletePrepull deletes the task id; ErrNotFound if there is none.
func (s *Store) DeletePrepull(ctx context.Context, id string) error {
	return prepulls.remove(ctx, s.w, id)
}
