package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrationFiles are the schema's versions: migrations/NNNN_what.sql takes
// the schema from version NNNN-1 to NNNN. A new table or column is one new
// file; a file once released is never changed.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// schema is the steps of migrationFiles, read once: a file that breaks the
// rules is a bug of the build, found by every test that opens a store.
var schema = mustSteps(migrationFiles, "migrations")

// step is one version of the schema.
type step struct {
	version int
	name    string
	sql     string
}

func mustSteps(fsys fs.FS, dir string) []step {
	ss, err := readSteps(fsys, dir)
	if err != nil {
		panic(fmt.Sprintf("postgres store: %v", err))
	}
	return ss
}

// readSteps reads the *.sql files of dir, which must be numbered from 1
// up without gaps.
func readSteps(fsys fs.FS, dir string) ([]step, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.sql"))
	if err != nil {
		return nil, err
	}
	var out []step
	for i, name := range names { // sorted by fs.Glob
		base := path.Base(name)
		num, _, _ := strings.Cut(base, "_")
		if v, err := strconv.Atoi(num); err != nil || len(num) != 4 || v != i+1 {
			return nil, fmt.Errorf("migration %s: want a name %04d_what.sql", base, i+1)
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		out = append(out, step{version: i + 1, name: base, sql: string(b)})
	}
	return out, nil
}

// versionsTable records the steps applied, one row each. Its name is the
// store's own: a database may hold another tool's schema_migrations.
const versionsTable = `CREATE TABLE agent2env_migrations (
	version integer PRIMARY KEY,
	name text NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now()
)`

// migrate applies the steps of ss the database lacks, in order, each in
// its own transaction that also records it in agent2env_migrations. Every
// transaction first takes the migration lock, so that daemons starting at
// once on one database take turns: each step is applied once, by
// whichever gets there first, and the others find it done.
func migrate(ctx context.Context, db *pgxpool.Pool, ss []step) error {
	for {
		done := false
		err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			if err := lock(ctx, tx, lockMigrate); err != nil {
				return err
			}
			// Made only when missing: CREATE … IF NOT EXISTS would need
			// the right to create in the schema at every start, which a
			// daemon's role need not have once the schema is made.
			var exists bool
			if err := tx.QueryRow(ctx, `SELECT to_regclass('agent2env_migrations') IS NOT NULL`).Scan(&exists); err != nil {
				return fmt.Errorf("look for agent2env_migrations: %w", err)
			}
			if !exists {
				if _, err := tx.Exec(ctx, versionsTable); err != nil {
					return fmt.Errorf("create agent2env_migrations: %w", err)
				}
			}
			var version int
			if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM agent2env_migrations`).Scan(&version); err != nil {
				return fmt.Errorf("read schema version: %w", err)
			}
			if version > len(ss) {
				return fmt.Errorf("database schema version %d is newer than this binary's %d", version, len(ss))
			}
			if err := checkApplied(ctx, tx, ss); err != nil {
				return err
			}
			switch {
			case version == len(ss):
				done = true
				return nil
			}
			next := ss[version]
			if _, err := tx.Exec(ctx, next.sql); err != nil {
				return fmt.Errorf("migration %s: %w", next.name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO agent2env_migrations (version, name) VALUES ($1, $2)`, next.version, next.name); err != nil {
				return fmt.Errorf("migration %s: %w", next.name, err)
			}
			return nil
		})
		if err != nil || done {
			return err
		}
	}
}

// checkApplied refuses a database whose applied steps are not the first
// steps of ss by name: one migrated by a build whose steps were numbered
// otherwise (a branch's) has another schema under the same version, which
// the steps after it would not bring to this binary's.
func checkApplied(ctx context.Context, tx pgx.Tx, ss []step) error {
	rows, err := tx.Query(ctx, `SELECT version, name FROM agent2env_migrations ORDER BY version`)
	if err != nil {
		return fmt.Errorf("read applied migrations: %w", err)
	}
	applied, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		Version int
		Name    string
	}])
	if err != nil {
		return fmt.Errorf("read applied migrations: %w", err)
	}
	for _, a := range applied {
		if a.Version < 1 || a.Version > len(ss) || ss[a.Version-1].name != a.Name {
			want := "none"
			if a.Version >= 1 && a.Version <= len(ss) {
				want = ss[a.Version-1].name
			}
			return fmt.Errorf("database migration %d is %s where this binary's is %s: the database was migrated by a build with other migrations", a.Version, a.Name, want)
		}
	}
	return nil
}
