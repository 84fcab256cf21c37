package postgres

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"

	_ "modernc.org/sqlite" // the sqlite store's schema, to compare

	"github.com/agent2env/agent2env/internal/store"
	"github.com/agent2env/agent2env/internal/store/storetest"
)

// Five daemons starting at once on one empty database all open it, and
// each migration is applied once.
func TestOpenConcurrently(t *testing.T) {
	ctx := context.Background()
	srv := server.Server(t)
	name, dbURL, err := srv.CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.DropDatabase(ctx, name) })
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			s, err := Open(ctx, dbURL)
			if err != nil {
				t.Error(err)
				return
			}
			s.Close()
		})
	}
	wg.Wait()
	s := open(t, dbURL)
	var n, last int
	if err := s.w.QueryRow(ctx, `SELECT COUNT(*), MAX(version) FROM agent2env_migrations`).Scan(&n, &last); err != nil {
		t.Fatal(err)
	}
	if n != len(schema) || last != len(schema) {
		t.Errorf("agent2env_migrations: %d rows up to version %d, want %d", n, last, len(schema))
	}
}

// Steps raced by five migrators are each applied once, in order: the
// steps write down each time they run.
func TestMigrateRace(t *testing.T) {
	ctx := context.Background()
	steps, err := readSteps(fstest.MapFS{
		"m/0001_log.sql":   {Data: []byte(`CREATE TABLE applied (n serial, version int); INSERT INTO applied (version) VALUES (1); SELECT pg_sleep(0.05)`)},
		"m/0002_again.sql": {Data: []byte(`INSERT INTO applied (version) VALUES (2); SELECT pg_sleep(0.02)`)},
		"m/0003_last.sql":  {Data: []byte(`INSERT INTO applied (version) VALUES (3)`)},
	}, "m")
	if err != nil {
		t.Fatal(err)
	}
	dbURL := server.URL(t)
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			db, err := pgxpool.New(ctx, dbURL)
			if err != nil {
				t.Error(err)
				return
			}
			defer db.Close()
			if err := migrate(ctx, db, steps); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	db, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(ctx, `SELECT version FROM applied ORDER BY n`)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for rows.Next() {
		var v int
		rows.Scan(&v)
		got = append(got, v)
	}
	if diff := cmp.Diff([]int{1, 2, 3}, got); diff != "" || rows.Err() != nil {
		t.Errorf("steps applied (-want +got):\n%s%v", diff, rows.Err())
	}
}

// A database a newer binary migrated is refused, not written to.
func TestOpenNewerSchema(t *testing.T) {
	ctx := context.Background()
	dbURL := server.URL(t)
	s := open(t, dbURL)
	if _, err := s.w.Exec(ctx, `INSERT INTO agent2env_migrations (version, name) VALUES ($1, 'future.sql')`, len(schema)+1); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, dbURL); err == nil || !strings.Contains(err.Error(), "newer than this binary's") {
		t.Errorf("open a newer schema: %v, want it refused", err)
	}
}

