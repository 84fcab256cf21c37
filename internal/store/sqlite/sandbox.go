package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

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
			sb.Status, sb.Reason, sb.Runtime, toUnix(sb.CreatedAt), toUnix(sb.UpdatedAt), toNullUnix(sb.ExpiresAt),
			sb.AccessToken, string(sb.Spec), sb.Pool, sb.ManagedBy, sb.Owner, sb.Tenant, string(md)}, nil
	},
	normalize: truncate,
	setID:     func(sb *store.Sandbox, id string) { sb.ID = id },
})

// truncate rounds sb's times down to the microseconds the database keeps,
// so that what a call returns equals what a later read returns.
func truncate(sb *store.Sandbox) {
	sb.CreatedAt = sb.CreatedAt.Truncate(time.Microsecond)
	sb.UpdatedAt = sb.UpdatedAt.Truncate(time.Microsecond)
	if sb.ExpiresAt != nil {
		t := sb.ExpiresAt.Truncate(time.Microsecond)
		sb.ExpiresAt = &t
	}
}

func scanSandbox(row scanner) (*store.Sandbox, error) {
	var (
		sb               store.Sandbox
		env              string
		created, updated int64
		expires          sql.NullInt64
		spec, md         string
	)
	if err := row.Scan(&sb.ID, &sb.Image, &sb.Template, &sb.TemplateVersion, &sb.CPU, &sb.Memory, &sb.TTL,
		&env, &sb.Status, &sb.Reason, &sb.Runtime, &created, &updated, &expires, &sb.AccessToken, &spec, &sb.Pool, &sb.ManagedBy, &sb.Owner, &sb.Tenant, &md); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(env), &sb.Env); err != nil {
		return nil, fmt.Errorf("decode env of sandbox %s: %w", sb.ID, err)
	}
	if md != "{}" {
		if err := json.Unmarshal([]byte(md), &sb.Metadata); err != nil {
			return nil, fmt.Errorf("decode metadata of sandbox %s: %w", sb.ID, err)
		}
	}
	sb.CreatedAt, sb.UpdatedAt = fromUnix(created), fromUnix(updated)
	if spec != "" {
		sb.Spec = []byte(spec)
	}
	if expires.Valid {
		t := fromUnix(expires.Int64)
		sb.ExpiresAt = &t
	}
	return &sb, nil
}

// CreateSandbox stores sb, rounding its times to microseconds in place,
// and evs with it in one write transaction.
func (s *Store) CreateSandbox(ctx context.Context, sb *store.Sandbox, evs ...store.Event) error {
	return s.CreateSandboxLimited(ctx, sb, 0, evs...)
}

