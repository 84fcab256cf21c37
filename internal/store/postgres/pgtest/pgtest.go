// Package pgtest starts throwaway PostgreSQL servers for tests and
// benchmarks, from the server binaries of Debian's postgresql package
// (initdb and postgres; scripts/deps.sh --tests installs it).
//
// A server lives in a private temporary directory: its data directory and
// its unix socket, with no TCP listener, so that servers of concurrent
// test binaries never meet. The server refuses to run as root: a root
// caller runs it as the user postgres (or nobody). It keeps nothing
// across a crash (fsync off), which tests do not need, and it goes when
// its starter's process does (SIGQUIT, its immediate shutdown, as
// parent-death signal).
//
// Shared is the way a package's tests use one server: started by the
// first test that asks, a new schema for each test, stopped after the
// tests.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agent2env/agent2env/internal/testenv"
)

// ErrNotInstalled says the server's binaries were not found.
var ErrNotInstalled = errors.New("PostgreSQL's server (initdb, postgres) is not installed: " +
	"install Debian's postgresql package (scripts/deps.sh --tests)")

// port is the server's port, which only names its socket file: the
// server listens on no TCP address.
const port = 5432

// Server is a running throwaway server. Its methods are safe for
// concurrent use.
type Server struct {
	dir    string // private: the data directory and the socket
	cmd    *exec.Cmd
	exited <-chan struct{} // closed when the server process has ended
	admin  *pgxpool.Pool   // the database postgres, to make others
	n      atomic.Int64    // databases made
}

