package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/store"
	"github.com/agent2env/agent2env/internal/store/storetest"
)

// openRaw opens path with the driver alone, as an older binary would have.
func openRaw(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

// schema returns what sqlite_master says of the database, with runs of
// white space made one space (the statements of versions 1 to 5 were
// indented as Go strings), and its version.
func schema(t *testing.T, db *sql.DB) ([]string, int) {
	t.Helper()
	rows, err := db.Query(`SELECT type || ' ' || name || ' ' || IFNULL(sql, '') FROM sqlite_master ORDER BY type, name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	space := regexp.MustCompile(`\s+`)
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, space.ReplaceAllString(s, " "))
	}
	var v int
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return out, v
}

// loadV5 makes a database as the daemon made them at schema version 5,
// with records in it.
func loadV5(t *testing.T) string {
	t.Helper()
	fixture, err := os.ReadFile("testdata/v5.sql")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "state.db")
	db := openRaw(t, path)
	if _, err := db.Exec(string(fixture)); err != nil {
		t.Fatalf("load fixture: %v", err)
	}
	db.Close()
	return path
}

// A database of version 5 (what every daemon before versioned migration
// files made) opens, upgrades, and keeps every record.
func TestMigrateFromV5(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, loadV5(t))
	if err != nil {
		t.Fatalf("open a version 5 database: %v", err)
	}
	defer s.Close()

	at := func(sec, us int64) time.Time { return time.Unix(sec, us*1000).UTC() }
	exp := at(1700003600, 0)
	sandboxes, err := s.ListSandboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantSandboxes := []*store.Sandbox{
		{ID: "sbold1", Image: "agent2env/python", CPU: "1", Memory: "1Gi", TTL: 3600, Env: map[string]string{"A": "1"},
			Status: "running", Reason: "agent ready", Runtime: "oci", CreatedAt: at(1700000000, 0), UpdatedAt: at(1700000001, 0),
			ExpiresAt: &exp, AccessToken: "tok1", ManagedBy: "sessions"},
		{ID: "sbold2", Image: "agent2env/node", Template: "web", TemplateVersion: 2, CPU: "500m", Memory: "512Mi",
			Env: map[string]string{}, Status: "failed", Reason: "start sandbox: boom", Runtime: "oci",
			CreatedAt: at(1700000002, 0), UpdatedAt: at(1700000003, 0), AccessToken: "tok2", Spec: []byte(`{"startup":{}}`)},
		{ID: "sbpool", Image: "agent2env/python", CPU: "1", Memory: "1Gi", Status: "running", Runtime: "oci",
			CreatedAt: at(1700000004, 0), UpdatedAt: at(1700000004, 0), AccessToken: "tok3", Pool: "python"},
	}
	if diff := cmp.Diff(wantSandboxes, sandboxes); diff != "" {
		t.Errorf("sandboxes (-want +got):\n%s", diff)
	}
	events, _, err := s.Events(ctx, "sbold1")
	if err != nil || len(events) != 2 || events[1].Message != "agent ready" {
		t.Errorf("events = %+v, %v", events, err)
	}
	tpl, err := s.GetTemplate(ctx, "web")
	if err != nil || tpl.LatestVersion != 2 || tpl.Spec.TTL != 60 || !cmp.Equal(tpl.Tags, []string{"node"}) {
		t.Errorf("template = %+v, %v", tpl, err)
	}
	versions, err := s.ListTemplateVersions(ctx, "web")
	if err != nil || len(versions) != 2 || !cmp.Equal(versions[1].Spec, api.TemplateSpec{Image: "agent2env/node"}) {
		t.Errorf("template versions = %+v, %v", versions, err)
	}
	pp, err := s.GetPrepull(ctx, "pp-00000001")
	if err != nil || pp.Status != "completed" || pp.CompletedAt == nil {
		t.Errorf("prepull = %+v, %v", pp, err)
	}
	// The session the context named is a record of its own, which owns
	// the sandbox the context owned (version 7).
	c, err := s.GetContext(ctx, "ctx-old")
	if err != nil || c.SandboxID != "sbold1" || c.ExecutionCount != 4 || c.OwnsSandbox || c.SessionKey != "/sess" {
		t.Errorf("context = %+v, %v", c, err)
	}
	wantSession := &store.Session{Key: "/sess", ID: "sess", SandboxID: "sbold1", OwnsSandbox: true, CPU: "1", Memory: "1Gi",
		Image: "agent2env/python", CreatedAt: at(1700000001, 0), LastUsedAt: at(1700000002, 0),
		ExpiresAt: at(1700000002+1800, 0), ExecutionCount: 4}
	if sess, err := s.GetSession(ctx, "/sess"); err != nil || !cmp.Equal(wantSession, sess) {
		t.Errorf("session = %+v, %v; want %+v", sess, err, wantSession)
	}
	counts, err := s.CountSandboxesByStatus(ctx)
	if want := (store.SandboxCounts{ByStatus: map[string]int{"running": 1, "failed": 1}, Pooled: 1}); err != nil || !cmp.Equal(want, counts) {
		t.Errorf("counts = %+v, %v; want %+v", counts, err, want)
	}
	// The upgraded database is writable, cascades included.
	if err := s.DeleteSandbox(ctx, "sbold1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetContext(ctx, "ctx-old"); err == nil {
		t.Error("context outlived its sandbox after the upgrade")
	}
}

// Upgrading an old database gives the schema a new one gets.
func TestUpgradeMatchesFresh(t *testing.T) {
	ctx := context.Background()
	upgraded := loadV5(t)
	fresh := filepath.Join(t.TempDir(), "fresh.db")
	for _, path := range []string{upgraded, fresh} {
		s, err := Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	gotSchema, gotVersion := schema(t, openRaw(t, upgraded))
	wantSchema, wantVersion := schema(t, openRaw(t, fresh))
	if diff := cmp.Diff(wantSchema, gotSchema); diff != "" {
		t.Errorf("upgraded schema (-fresh +upgraded):\n%s", diff)
	}
	ms, _ := loadMigrations(migrationFiles, "migrations")
	if gotVersion != len(ms) || wantVersion != len(ms) {
		t.Errorf("versions: upgraded %d, fresh %d; want %d", gotVersion, wantVersion, len(ms))
	}
}

// A database from a newer binary is refused, not damaged.
func TestNewerSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db := openRaw(t, path)
	if _, err := db.Exec(`PRAGMA user_version = 999`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if s, err := Open(context.Background(), path); err == nil || !strings.Contains(err.Error(), "newer") {
		if s != nil {
			s.Close()
		}
		t.Fatalf("open a version 999 database: %v, want refused as newer", err)
	}
}

// A failing migration leaves the database at the version before it.
func TestMigrationFailureRollsBack(t *testing.T) {
	ctx := context.Background()
	db := openRaw(t, filepath.Join(t.TempDir(), "state.db"))
	ms := []migration{
		{version: 1, name: "0001_a.sql", sql: `CREATE TABLE a (x);`},
		{version: 2, name: "0002_b.sql", sql: `CREATE TABLE b (x); CREATE TABLE a (y);`},
	}
	if err := migrate(ctx, db, ms); err == nil || !strings.Contains(err.Error(), "0002_b.sql") {
		t.Fatalf("migrate = %v, want the failure of 0002_b.sql", err)
	}
	got, version := schema(t, db)
	if version != 1 || !cmp.Equal(got, []string{"table a CREATE TABLE a (x)"}) {
		t.Errorf("after the failure: version %d, schema %q; want version 1 with table a alone", version, got)
	}
}

func TestLoadMigrations(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	tests := []struct {
		name    string
		files   fstest.MapFS
		want    []string
		wantErr string
	}{
		{"in order", fstest.MapFS{"m/0002_b.sql": file("B"), "m/0001_a.sql": file("A"), "m/README": file("")},
			[]string{"0001_a.sql", "0002_b.sql"}, ""},
		{"none", fstest.MapFS{}, []string{}, ""},
		{"gap", fstest.MapFS{"m/0001_a.sql": file("A"), "m/0003_c.sql": file("C")}, nil, "want version 2"},
		{"duplicate", fstest.MapFS{"m/0001_a.sql": file("A"), "m/0001_b.sql": file("B")}, nil, "want version 2"},
		{"not from 1", fstest.MapFS{"m/0002_b.sql": file("B")}, nil, "want version 1"},
		{"bad name", fstest.MapFS{"m/1_a.sql": file("A")}, nil, "NNNN_what.sql"},
		{"no name", fstest.MapFS{"m/0001.sql": file("A")}, nil, "NNNN_what.sql"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, err := loadMigrations(tt.files, "m")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			names := []string{}
			for i, m := range ms {
				names = append(names, m.name)
				if m.version != i+1 {
					t.Errorf("%s has version %d, want %d", m.name, m.version, i+1)
				}
			}
			if diff := cmp.Diff(tt.want, names); diff != "" {
				t.Errorf("names (-want +got):\n%s", diff)
			}
		})
	}
	// The binary's own migrations load.
	if ms, err := loadMigrations(migrationFiles, "migrations"); err != nil || len(ms) < 6 {
		t.Errorf("embedded migrations = %d, %v", len(ms), err)
	}
}

// Migration 19 cuts a history longer than store.MaxEvents to its newest
// events and counts the others dropped.
func TestMigrateEventDrops(t *testing.T) {
	ctx := context.Background()
	ms, err := loadMigrations(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "state.db")
	db := openRaw(t, path)
	if err := migrate(ctx, db, ms[:18]); err != nil {
		t.Fatal(err)
	}
	histories := map[string]int{"long": store.MaxEvents + 3, "full": store.MaxEvents, "short": 2}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for id, n := range histories {
		if _, err := tx.Exec(`INSERT INTO sandboxes (id, image, cpu, memory, ttl, status, runtime, created_at, updated_at)
			VALUES (?, 'alpine', '1', '1Gi', 0, 'running', 'oci', 0, 0)`, id); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if _, err := tx.Exec(`INSERT INTO events (sandbox_id, at, status, message) VALUES (?, 0, 'running', ?)`, id, fmt.Sprint(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.CheckEventsCut(t, s, histories)
}