// CreateSandboxLimited counts, inserts sb and adds evs in one write
// transaction (a savepoint of one the batcher commits with the writes
// queued beside it), which the single writer connection serializes with
// every other write.
func (s *Store) CreateSandboxLimited(ctx context.Context, sb *store.Sandbox, limit int, evs ...store.Event) error {
	return s.b.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if limit > 0 {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM sandboxes`).Scan(&n); err != nil {
				return fmt.Errorf("count sandboxes: %w", err)
			}
			if n >= limit {
				return &store.LimitError{Count: n, Limit: limit}
			}
		}
		if err := insertSandbox(ctx, tx, sb); err != nil {
			return err
		}
		return addEvents(ctx, tx, sb.ID, evs)
	})
}

func insertSandbox(ctx context.Context, q querier, sb *store.Sandbox) error {
	err := sandboxes.insert(ctx, q, sb)
	switch {
	case err == nil:
		return nil
	case isUnique(err):
		return errdefs.Conflict("sandbox %s already exists", sb.ID)
	}
	return fmt.Errorf("insert sandbox %s: %w", sb.ID, err)
}

// GetSandbox returns the sandbox id; ErrNotFound if there is none.
func (s *Store) GetSandbox(ctx context.Context, id string) (*store.Sandbox, error) {
	return sandboxes.get(ctx, s.r, id)
}

// ListSandboxes returns every sandbox, warm pools' included, oldest first.
func (s *Store) ListSandboxes(ctx context.Context) ([]*store.Sandbox, error) {
	out, _, err := s.ListSandboxPage(ctx, store.SandboxFilter{}, store.Page{})
	return out, err
}

// ListSandboxPage returns the page p of the sandboxes f selects, oldest
// first (or newest, p.Desc), and the next page's cursor ("" after the last).
func (s *Store) ListSandboxPage(ctx context.Context, f store.SandboxFilter, p store.Page) ([]*store.Sandbox, string, error) {
	cond, order, args, err := pageClause(p)
	if err != nil {
		return nil, "", err
	}
	fcond, fargs := sandboxFilter(f)
	cond += fcond
	args = append(args, fargs...)
	out, err := list(ctx, s.r, scanSandbox,
		`SELECT `+sandboxes.columns+` FROM sandboxes WHERE 1=1`+cond+order, args...)
	if err != nil {
		return nil, "", fmt.Errorf("list sandboxes: %w", err)
	}
	out, next := cutPage(out, p, func(sb *store.Sandbox) (time.Time, string) { return sb.CreatedAt, sb.ID })
	return out, next, nil
}

// sandboxFilter is the SQL condition of f (each part starting " AND ")
// and its arguments.
func sandboxFilter(f store.SandboxFilter) (string, []any) {
	var (
		cond string
		args []any
	)
	if f.ExcludePooled {
		// With the page's order, the index sandboxes_pool_created (pool,
		// created_at, id): the clients' sandboxes in order, pooled ones
		// never read.
		cond += ` AND pool = ''`
	}
	if f.Pool != "" {
		cond += ` AND pool = ?` // the index sandboxes_pool_created
		args = append(args, f.Pool)
	}
	if f.Owner != "" {
		// owner != '' lets SQLite use the partial index sandboxes_owner
		// (it cannot tell a bound value is not ''): a lookup on every
		// delete, not a scan.
		cond += ` AND owner = ? AND owner != ''`
		args = append(args, f.Owner)
	}
	if len(f.Statuses) > 0 {
		scond, sargs := columnIn("status", f.Statuses)
		cond += scond
		args = append(args, sargs...)
	}
	keys := slices.Sorted(maps.Keys(f.Metadata))
	for _, k := range keys {
		// json_each's type 'text' keeps a number or true from matching
		// the string "1" or "true".
		cond += ` AND EXISTS (SELECT 1 FROM json_each(sandboxes.metadata) m WHERE m.key = ? AND m.type = 'text' AND m.value = ?)`
		args = append(args, k, f.Metadata[k])
	}
	return cond, args
}

// CountSandboxes counts the sandboxes f selects.
func (s *Store) CountSandboxes(ctx context.Context, f store.SandboxFilter) (int, error) {
	cond, args := sandboxFilter(f)
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM sandboxes WHERE 1=1`+cond, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count sandboxes: %w", err)
	}
	return n, nil
}

// ListSandboxLimits returns the id, status, cpu and memory of every
// sandbox, and nothing else of them: a tenth of the time of reading whole
// records (their environment, metadata and spec decoded) at a thousand.
func (s *Store) ListSandboxLimits(ctx context.Context) ([]store.SandboxLimits, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, status, cpu, memory FROM sandboxes`)
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
// pools apart. The GROUP BY reads only the index sandboxes_status
// (status, pool), never the rows: a count per scrape, whatever their number.
func (s *Store) CountSandboxesByStatus(ctx context.Context) (store.SandboxCounts, error) {
	c := store.SandboxCounts{ByStatus: map[string]int{}}
	rows, err := s.r.QueryContext(ctx, `SELECT status, pool != '', COUNT(*) FROM sandboxes GROUP BY status, pool != ''`)
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

// UpdateSandbox applies fn to the sandbox id, stores the result and adds
// evs, in one write transaction (or savepoint, see batcher); fn's error
// aborts it and is returned as is. fn runs on the batcher's goroutine.
func (s *Store) UpdateSandbox(ctx context.Context, id string, fn func(*store.Sandbox) error, evs ...store.Event) (*store.Sandbox, error) {
	var out *store.Sandbox
	err := s.b.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
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
	return s.b.do(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return sandboxes.remove(ctx, tx, id)
	})
}
