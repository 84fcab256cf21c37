// Package sqlite is the embedded store backend: one SQLite file, written
// through modernc.org/sqlite (pure Go, so the binary stays static).
package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Store is a store.Store on one SQLite database file.
type Store struct {
	db *sql.DB
}

var _ store.Store = (*Store)(nil)

// migrations are applied in order; the schema version is their count.
var migrations = []string{
	`CREATE TABLE sandboxes (
		id TEXT PRIMARY KEY,
		image TEXT NOT NULL,
		template TEXT NOT NULL DEFAULT '',
		template_version INTEGER NOT NULL DEFAULT 0,
		cpu TEXT NOT NULL,
		memory TEXT NOT NULL,
		ttl INTEGER NOT NULL,
		env TEXT NOT NULL DEFAULT '{}',
		status TEXT NOT NULL,
		reason TEXT NOT NULL DEFAULT '',
		runtime TEXT NOT NULL,
		created_at INTEGER NOT NULL,
		updated_at INTEGER NOT NULL,
		expires_at INTEGER
	);
	CREATE TABLE events (
		seq INTEGER PRIMARY KEY AUTOINCREMENT,
		sandbox_id TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,
		at INTEGER NOT NULL,
		status TEXT NOT NULL,
		message TEXT NOT NULL
	);
	CREATE INDEX events_sandbox ON events(sandbox_id, seq);`,
	// 2: templates and their versions (spec is the JSON of api.TemplateSpec).
	`CREATE TABLE templates (
		id TEXT PRIMARY KEY,
		name TEXT NOT NULL UNIQUE,
		display_name TEXT NOT NULL DEFAULT '',
		description TEXT NOT NULL DEFAULT '',
		tags TEXT NOT NULL DEFAULT '[]',
		author TEXT NOT NULL DEFAULT '',
		is_public INTEGER NOT NULL DEFAULT 1,
		latest_version INTEGER NOT NULL,
		created_at INTEGER NOT NULL,
		updated_at INTEGER NOT NULL
	);
	CREATE TABLE template_versions (
		id TEXT PRIMARY KEY,
		template_id TEXT NOT NULL REFERENCES templates(id) ON DELETE CASCADE,
		version INTEGER NOT NULL,
		spec TEXT NOT NULL,
		changelog TEXT NOT NULL DEFAULT '',
		created_by TEXT NOT NULL DEFAULT '',
		created_at INTEGER NOT NULL,
		UNIQUE (template_id, version)
	);`,
	// 3: image prepull tasks.
	`CREATE TABLE prepull_tasks (
		id TEXT PRIMARY KEY,
		image TEXT NOT NULL,
		template TEXT NOT NULL DEFAULT '',
		status TEXT NOT NULL,
		ready INTEGER NOT NULL DEFAULT 0,
		total INTEGER NOT NULL DEFAULT 0,
		error TEXT NOT NULL DEFAULT '',
		started_at INTEGER NOT NULL,
		completed_at INTEGER
	);
	CREATE INDEX prepull_image ON prepull_tasks(image, status);`,
	// 4: a sandbox's access token for the port gateway (returned on every
	// read, as LiteBoxd does) and what it was started with.
	`ALTER TABLE sandboxes ADD COLUMN access_token TEXT NOT NULL DEFAULT '';
	ALTER TABLE sandboxes ADD COLUMN spec TEXT NOT NULL DEFAULT '';`,
	// 5: code-interpreter contexts, and warm-pool membership of sandboxes.
	`ALTER TABLE sandboxes ADD COLUMN pool TEXT NOT NULL DEFAULT '';
	CREATE TABLE contexts (
		id TEXT PRIMARY KEY,
		sandbox_id TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,
		language TEXT NOT NULL,
		type TEXT NOT NULL,
		session_name TEXT NOT NULL DEFAULT '',
		working_dir TEXT NOT NULL DEFAULT '',
		env TEXT NOT NULL DEFAULT '{}',
		owns_sandbox INTEGER NOT NULL DEFAULT 0,
		created_at INTEGER NOT NULL,
		last_used_at INTEGER NOT NULL,
		execution_count INTEGER NOT NULL DEFAULT 0
	);
	CREATE INDEX contexts_sandbox ON contexts(sandbox_id);
	CREATE INDEX contexts_session ON contexts(session_name);`,
}

// Open opens (creating if needed) the database at path and brings its
// schema up to date.
func Open(ctx context.Context, path string) (*Store, error) {
	dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	// One writer at a time is SQLite's rule; one connection keeps
	// transactions from waiting on each other's locks.
	db.SetMaxOpenConns(1)
	s := &Store{db: db}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate database %s: %w", path, err)
	}
	return s, nil
}

func (s *Store) migrate(ctx context.Context) error {
	var version int
	if err := s.db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return err
	}
	if version > len(migrations) {
		return fmt.Errorf("database schema version %d is newer than this binary's %d", version, len(migrations))
	}
	for i := version; i < len(migrations); i++ {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, i+1)); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

const sandboxColumns = `id, image, template, template_version, cpu, memory, ttl, env, status, reason, runtime, created_at, updated_at, expires_at, access_token, spec, pool`

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

