package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

var sandboxes = newTable(table[store.Sandbox]{
	kind: "sandbox", name: "sandboxes",
	columns: `id, image, template, template_version, cpu, memory, ttl, env, status, reason, runtime, created_at, updated_at, expires_at, access_token, spec, pool, managed_by, owner, tenant, metadata`,
	scan:    scanSandbox,
	values: func(sb *store.Sandbox) ([]any, error) {
		env, err := json.Marshal(sb.Env)
		if err != nil {
			return nil, fmt.Errorf("encode env: %w", err)
		}
		md := []byte("{}")
		if len(sb.Metadata) > 0 {
			if md, err = json.Marshal(sb.Metadata); err != nil {
				return nil, fmt.Errorf("encode metadata: %w", err)
			}
		}
		return []any{sb.ID, sb.Image, sb.Template, sb.TemplateVersion, sb.CPU, sb.Memory, sb.TTL, string(env),
			sb.Status, sb.Reason, sb.Runtime, sb.CreatedAt, sb.UpdatedAt, sb.ExpiresAt,
			sb.AccessToken, bytesOrEmpty(sb.Spec), sb.Pool, sb.ManagedBy, sb.Owner, sb.Tenant, string(md)}, nil
	},
	normalize: func(sb *store.Sandbox) {
		// Rounded down to what the server keeps, in the caller's zone, as
		// the sqlite store does.
		sb.CreatedAt = sb.CreatedAt.Truncate(time.Microsecond)
		sb.UpdatedAt = sb.UpdatedAt.Truncate(time.Microsecond)
		if sb.ExpiresAt != nil {
			t := sb.ExpiresAt.Truncate(time.Microsecond)
			sb.ExpiresAt = &t
		}
	},
	setKey: func(sb *store.Sandbox, id string) { sb.ID = id },
})

func scanSandbox(row scanner) (*store.Sandbox, error) {
	var (
		sb      store.Sandbox
		env, md []byte
		expires *time.Time
	)
	if err := row.Scan(&sb.ID, &sb.Image, &sb.Template, &sb.TemplateVersion, &sb.CPU, &sb.Memory, &sb.TTL,
		&env, &sb.Status, &sb.Reason, &sb.Runtime, &sb.CreatedAt, &sb.UpdatedAt, &expires, &sb.AccessToken, &sb.Spec,
		&sb.Pool, &sb.ManagedBy, &sb.Owner, &sb.Tenant, &md); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(env, &sb.Env); err != nil {
		return nil, fmt.Errorf("decode env of sandbox %s: %w", sb.ID, err)
	}
	// No metadata reads back as nil, as it was given.
	if err := json.Unmarshal(md, &sb.Metadata); err != nil {
		return nil, fmt.Errorf("decode metadata of sandbox %s: %w", sb.ID, err)
	}
	if len(sb.Metadata) == 0 {
		sb.Metadata = nil
	}
	sb.CreatedAt, sb.UpdatedAt, sb.ExpiresAt = sb.CreatedAt.UTC(), sb.UpdatedAt.UTC(), utcPtr(expires)
	sb.Spec = nilIfEmpty(sb.Spec)
	return &sb, nil
}

// CreateSandbox stores sb, rounding its times to microseconds in place.
// It takes the sandbox count's lock in shared mode, so that it never falls
// between a bounded create's count and insert.
func (s *Store) CreateSandbox(ctx context.Context, sb *store.Sandbox, evs ...store.Event) error {
	return s.CreateSandboxLimited(ctx, sb, 0, evs...)
}

