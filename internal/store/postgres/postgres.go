// Package postgres is the store backend on a PostgreSQL server, through
// pgx's connection pool, for daemons that share their records (serve
// --store postgres://…).
//
// It keeps what the sqlite store keeps, with the same meaning, and gives
// each method the atomicity the sqlite store's single writer gives it,
// here across every connection and every daemon on the database: a
// read-modify-write locks its row (SELECT … FOR UPDATE) in one
// transaction; the steps that the sqlite store serializes over a whole
// table take a transaction-level advisory lock (locks.go): the bounded
// create's count and insert, and the numbering of ended LLM exchanges.
//
// The schema's versions are the files in migrations/ (NNNN_what.sql),
// applied in order, each in its own transaction, under an advisory lock
// that makes daemons starting at once apply each exactly once
// (migrate.go). Package pgtest starts a throwaway server for tests.
//
// For daemons sharing the store it also gives the leadership lock
// (Leadership, a session-level advisory lock on a connection of its own,
// leader.go), locks by key (KeyLocks: a session or a kernel, session-level
// advisory locks on pooled connections held while locked, keylocks.go),
// runs claimed FOR UPDATE SKIP LOCKED (ClaimRuns), and
// notifications between daemons through LISTEN/NOTIFY (notify.go).
package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

// Store is a store.Store on one PostgreSQL database. It is safe for
// concurrent use, by several processes on the same database too.
//
// It has two pools of connections, as the sqlite store has a writer and
// readers: writes and read-modify-writes take a connection of w, plain
// reads one of r, whose sessions are read-only. An update holds its
// connection while its fn runs, and fn may read the store: from r, which
// no update holds, so that updates waiting on their reads never take
// every connection a read needs.
type Store struct {
	w, r  *pgxpool.Pool
	notes *notifier
	// k holds the connections of the keys locked among daemons
	// (KeyLocks); schema is the store's, which their hashes include.
	k      *pgxpool.Pool
	schema string
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.Notifier = (*Store)(nil)
)

// connectTimeout bounds each connection's setup when the URL sets no
// connect_timeout.
const connectTimeout = 10 * time.Second

// Open connects to the database of url (postgres://user@host/db?…, any
// form pgx takes; its pool settings, such as pool_max_conns, apply to each
// of the two pools), brings its schema up to date and returns the store.
// Errors name the server with the password left out.
func Open(ctx context.Context, url string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's parse errors show the URL with its password masked.
		return nil, fmt.Errorf("postgres store: %w", err)
	}
	where := Redact(url)
	// A server that does not answer fails the start in seconds, not
	// after the system's TCP timeout; connect_timeout in url sets another.
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = connectTimeout
	}
	rcfg := cfg.Copy()
	rcfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	s := &Store{}
	if s.w, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, fmt.Errorf("postgres store %s: %w", where, err)
	}
	if s.r, err = pgxpool.NewWithConfig(ctx, rcfg); err != nil {
		s.w.Close()
		return nil, fmt.Errorf("postgres store %s: %w", where, err)
	}
	kcfg := cfg.Copy()
	kcfg.MaxConns = keyLockConns
	if s.k, err = pgxpool.NewWithConfig(ctx, kcfg); err != nil {
		s.r.Close()
		s.w.Close()
		return nil, fmt.Errorf("postgres store %s: %w", where, err)
	}
	// The pools connect lazily: a server that is not there is found
	// here, at start, rather than by the first request.
	if err := s.w.Ping(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("postgres store %s: connect: %w", where, err)
	}
	if err := migrate(ctx, s.w, schema); err != nil {
		s.Close()
		return nil, fmt.Errorf("postgres store %s: migrate: %w", where, err)
	}
	var current string
	if err := s.w.QueryRow(ctx, `SELECT current_schema()`).Scan(&current); err != nil {
		s.Close()
		return nil, fmt.Errorf("postgres store %s: %w", where, err)
	}
	s.notes, s.schema = newNotifier(s, current), current
	return s, nil
}

// Ping checks that the server answers, on a connection of the read pool
// (a round trip, not just a pooled connection): the daemon's readiness
// check.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.r.Ping(ctx); err != nil {
		return fmt.Errorf("postgres store: %w", err)
	}
	return nil
}

// Close closes the pools' connections, once the ones in use are back.
func (s *Store) Close() error {
	if s.notes != nil {
		s.notes.close()
	}
	s.k.Close()
	s.r.Close()
	s.w.Close()
	return nil
}

// Redact returns the store URL u with its password, if any, replaced by
// "xxxxx", for messages and printed settings; a string that does not
// parse as a URL (a key=value connection string) is returned with every
// password=… value masked.
func Redact(u string) string {
	if p, err := url.Parse(u); err == nil && p.Scheme != "" {
		return p.Redacted()
	}
	fields := strings.Fields(u)
	for i, f := range fields {
		if strings.HasPrefix(f, "password=") {
			fields[i] = "password=xxxxx"
		}
	}
	return strings.Join(fields, " ")
}