// Start initializes a data directory in a new temporary directory and
// starts a server on it; it returns once the server accepts connections.
// ErrNotInstalled when the binaries are missing.
func Start(ctx context.Context) (_ *Server, err error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	cred, err := serverUser()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "agent2env-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("give %s to the server's user: %w", dir, err)
		}
	}
	data := filepath.Join(dir, "data")
	initdb := s.command(ctx, cred, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C.UTF-8", "--no-sync", "--no-instructions")
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w: %s", err, out)
	}
	log, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	defer log.Close() // the server has its own descriptor
	// Started without ctx: the server outlives the start.
	s.cmd = s.command(context.Background(), cred, filepath.Join(bin, "postgres"), "-D", data, "-k", dir,
		"-p", strconv.Itoa(port), "-c", "listen_addresses=", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=300", "-c", "shared_buffers=32MB")
	s.cmd.Stdout, s.cmd.Stderr = log, log
	// Killed with the test binary, should that die without stopping it.
	if s.exited, err = testenv.StartBound(s.cmd, syscall.SIGQUIT); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	if s.admin, err = s.waitReady(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// binDir is the directory of the newest installed server's binaries:
// Debian keeps them in /usr/lib/postgresql/<major>/bin, off PATH.
func binDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return majorOf(b) - majorOf(a) })
	for _, d := range dirs {
		if isFile(filepath.Join(d, "initdb")) && isFile(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil && isFile(filepath.Join(filepath.Dir(p), "postgres")) {
		return filepath.Dir(p), nil
	}
	return "", ErrNotInstalled
}

// majorOf is the major version in /usr/lib/postgresql/<major>/bin.
func majorOf(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// serverUser is the user the server runs as: nil (the caller) unless the
// caller is root, which PostgreSQL refuses; then postgres, the user
// Debian's package makes, else nobody. Not nobody first: other tests run
// their commands as nobody, and a kill(-1) by one of those would reach the
// server.
func serverUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	var errs []error
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, fmt.Errorf("PostgreSQL refuses to run as root, and there is no user postgres or nobody to run it as: %w", errors.Join(errs...))
}

// command is name with args as the server's user, in the server's
// directory.
func (s *Server) command(ctx context.Context, cred *syscall.Credential, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = s.dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C.UTF-8"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	return cmd
}

// waitReady connects to the database postgres until the server answers,
// for up to 30 s; it fails at once if the server exits.
func (s *Server) waitReady(ctx context.Context) (*pgxpool.Pool, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		c, err := pgx.Connect(ctx, s.URL("postgres"))
		if err == nil {
			c.Close(ctx)
			return pgxpool.New(ctx, s.URL("postgres"))
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("postgres exited: %s", s.logTail())
		case <-ctx.Done():
			return nil, fmt.Errorf("postgres did not accept connections: %w: %s", err, s.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// logTail is the end of the server's log, for errors.
func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// URL is the URL of database db on the server, as the superuser
// postgres.
func (s *Server) URL(db string) string {
	q := url.Values{"host": {s.dir}, "port": {strconv.Itoa(port)}, "user": {"postgres"}}
	return "postgres:///" + url.PathEscape(db) + "?" + q.Encode()
}

// CreateDatabase makes a new empty database and returns its name and URL.
func (s *Server) CreateDatabase(ctx context.Context) (name, dbURL string, err error) {
	name = fmt.Sprintf("test%d", s.n.Add(1))
	if _, err := s.admin.Exec(ctx, `CREATE DATABASE `+name); err != nil {
		return "", "", fmt.Errorf("create database %s: %w", name, err)
	}
	return name, s.URL(name), nil
}

// DropDatabase drops database name, closing its connections.
func (s *Server) DropDatabase(ctx context.Context, name string) error {
	if _, err := s.admin.Exec(ctx, `DROP DATABASE `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// Stop shuts the server down (fast: open sessions are ended) and removes
// its directory. It waits up to 10 s, then kills the server.
func (s *Server) Stop() error {
	if s.admin != nil {
		s.admin.Close()
	}
	var err error
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			s.cmd.Process.Kill()
			<-s.exited
			err = errors.New("postgres did not stop within 10 s: killed")
		}
	}
	return errors.Join(err, os.RemoveAll(s.dir))
}

// Shared is one server for the tests of a package, started by the first
// test that asks for it and stopped after the tests by Run, from TestMain. The zero
// value is ready to use, and it is safe for concurrent use.
type Shared struct {
	once sync.Once
	srv  *Server
	err  error
	n    atomic.Int64 // schemas made
}

// Server returns the server, started on the first call. Without the
// server's binaries t stops as testenv.Missing says: under CI it fails.
func (sh *Shared) Server(t testing.TB) *Server {
	t.Helper()
	sh.once.Do(func() { sh.srv, sh.err = Start(context.Background()) })
	if errors.Is(sh.err, ErrNotInstalled) {
		testenv.Missing(t, "%v", sh.err)
	}
	if sh.err != nil {
		t.Fatalf("start a PostgreSQL server: %v", sh.err)
	}
	return sh.srv
}

// URL returns the URL of a new empty schema of the database postgres,
// which the URL makes its connections' search_path: a store opened on it
// makes its tables there and sees no other test's. The schema is dropped
// when t ends. (A schema costs a millisecond, a database a tenth of a
// second to make and as much to drop.)
func (sh *Shared) URL(t testing.TB) string {
	t.Helper()
	srv := sh.Server(t)
	name := fmt.Sprintf("test%d", sh.n.Add(1))
	ctx := context.Background()
	if _, err := srv.admin.Exec(ctx, `CREATE SCHEMA `+name); err != nil {
		t.Fatalf("create schema %s: %v", name, err)
	}
	t.Cleanup(func() {
		if _, err := srv.admin.Exec(ctx, `DROP SCHEMA `+name+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return srv.URL("postgres") + "&search_path=" + name
}

// Run runs the tests of m and then stops the server, if one was started:
// TestMain's os.Exit(server.Run(m)). A server that does not stop cleanly
// fails the run.
func (sh *Shared) Run(m *testing.M) int {
	code := m.Run()
	if sh.srv != nil {
		if err := sh.srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest: stop the PostgreSQL server:", err)
			code = 1
		}
	}
	return code
}