// CreateSandboxLimited counts and inserts under the sandbox count's lock,
// held exclusively: no other create, by this daemon or another, comes
// between them. A limit <= 0 is no limit.
func (s *Store) CreateSandboxLimited(ctx context.Context, sb *store.Sandbox, limit int, evs ...store.Event) error {
	var full *store.LimitError
	var inserted bool
	err := pgx.BeginFunc(ctx, s.w, func(tx pgx.Tx) error {
		if limit <= 0 {
			if err := lockShared(ctx, tx, lockSandboxCount); err != nil {
				return err
			}
		} else {
			if err := lock(ctx, tx, lockSandboxCount); err != nil {
				return err
			}
			var n int
			if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM sandboxes`).Scan(&n); err != nil {
				return fmt.Errorf("count sandboxes: %w", err)
			}
			if n >= limit {
				full = &store.LimitError{Count: n, Limit: limit}
				return full
			}
		}
		if err := sandboxes.insert(ctx, tx, sb); err != nil {
			return err
		}
		inserted = true
		return addEvents(ctx, tx, sb.ID, evs)
	})
	switch {
	case err == nil:
		return nil
	case full != nil:
		return full
	case inserted:
		return err // addEvents' own
	case isUnique(err):
		return errdefs.Conflict("sandbox %s already exists", sb.ID)
	}
	return fmt.Errorf("insert sandbox %s: %w", sb.ID, err)
}

// GetSandbox returns the sandbox id; ErrNotFound if there is none.
func (s *Store) GetSandbox(ctx context.Context, id string) (*store.Sandbox, error) {
	return sandboxes.get(ctx, s.r, id, "")
}

// ListSandboxes returns every sandbox, warm pools' included, oldest first.
func (s *Store) ListSandboxes(ctx context.Context) ([]*store.Sandbox, error) {
	out, _, err := s.ListSandboxPage(ctx, store.SandboxFilter{}, store.Page{})
	return out, err
}

// ListSandboxPage returns the page p of the sandboxes f selects, oldest
// first (or newest, p.Desc), and the next page's cursor ("" after the last).
func (s *Store) ListSandboxPage(ctx context.Context, f store.SandboxFilter, p store.Page) ([]*store.Sandbox, string, error) {
	var a args
	cond, order, err := pageClause(p, &a)
	if err != nil {
		return nil, "", err
	}
	fcond, err := sandboxFilter(f, &a)
	if err != nil {
		return nil, "", err
	}
	out, err := list(ctx, s.r, scanSandbox,
		`SELECT `+sandboxes.columns+` FROM sandboxes WHERE true`+cond+fcond+order, a...)
	if err != nil {
		return nil, "", fmt.Errorf("list sandboxes: %w", err)
	}
	out, next := cutPage(out, p, func(sb *store.Sandbox) (time.Time, string) { return sb.CreatedAt, sb.ID })
	return out, next, nil
}

// sandboxFilter is the SQL condition of f (each part starting " AND "),
// its arguments added to a.
func sandboxFilter(f store.SandboxFilter, a *args) (string, error) {
	var cond string
	if f.ExcludePooled {
		// With the page's order, the index sandboxes_pool_created.
		cond += ` AND pool = ''`
	}
	if f.Pool != "" {
		cond += ` AND pool = ` + a.add(f.Pool) // the index sandboxes_pool_created
	}
	if f.Owner != "" {
		// owner <> '' matches the partial index sandboxes_owner.
		cond += ` AND owner = ` + a.add(f.Owner) + ` AND owner <> ''`
	}
	if len(f.Statuses) > 0 {
		cond += ` AND status = ANY(` + a.add(f.Statuses) + `)`
	}
	if len(f.Metadata) > 0 {
		// Containment of the filter's object: every pair, each value a
		// string equal to the filter's (a number or true never equals
		// "1" or "true"), through the GIN index sandboxes_metadata.
		md, err := json.Marshal(f.Metadata)
		if err != nil {
			return "", fmt.Errorf("encode metadata filter: %w", err)
		}
		cond += ` AND metadata @> ` + a.add(string(md)) + `::jsonb`
	}
	return cond, nil
}

// CountSandboxes counts the sandboxes f selects.
func (s *Store) CountSandboxes(ctx context.Context, f store.SandboxFilter) (int, error) {
	var a args
	cond, err := sandboxFilter(f, &a)
	if err != nil {
		return 0, err
	}
	var n int
	if err := s.r.QueryRow(ctx, `SELECT COUNT(*) FROM sandboxes WHERE true`+cond, a...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count sandboxes: %w", err)
	}
	return n, nil
}

// ListSandboxLimits returns the id, status, cpu and memory of every
// sandbox, and nothing else of them: a tenth of the time of reading whole
// records (their environment, metadata and spec decoded) at a thousand.
func (s *Store) ListSandboxLimits(ctx context.Context) ([]store.SandboxLimits, error) {
	rows, err := s.r.Query(ctx, `SELECT id, status, cpu, memory FROM sandboxes`)
	if err != nil {
		return nil, fmt.Errorf("list sandbox limits: %w", err)
	}
	defer rows.Close()
	out, err := store.ReadSandboxLimits(rows)
	if err != nil {
		return nil, fmt.Errorf("list sandbox limits: %w", err)
	}
	return out, nil
}

// CountSandboxesByStatus counts the sandboxes by status, and those in warm
// pools apart, from the index sandboxes_status (status, pool) where the
// server can.
func (s *Store) CountSandboxesByStatus(ctx context.Context) (store.SandboxCounts, error) {
	c := store.SandboxCounts{ByStatus: map[string]int{}}
	rows, err := s.r.Query(ctx, `SELECT status, pool <> '', COUNT(*) FROM sandboxes GROUP BY status, pool <> ''`)
	if err != nil {
		return c, fmt.Errorf("count sandboxes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			status string
			pooled bool
			n      int
		)
		if err := rows.Scan(&status, &pooled, &n); err != nil {
			return c, fmt.Errorf("count sandboxes: %w", err)
		}
		if pooled {
			c.Pooled += n
		} else {
			c.ByStatus[status] = n
		}
	}
	if err := rows.Err(); err != nil {
		return c, fmt.Errorf("count sandboxes: %w", err)
	}
	return c, nil
}

// UpdateSandbox applies fn to the sandbox id and stores the result, with
// the row locked from the read to the write; fn's error aborts it and is
// returned as is.
func (s *Store) UpdateSandbox(ctx context.Context, id string, fn func(*store.Sandbox) error, evs ...store.Event) (*store.Sandbox, error) {
	var out *store.Sandbox
	err := pgx.BeginFunc(ctx, s.w, func(tx pgx.Tx) error {
		sb, err := sandboxes.updateIn(ctx, tx, id, fn)
		if err != nil {
			return err
		}
		out = sb
		return addEvents(ctx, tx, id, evs)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteSandbox deletes the sandbox id, and by ON DELETE CASCADE its
// events and the contexts and sessions in it; ErrNotFound if there is none.
func (s *Store) DeleteSandbox(ctx context.Context, id string) error {
	return sandboxes.remove(ctx, s.w, id)
}
