package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

var contexts = newTable(table[store.Context]{
	kind: "context", name: "contexts",
	columns: `id, sandbox_id, language, type, session_name, working_dir, env, owns_sandbox, created_at, last_used_at, execution_count, session_key, name, description, tenant`,
	scan:    scanContext,
	values: func(c *store.Context) ([]any, error) {
		env, err := json.Marshal(c.Env)
		if err != nil {
			return nil, fmt.Errorf("encode env: %w", err)
		}
		return []any{c.ID, c.SandboxID, c.Language, c.Type, c.SessionName, c.WorkingDir, string(env), c.OwnsSandbox,
			toUnix(c.CreatedAt), toUnix(c.LastUsedAt), c.ExecutionCount, c.SessionKey, c.Name, c.Description, c.Tenant}, nil
	},
	normalize: func(c *store.Context) {
		c.CreatedAt, c.LastUsedAt = fromUnix(toUnix(c.CreatedAt)), fromUnix(toUnix(c.LastUsedAt))
	},
	setID: func(c *store.Context, id string) { c.ID = id },
})

// CreateContext stores c; a taken id is ErrConflict, an unknown sandbox
// ErrNotFound (the foreign key refuses the row).
func (s *Store) CreateContext(ctx context.Context, c *store.Context) error {
	err := contexts.insert(ctx, s.w, c)
	switch {
	case err == nil:
		return nil
	case isUnique(err):
		return errdefs.Conflict("context %s already exists", c.ID)
	case isForeignKey(err):
		return errdefs.NotFound("sandbox %s not found", c.SandboxID)
	}
	return fmt.Errorf("insert context %s: %w", c.ID, err)
}

func scanContext(row scanner) (*store.Context, error) {
	var (
		c             store.Context
		env           string
		created, used int64
	)
	if err := row.Scan(&c.ID, &c.SandboxID, &c.Language, &c.Type, &c.SessionName, &c.WorkingDir, &env,
		&c.OwnsSandbox, &created, &used, &c.ExecutionCount, &c.SessionKey, &c.Name, &c.Description, &c.Tenant); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(env), &c.Env); err != nil {
		return nil, fmt.Errorf("decode env of context %s: %w", c.ID, err)
	}
	c.CreatedAt, c.LastUsedAt = fromUnix(created), fromUnix(used)
	return &c, nil
}

// GetContext returns the context id; ErrNotFound if there is none.
func (s *Store) GetContext(ctx context.Context, id string) (*store.Context, error) {
	return contexts.get(ctx, s.r, id)
}

// contextWhere is the condition selecting what f selects, with its
// arguments.
func contextWhere(f store.ContextFilter) (string, []any) {
	cond, args := ` WHERE 1=1`, []any{}
	if f.SessionName != "" {
		cond += ` AND session_name = ?`
		args = append(args, f.SessionName)
	}
	if f.SessionKey != "" {
		cond += ` AND session_key = ?`
		args = append(args, f.SessionKey)
	}
	if f.SandboxID != "" {
		cond += ` AND sandbox_id = ?`
		args = append(args, f.SandboxID)
	}
	if f.Language != "" {
		cond += ` AND language = ?`
		args = append(args, f.Language)
	}
	if !f.IdleSince.IsZero() {
		// Only contexts in no session idle out: a session's go with it.
		cond += ` AND session_key = '' AND last_used_at < ?`
		args = append(args, toUnix(f.IdleSince))
	}
	if f.ByTenant {
		c, a := tenantCond(f.Tenant, f.WithOwned)
		cond += c
		args = append(args, a...)
	}
	return cond, args
}

// ListContexts returns every context f selects, oldest first.
func (s *Store) ListContexts(ctx context.Context, f store.ContextFilter) ([]*store.Context, error) {
	out, _, err := s.ListContextPage(ctx, f, store.Page{})
	return out, err
}

// ListContextPage returns the page p of the contexts f selects, oldest
// first (or newest, p.Desc), and the next page's cursor ("" after the last).
func (s *Store) ListContextPage(ctx context.Context, f store.ContextFilter, p store.Page) ([]*store.Context, string, error) {
	pcond, order, pargs, err := pageClause(p)
	if err != nil {
		return nil, "", err
	}
	cond, args := contextWhere(f)
	out, err := list(ctx, s.r, scanContext,
		`SELECT `+contexts.columns+` FROM contexts`+cond+pcond+order, append(args, pargs...)...)
	if err != nil {
		return nil, "", fmt.Errorf("list contexts: %w", err)
	}
	out, next := cutPage(out, p, func(c *store.Context) (time.Time, string) { return c.CreatedAt, c.ID })
	return out, next, nil
}

// CountContexts counts the contexts f selects.
func (s *Store) CountContexts(ctx context.Context, f store.ContextFilter) (int, error) {
	cond, args := contextWhere(f)
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM contexts`+cond, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count contexts: %w", err)
	}
	return n, nil
}

// UpdateContext applies fn to the context id and stores the result, in one
// write transaction; fn's error aborts it and is returned as is.
func (s *Store) UpdateContext(ctx context.Context, id string, fn func(*store.Context) error) (*store.Context, error) {
	return contexts.update(ctx, s.w, id, fn)
}

// CountContextExecution counts an execution of context id at at and
// returns its new count; ErrNotFound if there is none.
func (s *Store) CountContextExecution(ctx context.Context, id string, at time.Time) (int, error) {
	var n int
	err := s.w.QueryRowContext(ctx, `UPDATE contexts SET execution_count = execution_count + 1, last_used_at = ? WHERE id = ? RETURNING execution_count`,
		toUnix(at), id).Scan(&n)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, errdefs.NotFound("context %s not found", id)
	case err != nil:
		return 0, fmt.Errorf("count an execution of context %s: %w", id, noSpace(err))
	}
	return n, nil
}

// DeleteContext deletes the context id; ErrNotFound if there is none.
func (s *Store) DeleteContext(ctx context.Context, id string) error {
	return contexts.remove(ctx, s.w, id)
}

// tenantCond selects the records of tenant and, withOwned, those the code
// of its sandboxes and the agents of its runs made, whose tenants are
// "sandbox:<id>" and "run:<id>" (auth.SandboxTenant, auth.RunTenant). The
// tenants are worked out in SQL, one subquery over the indexes
// sandboxes_tenant and runs_tenant, rather than passed in as a list as
// long as the key's sandboxes and runs.
func tenantCond(tenant string, withOwned bool) (string, []any) {
	if !withOwned {
		return ` AND tenant = ?`, []any{tenant}
	}
	return ` AND (tenant = ? OR tenant IN (SELECT 'sandbox:' || id FROM sandboxes WHERE tenant = ?` +
		` UNION ALL SELECT 'run:' || id FROM runs WHERE tenant = ?))`, []any{tenant, tenant, tenant}
}
