package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

var sessions = newTable(table[store.Session]{
	kind: "session", name: "sessions",
	columns: `key, id, tenant, sandbox_id, owns_sandbox, flavor, cpu, memory, template, image, idle_timeout, ` +
		`created_at, last_used_at, expires_at, ends_at, execution_count, error_count, execution_time`,
	scan: scanSession,
	values: func(s *store.Session) ([]any, error) {
		return []any{s.Key, s.ID, s.Tenant, s.SandboxID, s.OwnsSandbox, s.Flavor, s.CPU, s.Memory, s.Template, s.Image,
			s.IdleTimeout.Microseconds(), toUnix(s.CreatedAt), toUnix(s.LastUsedAt), toUnix(s.ExpiresAt), toNullUnix(s.EndsAt),
			s.ExecutionCount, s.ErrorCount, s.ExecutionTime.Microseconds()}, nil
	},
	normalize: func(s *store.Session) {
		s.CreatedAt, s.LastUsedAt, s.ExpiresAt = fromUnix(toUnix(s.CreatedAt)), fromUnix(toUnix(s.LastUsedAt)), fromUnix(toUnix(s.ExpiresAt))
		if s.EndsAt != nil {
			t := fromUnix(toUnix(*s.EndsAt))
			s.EndsAt = &t
		}
		s.IdleTimeout = s.IdleTimeout.Truncate(time.Microsecond)
		s.ExecutionTime = s.ExecutionTime.Truncate(time.Microsecond)
	},
	setID: func(s *store.Session, key string) { s.Key = key },
})

func scanSession(row scanner) (*store.Session, error) {
	var (
		s                      store.Session
		idle, execTime         int64
		created, used, expires int64
		ends                   sql.NullInt64
	)
	if err := row.Scan(&s.Key, &s.ID, &s.Tenant, &s.SandboxID, &s.OwnsSandbox, &s.Flavor, &s.CPU, &s.Memory, &s.Template,
		&s.Image, &idle, &created, &used, &expires, &ends, &s.ExecutionCount, &s.ErrorCount, &execTime); err != nil {
		return nil, err
	}
	s.IdleTimeout, s.ExecutionTime = time.Duration(idle)*time.Microsecond, time.Duration(execTime)*time.Microsecond
	s.CreatedAt, s.LastUsedAt, s.ExpiresAt = fromUnix(created), fromUnix(used), fromUnix(expires)
	if ends.Valid {
		t := fromUnix(ends.Int64)
		s.EndsAt = &t
	}
	return &s, nil
}

// CreateSession stores sess; a taken key is ErrConflict, an unknown
// sandbox ErrNotFound (the foreign key refuses the row).
func (s *Store) CreateSession(ctx context.Context, sess *store.Session) error {
	err := sessions.insert(ctx, s.w, sess)
	switch {
	case err == nil:
		return nil
	case isUnique(err):
		return errdefs.Conflict("session %s already exists", sess.ID)
	case isForeignKey(err):
		return errdefs.NotFound("sandbox %s not found", sess.SandboxID)
	}
	return fmt.Errorf("insert session %s: %w", sess.ID, err)
}

// GetSession returns the session of key (tenant and id); ErrNotFound if
// there is none.
func (s *Store) GetSession(ctx context.Context, key string) (*store.Session, error) {
	return sessions.get(ctx, s.r, key)
}

// ListSessions returns the sessions f selects, oldest first.
func (s *Store) ListSessions(ctx context.Context, f store.SessionFilter) ([]*store.Session, error) {
	out, _, err := s.ListSessionPage(ctx, f, store.Page{})
	return out, err
}

// ListSessionPage returns the page p of the sessions f selects, oldest
// first or newest first (p.Desc), and the cursor of the next page.
func (s *Store) ListSessionPage(ctx context.Context, f store.SessionFilter, p store.Page) ([]*store.Session, string, error) {
	pcond, order, pargs, err := pageClauseBy(p, "key")
	if err != nil {
		return nil, "", err
	}
	cond, args := ` WHERE 1=1`, []any{}
	if !f.AllTenants {
		c, a := tenantCond(f.Tenant, f.WithOwned)
		cond += c
		args = append(args, a...)
	}
	if !f.DueBy.IsZero() {
		// ends_at is NULL for a session without a lifetime: NULL <= ? is
		// NULL, not true, so only its idle deadline counts.
		cond += ` AND (expires_at <= ? OR ends_at <= ?)`
		args = append(args, toUnix(f.DueBy), toUnix(f.DueBy))
	}
	out, err := list(ctx, s.r, scanSession, `SELECT `+sessions.columns+` FROM sessions`+cond+pcond+order, append(args, pargs...)...)
	if err != nil {
		return nil, "", fmt.Errorf("list sessions: %w", err)
	}
	out, next := cutPage(out, p, func(ss *store.Session) (time.Time, string) { return ss.CreatedAt, ss.Key })
	return out, next, nil
}

// CountSessions counts every session, of every tenant.
func (s *Store) CountSessions(ctx context.Context) (int, error) {
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM sessions`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count sessions: %w", err)
	}
	return n, nil
}

// UpdateSession applies fn to the session of key and stores the result, in
// one write transaction; fn's error aborts it and is returned as is.
func (s *Store) UpdateSession(ctx context.Context, key string, fn func(*store.Session) error) (*store.Session, error) {
	return sessions.update(ctx, s.w, key, fn)
}

// DeleteSession deletes the session of key; ErrNotFound if there is none.
func (s *Store) DeleteSession(ctx context.Context, key string) error {
	return sessions.remove(ctx, s.w, key)
}

// ReapableSandboxes returns the sandboxes a service made (ManagedBy) that
// may be deleted: those created before orphanBefore that no session,
// context or active run refers to, and those failed before failedBefore.
// Warm pools' sandboxes are the pools' to delete, and pending ones are
// left alone: a service writes its record after its sandbox is made, so a
// pending sandbox without one may still be being made.
func (s *Store) ReapableSandboxes(ctx context.Context, orphanBefore, failedBefore time.Time) ([]*store.Sandbox, error) {
	// Each NOT IN is a lookup in an index on sandbox_id (sessions_sandbox,
	// contexts_sandbox, runs_sandbox), not a scan of the table.
	out, err := list(ctx, s.r, scanSandbox, `SELECT `+sandboxes.columns+` FROM sandboxes
		WHERE managed_by != '' AND pool = '' AND status != 'pending' AND (
			(created_at < ? AND id NOT IN (SELECT sandbox_id FROM sessions) AND id NOT IN (SELECT sandbox_id FROM contexts)
				AND id NOT IN (SELECT sandbox_id FROM runs WHERE status IN ('queued', 'running')))
			OR (status = 'failed' AND updated_at < ?))
		ORDER BY created_at, id`, toUnix(orphanBefore), toUnix(failedBefore))
	if err != nil {
		return nil, fmt.Errorf("list reapable sandboxes: %w", err)
	}
	return out, nil
}
