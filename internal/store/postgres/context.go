package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

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
			c.CreatedAt, c.LastUsedAt, c.ExecutionCount, c.SessionKey, c.Name, c.Description, c.Tenant}, nil
	},
	normalize: func(c *store.Context) {
		c.CreatedAt, c.LastUsedAt = micro(c.CreatedAt), micro(c.LastUsedAt)
	},
	setKey: func(c *store.Context, id string) { c.ID = id },
})

func scanContext(row scanner) (*store.Context, error) {
	var (
		c   store.Context
		env []byte
	)
	if err := row.Scan(&c.ID, &c.SandboxID, &c.Language, &c.Type, &c.SessionName, &c.WorkingDir, &env,
		&c.OwnsSandbox, &c.CreatedAt, &c.LastUsedAt, &c.ExecutionCount, &c.SessionKey, &c.Name, &c.Description, &c.Tenant); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(env, &c.Env); err != nil {
		return nil, fmt.Errorf("decode env of context %s: %w", c.ID, err)
	}
	c.CreatedAt, c.LastUsedAt = c.CreatedAt.UTC(), c.LastUsedAt.UTC()
	return &c, nil
}

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

// GetContext returns the context id; ErrNotFound if there is none.
func (s *Store) GetContext(ctx context.Context, id string) (*store.Context, error) {
	return contexts.get(ctx, s.r, id, "")
}

// contextWhere is the condition (" AND …") selecting what f selects, its
// arguments added to a.
func contextWhere(f store.ContextFilter, a *args) string {
	var cond string
	eq := func(col, v string) {
		if v != "" {
			cond += ` AND ` + col + ` = ` + a.add(v)
		}
	}
	eq("session_name", f.SessionName)
	eq("session_key", f.SessionKey)
	eq("sandbox_id", f.SandboxID)
	eq("language", f.Language)
	if !f.IdleSince.IsZero() {
		// Only contexts in no session idle out: a session's go with it.
		cond += ` AND session_key = '' AND last_used_at < ` + a.add(f.IdleSince)
	}
	if f.ByTenant {
		cond += tenantCond(f.Tenant, f.WithOwned, a)
	}
	return cond
}

// ListContexts returns every context f selects, oldest first.
func (s *Store) ListContexts(ctx context.Context, f store.ContextFilter) ([]*store.Context, error) {
	out, _, err := s.ListContextPage(ctx, f, store.Page{})
	return out, err
}

// ListContextPage returns the page p of the contexts f selects, oldest
// first (or newest, p.Desc), and the next page's cursor ("" after the last).
func (s *Store) ListContextPage(ctx context.Context, f store.ContextFilter, p store.Page) ([]*store.Context, string, error) {
	var a args
	pcond, order, err := pageClause(p, &a)
	if err != nil {
		return nil, "", err
	}
	cond := contextWhere(f, &a)
	out, err := list(ctx, s.r, scanContext,
		`SELECT `+contexts.columns+` FROM contexts WHERE true`+cond+pcond+order, a...)
	if err != nil {
		return nil, "", fmt.Errorf("list contexts: %w", err)
	}
	out, next := cutPage(out, p, func(c *store.Context) (time.Time, string) { return c.CreatedAt, c.ID })
	return out, next, nil
}

// CountContexts counts the contexts f selects.
func (s *Store) CountContexts(ctx context.Context, f store.ContextFilter) (int, error) {
	var a args
	cond := contextWhere(f, &a)
	var n int
	if err := s.r.QueryRow(ctx, `SELECT COUNT(*) FROM contexts WHERE true`+cond, a...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count contexts: %w", err)
	}
	return n, nil
}

// UpdateContext applies fn to the context id and stores the result, with
// the row locked from the read to the write; fn's error aborts it and is
// returned as is.
func (s *Store) UpdateContext(ctx context.Context, id string, fn func(*store.Context) error) (*store.Context, error) {
	return contexts.update(ctx, s.w, id, fn)
}

// CountContextExecution counts an execution of context id at at and
// returns its new count; ErrNotFound if there is none.
func (s *Store) CountContextExecution(ctx context.Context, id string, at time.Time) (int, error) {
	var n int
	err := s.w.QueryRow(ctx, `UPDATE contexts SET execution_count = execution_count + 1, last_used_at = $1 WHERE id = $2 RETURNING execution_count`,
		micro(at), id).Scan(&n)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, errdefs.NotFound("context %s not found", id)
	case err != nil:
		return 0, fmt.Errorf("count an execution of context %s: %w", id, err)
	}
	return n, nil
}

// DeleteContext deletes the context id; ErrNotFound if there is none.
func (s *Store) DeleteContext(ctx context.Context, id string) error {
	return contexts.remove(ctx, s.w, id)
}