func TestReadSteps(t *testing.T) {
	for _, tt := range []struct {
		name  string
		files []string
		want  string // error text; "" for none
	}{
		{"in order", []string{"0001_a.sql", "0002_b.sql"}, ""},
		{"gap", []string{"0001_a.sql", "0003_c.sql"}, "migration 0003_c.sql: want a name 0002_what.sql"},
		{"no number", []string{"first.sql"}, "migration first.sql: want a name 0001_what.sql"},
		{"short number", []string{"01_a.sql"}, "migration 01_a.sql: want a name 0001_what.sql"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for _, f := range tt.files {
				fsys["m/"+f] = &fstest.MapFile{Data: []byte("SELECT 1")}
			}
			_, err := readSteps(fsys, "m")
			if got := errText(err); got != tt.want {
				t.Errorf("readSteps: %q, want %q", got, tt.want)
			}
		})
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// sharedOnly are the tables only this store has, being the one several
// daemons share: ended LLM exchanges' records (store.LLMBodies), the
// limits' counts (store.LLMUsage) and the key leases (KeyLeases).
var sharedOnly = []string{"llm_bodies", "llm_usage", "llm_usage_totals", "key_leases"}

// The schema has the sqlite store's tables and columns, no more and no
// fewer, besides sharedOnly: a migration added to one store and not the
// other fails here.
func TestSchemaMatchesSQLite(t *testing.T) {
	ctx := context.Background()
	want := sqliteColumns(t)
	s := open(t, server.URL(t))
	rows, err := s.w.Query(ctx, `SELECT table_name, column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name <> 'agent2env_migrations'
		AND NOT table_name = ANY($1)`, sharedOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := columns(t, rows)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tables and columns, sqlite (-) and postgres (+):\n%s", diff)
	}
}

// sqliteColumns applies the sqlite store's migrations to a database in
// memory and returns its tables' columns, sorted.
func sqliteColumns(t *testing.T) map[string][]string {
	t.Helper()
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	files, err := filepath.Glob("../sqlite/migrations/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("the sqlite store's migrations: %v, %v", files, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(string(b)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	rows, err := db.Query(`SELECT m.name, c.name FROM sqlite_master m, pragma_table_info(m.name) c
		WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	return columns(t, rows)
}

// columns reads rows of (table, column) into each table's sorted columns.
func columns(t *testing.T, rows interface {
	Next() bool
	Scan(...any) error
}) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for rows.Next() {
		var table, col string
		if err := rows.Scan(&table, &col); err != nil {
			t.Fatal(err)
		}
		out[table] = append(out[table], col)
	}
	for _, cols := range out {
		slices.Sort(cols)
	}
	return out
}

// A role that may use the tables but not create any opens a database
// already migrated: the start needs no right to change the schema.
func TestOpenWithoutCreateRight(t *testing.T) {
	ctx := context.Background()
	dbURL := server.URL(t)
	s := open(t, dbURL)
	schema := strings.TrimPrefix(dbURL[strings.Index(dbURL, "search_path="):], "search_path=")
	for _, q := range []string{
		`CREATE ROLE ` + schema + `_user LOGIN`,
		`GRANT USAGE ON SCHEMA ` + schema + ` TO ` + schema + `_user`,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ` + schema + ` TO ` + schema + `_user`,
		`GRANT USAGE ON ALL SEQUENCES IN SCHEMA ` + schema + ` TO ` + schema + `_user`,
	} {
		if _, err := s.w.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		s.w.Exec(ctx, `DROP OWNED BY `+schema+`_user`)
		s.w.Exec(ctx, `DROP ROLE `+schema+`_user`)
	})
	limited, err := Open(ctx, strings.Replace(dbURL, "user=postgres", "user="+schema+"_user", 1))
	if err != nil {
		t.Fatalf("open as a role without the right to create: %v", err)
	}
	defer limited.Close()
	if err := limited.CreateSandbox(ctx, sandbox("sb")); err != nil {
		t.Errorf("create a sandbox as that role: %v", err)
	}
}

// TestOpenOtherMigrations refuses a database whose applied migrations are
// not this binary's by name (a branch's build numbered its steps
// otherwise, as the shared29 branch did before main renumbered them), and
// opens one migrated by this binary.
func TestOpenOtherMigrations(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		rename string // the name given to migration 4, "" for none
		want   string // error text; "" to open
	}{
		{"as migrated", "", ""},
		{"another build's step 4", "0004_llm_bodies.sql", "database migration 4 is 0004_llm_bodies.sql where this binary's is " + schema[3].name},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dbURL := server.URL(t)
			s := open(t, dbURL)
			if tc.rename != "" {
				if _, err := s.w.Exec(ctx, `UPDATE agent2env_migrations SET name = $1 WHERE version = 4`, tc.rename); err != nil {
					t.Fatal(err)
				}
			}
			s2, err := Open(ctx, dbURL)
			if err == nil {
				s2.Close()
			}
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("open: %v; want %q", err, tc.want)
			}
		})
	}
}

// Migration 9 cuts a history longer than store.MaxEvents to its newest
// events and counts the others dropped.
func TestMigrateEventDrops(t *testing.T) {
	ctx := context.Background()
	dbURL := server.URL(t)
	db, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := migrate(ctx, db, schema[:8]); err != nil {
		t.Fatal(err)
	}
	histories := map[string]int{"long": store.MaxEvents + 3, "full": store.MaxEvents, "short": 2}
	for id, n := range histories {
		if _, err := db.Exec(ctx, `INSERT INTO sandboxes (id, image, cpu, memory, ttl, status, runtime, created_at, updated_at)
			VALUES ($1, 'alpine', '1', '1Gi', 0, 'running', 'oci', now(), now())`, id); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, `INSERT INTO events (sandbox_id, at, status, message)
			SELECT $1, now(), 'running', i::text FROM generate_series(0, $2 - 1) AS i`, id, n); err != nil {
			t.Fatal(err)
		}
	}
	s := open(t, dbURL)
	storetest.CheckEventsCut(t, s, histories)
}