// CreateSandbox stores sb, rounding its times to microseconds in place.
func (s *Store) CreateSandbox(ctx context.Context, sb *store.Sandbox) error {
	truncate(sb)
	env, err := json.Marshal(sb.Env)
	if err != nil {
		return fmt.Errorf("encode env: %w", err)
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO sandboxes (`+sandboxColumns+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		sb.ID, sb.Image, sb.Template, sb.TemplateVersion, sb.CPU, sb.Memory, sb.TTL, string(env),
		sb.Status, sb.Reason, sb.Runtime, toUnix(sb.CreatedAt), toUnix(sb.UpdatedAt), toNullUnix(sb.ExpiresAt),
		sb.AccessToken, string(sb.Spec), sb.Pool)
	if err != nil {
		if strings.Contains(err.Error(), "UNIQUE constraint") {
			return errdefs.Conflict("sandbox %s already exists", sb.ID)
		}
		return fmt.Errorf("insert sandbox %s: %w", sb.ID, err)
	}
	return nil
}

type scanner interface{ Scan(...any) error }

func scanSandbox(row scanner) (*store.Sandbox, error) {
	var (
		sb               store.Sandbox
		env              string
		created, updated int64
		expires          sql.NullInt64
		spec             string
	)
	if err := row.Scan(&sb.ID, &sb.Image, &sb.Template, &sb.TemplateVersion, &sb.CPU, &sb.Memory, &sb.TTL,
		&env, &sb.Status, &sb.Reason, &sb.Runtime, &created, &updated, &expires, &sb.AccessToken, &spec, &sb.Pool); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(env), &sb.Env); err != nil {
		return nil, fmt.Errorf("decode env of sandbox %s: %w", sb.ID, err)
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

func (s *Store) GetSandbox(ctx context.Context, id string) (*store.Sandbox, error) {
	sb, err := scanSandbox(s.db.QueryRowContext(ctx, `SELECT `+sandboxColumns+` FROM sandboxes WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errdefs.NotFound("sandbox %s not found", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get sandbox %s: %w", id, err)
	}
	return sb, nil
}

func (s *Store) ListSandboxes(ctx context.Context) ([]*store.Sandbox, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+sandboxColumns+` FROM sandboxes ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	defer rows.Close()
	var out []*store.Sandbox
	for rows.Next() {
		sb, err := scanSandbox(rows)
		if err != nil {
			return nil, fmt.Errorf("list sandboxes: %w", err)
		}
		out = append(out, sb)
	}
	return out, rows.Err()
}

func (s *Store) UpdateSandbox(ctx context.Context, id string, fn func(*store.Sandbox) error) (*store.Sandbox, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("update sandbox %s: %w", id, err)
	}
	defer tx.Rollback()
	sb, err := scanSandbox(tx.QueryRowContext(ctx, `SELECT `+sandboxColumns+` FROM sandboxes WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errdefs.NotFound("sandbox %s not found", id)
	}
	if err != nil {
		return nil, fmt.Errorf("update sandbox %s: %w", id, err)
	}
	if err := fn(sb); err != nil {
		return nil, err
	}
	sb.ID = id
	truncate(sb)
	env, err := json.Marshal(sb.Env)
	if err != nil {
		return nil, fmt.Errorf("encode env: %w", err)
	}
	_, err = tx.ExecContext(ctx, `UPDATE sandboxes SET image=?, template=?, template_version=?, cpu=?, memory=?, ttl=?, env=?, status=?, reason=?, runtime=?, created_at=?, updated_at=?, expires_at=?, access_token=?, spec=?, pool=? WHERE id=?`,
		sb.Image, sb.Template, sb.TemplateVersion, sb.CPU, sb.Memory, sb.TTL, string(env), sb.Status, sb.Reason,
		sb.Runtime, toUnix(sb.CreatedAt), toUnix(sb.UpdatedAt), toNullUnix(sb.ExpiresAt), sb.AccessToken, string(sb.Spec), sb.Pool, id)
	if err != nil {
		return nil, fmt.Errorf("update sandbox %s: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("update sandbox %s: %w", id, err)
	}
	return sb, nil
}

func (s *Store) DeleteSandbox(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM sandboxes WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("delete sandbox %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errdefs.NotFound("sandbox %s not found", id)
	}
	return nil
}

func (s *Store) AddEvent(ctx context.Context, ev store.Event) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO events (sandbox_id, at, status, message) VALUES (?,?,?,?)`,
		ev.SandboxID, toUnix(ev.At), ev.Status, ev.Message)
	if err != nil {
		if strings.Contains(err.Error(), "FOREIGN KEY") {
			return errdefs.NotFound("sandbox %s not found", ev.SandboxID)
		}
		return fmt.Errorf("add event to sandbox %s: %w", ev.SandboxID, err)
	}
	return nil
}

func (s *Store) Events(ctx context.Context, sandboxID string) ([]store.Event, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT at, status, message FROM events WHERE sandbox_id = ? ORDER BY seq`, sandboxID)
	if err != nil {
		return nil, fmt.Errorf("list events of sandbox %s: %w", sandboxID, err)
	}
	defer rows.Close()
	out := []store.Event{}
	for rows.Next() {
		ev := store.Event{SandboxID: sandboxID}
		var at int64
		if err := rows.Scan(&at, &ev.Status, &ev.Message); err != nil {
			return nil, fmt.Errorf("list events of sandbox %s: %w", sandboxID, err)
		}
		ev.At = fromUnix(at)
		out = append(out, ev)
	}
	return out, rows.Err()
}

// Times are stored as Unix microseconds, in UTC.
func toUnix(t time.Time) int64 { return t.UnixMicro() }

func fromUnix(us int64) time.Time { return time.UnixMicro(us).UTC() }

func toNullUnix(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMicro()
}
