package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

const contextColumns = `id, sandbox_id, language, type, session_name, working_dir, env, owns_sandbox, created_at, last_used_at, execution_count`

func (s *Store) CreateContext(ctx context.Context, c *store.Context) error {
	env, err := json.Marshal(c.Env)
	if err != nil {
		return fmt.Errorf("encode env: %w", err)
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO contexts (`+contextColumns+`) VALUES (?,?,?,?,?,?,?,?,?,?,?)`,
		c.ID, c.SandboxID, c.Language, c.Type, c.SessionName, c.WorkingDir, string(env), c.OwnsSandbox,
		toUnix(c.CreatedAt), toUnix(c.LastUsedAt), c.ExecutionCount)
	switch {
	case err == nil:
		c.CreatedAt, c.LastUsedAt = fromUnix(toUnix(c.CreatedAt)), fromUnix(toUnix(c.LastUsedAt))
		return nil
	case strings.Contains(err.Error(), "UNIQUE constraint"):
		return errdefs.Conflict("context %s already exists", c.ID)
	case strings.Contains(err.Error(), "FOREIGN KEY"):
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
		&c.OwnsSandbox, &created, &used, &c.ExecutionCount); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(env), &c.Env); err != nil {
		return nil, fmt.Errorf("decode env of context %s: %w", c.ID, err)
	}
	c.CreatedAt, c.LastUsedAt = fromUnix(created), fromUnix(used)
	return &c, nil
}

func (s *Store) GetContext(ctx context.Context, id string) (*store.Context, error) {
	c, err := scanContext(s.db.QueryRowContext(ctx, `SELECT `+contextColumns+` FROM contexts WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errdefs.NotFound("context %s not found", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get context %s: %w", id, err)
	}
	return c, nil
}

func (s *Store) ListContexts(ctx context.Context, f store.ContextFilter) ([]*store.Context, error) {
	q := `SELECT ` + contextColumns + ` FROM contexts WHERE 1=1`
	var args []any
	if f.SessionName != "" {
		q += ` AND session_name = ?`
		args = append(args, f.SessionName)
	}
	if f.SandboxID != "" {
		q += ` AND sandbox_id = ?`
		args = append(args, f.SandboxID)
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("list contexts: %w", err)
	}
	defer rows.Close()
	out := []*store.Context{}
	for rows.Next() {
		c, err := scanContext(rows)
		if err != nil {
			return nil, fmt.Errorf("list contexts: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

func (s *Store) UpdateContext(ctx context.Context, id string, fn func(*store.Context) error) (*store.Context, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("update context %s: %w", id, err)
	}
	defer tx.Rollback()
	c, err := scanContext(tx.QueryRowContext(ctx, `SELECT `+contextColumns+` FROM contexts WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errdefs.NotFound("context %s not found", id)
	}
	if err != nil {
		return nil, fmt.Errorf("update context %s: %w", id, err)
	}
	if err := fn(c); err != nil {
		return nil, err
	}
	c.ID = id
	env, err := json.Marshal(c.Env)
	if err != nil {
		return nil, fmt.Errorf("encode env: %w", err)
	}
	_, err = tx.ExecContext(ctx, `UPDATE contexts SET sandbox_id=?, language=?, type=?, session_name=?, working_dir=?, env=?, owns_sandbox=?, created_at=?, last_used_at=?, execution_count=? WHERE id=?`,
		c.SandboxID, c.Language, c.Type, c.SessionName, c.WorkingDir, string(env), c.OwnsSandbox,
		toUnix(c.CreatedAt), toUnix(c.LastUsedAt), c.ExecutionCount, id)
	if err != nil {
		return nil, fmt.Errorf("update context %s: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("update context %s: %w", id, err)
	}
	c.CreatedAt, c.LastUsedAt = fromUnix(toUnix(c.CreatedAt)), fromUnix(toUnix(c.LastUsedAt))
	return c, nil
}

func (s *Store) DeleteContext(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM contexts WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("delete context %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errdefs.NotFound("context %s not found", id)
	}
	return nil
}
