package postgres

import (
	"context"
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
		return []any{r.ID, r.BatchID, r.Task, bytesOrEmpty(r.Spec), r.Agent, r.Model, r.Repeat, r.Status, r.Phase, r.Reason,
			r.ExitCode, r.SandboxID, r.CreatedAt, r.UpdatedAt, r.StartedAt, r.EndedAt, bytesOrEmpty(r.Result), r.Tenant,
			r.ClaimedBy, r.LeaseUntil}, nil
	},
	normalize: func(r *store.Run) {
		r.CreatedAt, r.UpdatedAt = micro(r.CreatedAt), micro(r.UpdatedAt)
		r.StartedAt, r.EndedAt = microPtr(r.StartedAt), microPtr(r.EndedAt)
		r.LeaseUntil = microPtr(r.LeaseUntil)
	},
	setKey: func(r *store.Run, id string) { r.ID = id },
})

func scanRun(row scanner) (*store.Run, error) {
	var (
		r              store.Run
		started, ended *time.Time
		lease          *time.Time
	)
	if err := row.Scan(&r.ID, &r.BatchID, &r.Task, &r.Spec, &r.Agent, &r.Model, &r.Repeat, &r.Status, &r.Phase, &r.Reason,
		&r.ExitCode, &r.SandboxID, &r.CreatedAt, &r.UpdatedAt, &started, &ended, &r.Result, &r.Tenant,
		&r.ClaimedBy, &lease); err != nil {
		return nil, err
	}
	r.Spec, r.Result = nilIfEmpty(r.Spec), nilIfEmpty(r.Result)
	r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	r.StartedAt, r.EndedAt = utcPtr(started), utcPtr(ended)
	r.LeaseUntil = utcPtr(lease)
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
	return runs.get(ctx, s.r, id, "")
}

// ListRunPage returns the page p of the runs f selects, oldest first (or
// newest, p.Desc), and the next page's cursor ("" after the last).
func (s *Store) ListRunPage(ctx context.Context, f store.RunFilter, p store.Page) ([]*store.Run, string, error) {
	var a args
	pcond, order, err := pageClause(p, &a)
	if err != nil {
		return nil, "", err
	}
	cond := ""
	if f.BatchID != "" {
		cond += ` AND batch_id = ` + a.add(f.BatchID)
	}
	if f.Active {
		cond += ` AND status IN ('queued', 'running')`
	}
	if len(f.Statuses) > 0 {
		cond += ` AND status = ANY(` + a.add(f.Statuses) + `)`
	}
	if len(f.Agents) > 0 {
		cond += ` AND agent = ANY(` + a.add(f.Agents) + `)`
	}
	if len(f.Models) > 0 {
		cond += ` AND model = ANY(` + a.add(f.Models) + `)`
	}
	if f.ByTenant {
		cond += ` AND tenant = ` + a.add(f.Tenant)
	}
	if !f.EndedBefore.IsZero() {
		cond += ` AND status NOT IN ('queued', 'running') AND COALESCE(ended_at, updated_at) < ` + a.add(micro(f.EndedBefore))
	}
	out, err := list(ctx, s.r, scanRun,
		`SELECT `+runs.columns+` FROM runs WHERE true`+cond+pcond+order, a...)
	if err != nil {
		return nil, "", fmt.Errorf("list runs: %w", err)
	}
	out, next := cutPage(out, p, func(r *store.Run) (time.Time, string) { return r.CreatedAt, r.ID })
	return out, next, nil
}

// UpdateRun applies fn to the run id and stores the result, with the row
// locked from the read to the write; fn's error aborts it and is returned
// as is.
func (s *Store) UpdateRun(ctx context.Context, id string, fn func(*store.Run) error) (*store.Run, error) {
	return runs.update(ctx, s.w, id, fn)
}

// DeleteRun deletes the run id; ErrNotFound if there is none.
func (s *Store) DeleteRun(ctx context.Context, id string) error {
	return runs.remove(ctx, s.w, id)
}

// ClaimRuns claims for c.Owner the active runs c selects, oldest first:
// it locks them FOR UPDATE SKIP LOCKED, so that daemons claiming at once
// each take other runs, never waiting on one another's.
func (s *Store) ClaimRuns(ctx context.Context, c store.RunClaim) ([]*store.Run, error) {
	var a args
	owner, until := a.add(c.Owner), a.add(micro(c.Until))
	cond := `(lease_until IS NULL OR lease_until < ` + a.add(micro(c.Now)) + `)`
	if c.Mine {
		cond = `(` + cond + ` OR claimed_by = ` + owner + `)`
	}
	limit := ""
	if c.Limit > 0 {
		limit = ` LIMIT ` + a.add(c.Limit)
	}
	out, err := list(ctx, s.w, scanRun, `UPDATE runs SET claimed_by = `+owner+`, lease_until = `+until+`
		WHERE id IN (SELECT id FROM runs WHERE status IN ('queued', 'running') AND `+cond+`
			ORDER BY created_at, id`+limit+` FOR UPDATE SKIP LOCKED)
		RETURNING `+runs.columns, a...)
	if err != nil {
		return nil, fmt.Errorf("claim runs: %w", err)
	}
	store.SortRuns(out)
	return out, nil
}

// RenewRunLeases moves the leases of owner's active runs to until.
func (s *Store) RenewRunLeases(ctx context.Context, owner string, until time.Time) (int, error) {
	tag, err := s.w.Exec(ctx, `UPDATE runs SET lease_until = $1
		WHERE claimed_by = $2 AND status IN ('queued', 'running')`, micro(until), owner)
	if err != nil {
		return 0, fmt.Errorf("renew the leases of %s's runs: %w", owner, err)
	}
	return int(tag.RowsAffected()), nil
}
