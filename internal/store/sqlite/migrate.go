package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// migrationFiles are the schema's versions: migrations/NNNN_what.sql takes
// the schema from version NNNN-1 to NNNN. A new table or column is one new
// file; a file once released is never changed.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one step of the schema.
type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations reads the *.sql files of dir in fsys, which must be
// numbered 1, 2, 3… without gaps.
func loadMigrations(fsys fs.FS, dir string) ([]migration, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.sql"))
	if err != nil {
		return nil, err
	}
	out := make([]migration, 0, len(names))
	for _, name := range names { // fs.Glob sorts
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || len(num) != 4 {
			return nil, fmt.Errorf("migration %s: name must be NNNN_what.sql", base)
		}
		if v != len(out)+1 {
			return nil, fmt.Errorf("migration %s: want version %d next", base, len(out)+1)
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: base, sql: string(b)})
	}
	return out, nil
}

// migrate brings db's schema up to the newest of ms, one transaction per
// step. The version is SQLite's user_version, which the transaction sets
// with the step's changes, so a failed step leaves the version before it.
func migrate(ctx context.Context, db *sql.DB, ms []migration) error {
	var version int
	if err := db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if version > len(ms) {
		return fmt.Errorf("database schema version %d is newer than this binary's %d", version, len(ms))
	}
	for _, m := range ms[version:] {
		if err := apply(ctx, db, m); err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
	}
	return nil
}

func apply(ctx context.Context, db *sql.DB, m migration) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, m.version)); err != nil {
		return err
	}
	return tx.Commit()
}