// querier is what a pool, a connection and a transaction have in common.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

type scanner interface{ Scan(...any) error }

// The SQLSTATE codes the store classifies.
const (
	codeUnique     = "23505" // unique_violation
	codeForeignKey = "23503" // foreign_key_violation
	codeBadText    = "22021" // character_not_in_repertoire: a NUL byte, or not UTF-8
	codeBadJSON    = "22P05" // untranslatable_character: \u0000 in jsonb
	codeDiskFull   = "53100" // disk_full: the server's file system is full
)

// pgCode returns err's SQLSTATE code and the constraint it names, if err
// is a server's error.
func pgCode(err error) (code, constraint string) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code, pe.ConstraintName
	}
	return "", ""
}

func isUnique(err error) bool {
	code, _ := pgCode(err)
	return code == codeUnique
}

func isForeignKey(err error) bool {
	code, _ := pgCode(err)
	return code == codeForeignKey
}

// Text in PostgreSQL is UTF-8 without NUL bytes, which the sqlite store
// does not ask of strings. A key no text can be names no record
// (validText: the lookups say not found, as the sqlite store does), and a
// record holding such a string is refused as an invalid argument
// (serverErr), where the sqlite store would keep it.

// validText reports whether s can be a text value.
func validText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// serverErr classifies the server's refusals of a query: a string (see
// above) is ErrInvalidArgument, a full disk errdefs.NoSpace (507, not the
// daemon's own failure); other errors are returned as they are.
func serverErr(err error) error {
	switch code, _ := pgCode(err); code {
	case codeBadText, codeBadJSON:
		return errdefs.Invalid("strings must be UTF-8 without NUL bytes: %v", err)
	case codeDiskFull:
		return errdefs.NoSpace(err)
	}
	return err
}

// list reads every row query returns, with scan.
func list[T any](ctx context.Context, q querier, scan func(scanner) (*T, error), query string, args ...any) ([]*T, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, serverErr(err)
	}
	defer rows.Close()
	out := []*T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, serverErr(rows.Err()) // pgx's Query reports the server's errors here
}

// args collects the arguments of a query while its text is built, and
// numbers their placeholders ($1, $2…).
type args []any

// add appends v and returns its placeholder.
func (a *args) add(v any) string {
	*a = append(*a, v)
	return fmt.Sprintf("$%d", len(*a))
}

// pageClause returns the condition (" AND …") and the ORDER BY and LIMIT
// that select page p of a listing ordered by created_at, id (descending
// with p.Desc), adding the condition's arguments to a. It asks for one row
// beyond the page, which tells whether another follows.
func pageClause(p store.Page, a *args) (cond, order string, err error) {
	return pageClauseBy(p, "id", a)
}

// pageClauseBy is pageClause of a listing whose ties of created_at go by
// the column tie (the table's key) rather than id.
func pageClauseBy(p store.Page, tie string, a *args) (cond, order string, err error) {
	cmp, order := ">", ` ORDER BY created_at, `+tie
	if p.Desc {
		cmp, order = "<", ` ORDER BY created_at DESC, `+tie+` DESC`
	}
	if p.After != "" {
		at, id, err := store.ParseCursor(p.After)
		if err != nil {
			return "", "", err
		}
		// A row comparison: with an index on (created_at, id), or on
		// (filter column, created_at, id), the server seeks to the cursor
		// (scanning the index backwards for newest first) rather than
		// skipping rows as an OFFSET would.
		cond = ` AND (created_at, ` + tie + `) ` + cmp + ` (` + a.add(at) + `, ` + a.add(id) + `)`
	}
	if p.Limit > 0 {
		order += fmt.Sprintf(` LIMIT %d`, p.Limit+1)
	}
	return cond, order, nil
}

// cutPage trims the row pageClause asked for beyond the page and returns
// the cursor of the next page, if one follows.
func cutPage[T any](items []*T, p store.Page, key func(*T) (time.Time, string)) ([]*T, string) {
	if p.Limit <= 0 || len(items) <= p.Limit {
		return items, ""
	}
	items = items[:p.Limit]
	return items, store.Cursor(key(items[len(items)-1]))
}

// Times are kept in microseconds, as timestamptz, and read back in UTC.
func micro(t time.Time) time.Time { return t.Truncate(time.Microsecond).UTC() }

func microPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := micro(*t)
	return &v
}

// utcPtr reads a nullable timestamptz as the records hold it.
func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := t.UTC()
	return &v
}

// Durations are kept in microseconds.
func durationOf(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

// bytesOrEmpty keeps nil opaque bytes as an empty bytea (the columns are
// NOT NULL); nilIfEmpty reads an empty one back as nil, as it was given.
func bytesOrEmpty(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}
