package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

var runs = newTable(table[store.Run]{
	kind: "run", name: "runs",
	columns: `id, batch_id, task, spec, agent, model, repeat, status, phase, reason, exit_code, sandbox_id, ` +
		`created_at, updated_at, started_at, ended_at, result, tenant, claimed_by, lease_until`,
	scan: scanRun,
	values: func(r *store.Run) ([]any, error) {
		var exit any
		if r.ExitCode != nil {
			exit = *r.ExitCode
		}
		return []any{r.ID, r.BatchID, r.Task, string(r.Spec), r.Agent, r.Model, r.Repeat, r.Status, r.Phase, r.Reason,
			exit, r.SandboxID, toUnix(r.CreatedAt), toUnix(r.UpdatedAt), toNullUnix(r.StartedAt), toNullUnix(r.EndedAt),
			string(r.Result), r.Tenant, r.ClaimedBy, toNullUnix(r.LeaseUntil)}, nil
	},
	normalize: func(r *store.Run) {
		r.CreatedAt, r.UpdatedAt = fromUnix(toUnix(r.CreatedAt)), fromUnix(toUnix(r.UpdatedAt))
		r.StartedAt, r.EndedAt = roundTime(r.StartedAt), roundTime(r.EndedAt)
		r.LeaseUntil = roundTime(r.LeaseUntil)
	},
	setID: func(r *store.Run, id string) { r.ID = id },
})

// roundTime rounds *t to what the table keeps (nil stays nil).
func roundTime(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := fromUnix(toUnix(*t))
	return &v
}

func scanRun(row scanner) (*store.Run, error) {
	var (
		r                store.Run
		spec, result     string
		exit             sql.NullInt64
		created, updated int64
		started, ended   sql.NullInt64
		lease            sql.NullInt64
	)
	if err := row.Scan(&r.ID, &r.BatchID, &r.Task, &spec, &r.Agent, &r.Model, &r.Repeat, &r.Status, &r.Phase, &r.Reason,
		&exit, &r.SandboxID, &created, &updated, &started, &ended, &result, &r.Tenant, &r.ClaimedBy, &lease); err != nil {
		return nil, err
	}
	if spec != "" {
		r.Spec = []byte(spec)
	}
	if result != "" {
		r.Result = []byte(result)
	}
	if exit.Valid {
		code := int(exit.Int64)
		r.ExitCode = &code
	}
	r.CreatedAt, r.UpdatedAt = fromUnix(created), fromUnix(updated)
	if started.Valid {
		t := fromUnix(started.Int64)
		r.StartedAt = &t
	}
	if ended.Valid {
		t := fromUnix(ended.Int64)
		r.EndedAt = &t
	}
	if lease.Valid {
		t := fromUnix(lease.Int64)
		r.LeaseUntil = &t
	}
	return &r, nil
}

// CreateRun stores r; a taken id is ErrConflict.
func (s *Store) CreateRun(ctx context.Context, r *store.Run) error {
	err := runs.insert(ctx, s.w, r)
	switch {
	case err == nil:
		return nil
	case isUnique(err):
		return errdefs.Conflict("run %s already exists", r.ID)
	}
	return fmt.Errorf("insert run %s: %w", r.ID, err)
}

// GetRun returns the run id; ErrNotFound if there is none.
func (s *Store) GetRun(ctx context.Context, id string) (*store.Run, error) {
	return runs.get(ctx, s.r, id)
}

// ListRunPage returns the page p of the runs f selects, oldest first (or
// newest, p.Desc), and the next page's cursor ("" after the last).
func (s *Store) ListRunPage(ctx context.Context, f store.RunFilter, p store.Page) ([]*store.Run, string, error) {
	pcond, order, pargs, err := pageClause(p)
	if err != nil {
		return nil, "", err
	}
	cond, args := ` WHERE 1=1`, []any{}
	if f.BatchID != "" {
		cond += ` AND batch_id = ?`
		args = append(args, f.BatchID)
	}
	if f.Active {
		cond += ` AND status IN ('queued', 'running')`
	}
	for _, in := range []struct {
		column string
		values []string
	}{{"status", f.Statuses}, {"agent", f.Agents}, {"model", f.Models}} {
		if len(in.values) > 0 {
			c, a := columnIn(in.column, in.values)
			cond += c
			args = append(args, a...)
		}
	}
	if f.ByTenant {
		cond += ` AND tenant = ?`
		args = append(args, f.Tenant)
	}
	if !f.EndedBefore.IsZero() {
		cond += ` AND status NOT IN ('queued', 'running') AND COALESCE(ended_at, updated_at) < ?`
		args = append(args, toUnix(f.EndedBefore))
	}
	out, err := list(ctx, s.r, scanRun,
		`SELECT `+runs.columns+` FROM runs`+cond+pcond+order, append(args, pargs...)...)
	if err != nil {
		return nil, "", fmt.Errorf("list runs: %w", err)
	}
	out, next := cutPage(out, p, func(r *store.Run) (time.Time, string) { return r.CreatedAt, r.ID })
	return out, next, nil
}

// UpdateRun applies fn to the run id and stores the result, in one write
// transaction; fn's error aborts it and is returned as is.
func (s *Store) UpdateRun(ctx context.Context, id string, fn func(*store.Run) error) (*store.Run, error) {
	return runs.update(ctx, s.w, id, fn)
}

// DeleteRun deletes the run id; ErrNotFound if there is none.
func (s *Store) DeleteRun(ctx context.Context, id string) error {
	return runs.remove(ctx, s.w, id)
}

// ClaimRuns claims for c.Owner the active runs c selects, oldest first, in
// one write transaction: the single writer makes claims one at a time.
func (s *Store) ClaimRuns(ctx context.Context, c store.RunClaim) ([]*store.Run, error) {
	cond, args := `(lease_until IS NULL OR lease_until < ?)`, []any{toUnix(c.Now)}
	if c.Mine {
		cond = `(` + cond + ` OR claimed_by = ?)`
		args = append(args, c.Owner)
	}
	limit := -1 // SQLite's no limit
	if c.Limit > 0 {
		limit = c.Limit
	}
	out, err := list(ctx, s.w, scanRun, `UPDATE runs SET claimed_by = ?, lease_until = ?
		WHERE id IN (SELECT id FROM runs WHERE status IN ('queued', 'running') AND `+cond+`
			ORDER BY created_at, id LIMIT ?)
		RETURNING `+runs.columns, append(append([]any{c.Owner, toUnix(c.Until)}, args...), limit)...)
	if err != nil {
		return nil, fmt.Errorf("claim runs: %w", err)
	}
	store.SortRuns(out)
	return out, nil
}

// RenewRunLeases moves the leases of owner's active runs to until.
func (s *Store) RenewRunLeases(ctx context.Context, owner string, until time.Time) (int, error) {
	res, err := s.w.ExecContext(ctx, `UPDATE runs SET lease_until = ?
		WHERE claimed_by = ? AND status IN ('queued', 'running')`, toUnix(until), owner)
	if err != nil {
		return 0, fmt.Errorf("renew the leases of %s's runs: %w", owner, err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}
