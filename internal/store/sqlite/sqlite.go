// Package sqlite is the embedded store backend: one SQLite file, written
// through modernc.org/sqlite (pure Go, so the binary stays static).
//
// The database is in WAL mode: one writer connection takes every write
// (SQLite allows one writer at a time, and one connection keeps write
// transactions from failing on each other's locks), while a pool of
// read-only connections answers reads beside it, each from the last
// committed state. The sandbox writes, several per create, queue for the
// writer in a batcher that commits those waiting together (group commit). The schema's versions are the files in migrations/
// (NNNN_what.sql: a new table or column is one new file), applied in order
// when the database is opened.
package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"runtime"

	"github.com/agent2env/agent2env/internal/store"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Store is a store.Store on one SQLite database file. It is safe for
// concurrent use.
type Store struct {
	w *sql.DB // the one writer connection: writes and read-modify-writes
	r *sql.DB // read-only connections; the writer itself when in memory
	// b groups the sandbox writes (records and their events, the writes
	// of every create) that wait for w into shared transactions.
	b *batcher
}

var _ store.Store = (*Store)(nil)

// busyTimeout is how long a connection waits for a lock another process
// (or a checkpoint) holds before it fails with SQLITE_BUSY.
const busyTimeout = "_pragma=busy_timeout(10000)"

// Open opens (creating if needed) the database at path and brings its
// schema up to date. The path ":memory:" opens a private in-memory
// database, served by the writer connection alone.
func Open(ctx context.Context, path string) (*Store, error) {
	ms, err := loadMigrations(migrationFiles, "migrations")
	if err != nil {
		return nil, fmt.Errorf("load schema migrations: %w", err)
	}
	// The pragmas hold per connection, so they are in the DSN, which the
	// driver applies to every connection it opens. foreign_keys: SQLite
	// leaves them off by default, and records go with their sandbox by ON
	// DELETE CASCADE. synchronous(NORMAL): in WAL mode a commit survives
	// the daemon's crash or SIGKILL and only a power loss may take the
	// last ones back, never corrupting the file; FULL would fsync every
	// commit. _txlock=immediate: BEGIN IMMEDIATE takes the write lock when
	// the transaction starts, so a read-then-write transaction never fails
	// with SQLITE_BUSY when it comes to write (another process, such as a
	// second daemon, may hold the file).
	w, err := sql.Open("sqlite", "file:"+path+"?"+busyTimeout+
		"&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	// One connection, kept for good: every write queues for it in
	// database/sql instead of failing on SQLite's lock, and ":memory:"
	// lives only as long as its connection.
	w.SetMaxOpenConns(1)
	w.SetConnMaxIdleTime(0)
	w.SetConnMaxLifetime(0)
	if err := migrate(ctx, w, ms); err != nil {
		w.Close()
		return nil, fmt.Errorf("migrate database %s: %w", path, err)
	}
	s := &Store{w: w, r: w, b: newBatcher(w)}
	if path == ":memory:" {
		return s, nil // another connection would be another database
	}
	// Readers are opened once the writer has made the file and its WAL
	// (a read-only connection cannot create them). In WAL mode they read
	// the last committed state without waiting for the writer, and, read
	// only twice over (mode=ro, query_only), none of them can take the
	// write lock by mistake.
	r, err := sql.Open("sqlite", "file:"+path+"?mode=ro&"+busyTimeout+"&_pragma=query_only(1)")
	if err != nil {
		s.b.close()
		w.Close()
		return nil, fmt.Errorf("open database %s for reading: %w", path, err)
	}
	// As many readers as CPUs can run at once (at least four), so that
	// reads queue only when the CPUs are busy anyway; idle ones stay open.
	n := max(4, runtime.GOMAXPROCS(0))
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	if err := r.PingContext(ctx); err != nil {
		r.Close()
		s.b.close()
		w.Close()
		return nil, fmt.Errorf("open database %s for reading: %w", path, err)
	}
	s.r = r
	return s, nil
}

// Ping checks that the database answers, through a reader: the daemon's
// readiness check.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.r.PingContext(ctx); err != nil {
		return fmt.Errorf("sqlite store: %w", err)
	}
	return nil
}

// Close closes the database: the readers, then the writer, whose close
// checkpoints the WAL into the database file, once the batch of writes
// under way is committed.
func (s *Store) Close() error {
	s.b.close()
	var err error
	if s.r != s.w {
		err = s.r.Close()
	}
	if werr := s.w.Close(); werr != nil {
		err = werr
	}
	return err
}
