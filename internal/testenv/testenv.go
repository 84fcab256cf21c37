// Package testenv is what tests know of the machine they run on, and the
// one way a test meets a prerequisite it lacks.
//
// A test that needs something make test provides (root, a built image,
// the Kubernetes binaries, the agent CLIs, the stock clients) calls
// [Missing] when it is not there: on a developer's machine the test is
// skipped with what to do, under CI it fails, so that a broken install
// cannot turn a gate into a quiet skip. A test that cannot run on some
// hosts whatever is installed (another CPU architecture, a cgroup layout,
// a runtime without a capability) calls [Skip], which skips under CI too
// but keeps the reason where CI prints it.
//
// CI is on when the environment variable CI is set to anything but "",
// "0" or "false": CI=true, CI=1 and CI=yes all count. .ci/run sets
// CI=true; the Python SDK's integration tests read CI the same way.
//
// The functions are safe for concurrent use by parallel tests. [Buffer]
// holds what goroutines write while a test reads it (a daemon's log).
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// SkipLogEnv names a file to which [Skip], under CI, appends one line per
// skipped test: make test sets it and prints the file at the end, since
// go test shows no skip of a package that passes.
const SkipLogEnv = "AGENT2ENV_SKIP_LOG"

// CI reports whether the tests run under continuous integration: the
// environment variable CI is set to anything but "", "0" or "false" (in
// any case, spaces around ignored).
func CI() bool {
	return IsCI(os.Getenv("CI"))
}

// IsCI reports whether v, a value of the CI environment variable, turns
// CI on.
func IsCI(v string) bool {
	v = strings.TrimSpace(v)
	return v != "" && v != "0" && !strings.EqualFold(v, "false")
}

// Missing stops t for a prerequisite it lacks. The message says what is
// missing and how to get it; under CI the test fails with it, elsewhere
// it is skipped. It does not return.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if CI() {
		t.Fatalf("%s (CI=%s: under CI a missing prerequisite is a failure; make test provides it)", msg, os.Getenv("CI"))
	}
	t.Skip(msg)
}

// RequireRoot stops t, as [Missing] does, unless it runs as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "this test needs root: run go test as root")
	}
}

// Skip skips t for a reason no install can change: the host or the code
// under test cannot do what the test checks. Under CI the reason also goes
// to the file $AGENT2ENV_SKIP_LOG, when set. It does not return.
func Skip(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if CI() {
		logSkip(t.Name(), msg)
	}
	t.Skip(msg)
}

var skipLogMu sync.Mutex

// logSkip appends "package test: reason" to $AGENT2ENV_SKIP_LOG. Each
// line is one write to a file opened for appending, so the test binaries
// of several packages can share the file.
func logSkip(name, msg string) {
	path := os.Getenv(SkipLogEnv)
	if path == "" {
		return
	}
	skipLogMu.Lock()
	defer skipLogMu.Unlock()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %s: %v\n", SkipLogEnv, err)
		return
	}
	defer f.Close()
	line := strings.ReplaceAll(msg, "\n", " ")
	if _, err := fmt.Fprintf(f, "%s %s: %s\n", packageDir(), name, line); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %s: %v\n", SkipLogEnv, err)
	}
}

// packageDir is the directory of the package under test relative to its
// module's root (go test runs a test binary in its package's directory),
// or the directory itself when no go.mod is found above it.
func packageDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "?"
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if rel, err := filepath.Rel(dir, wd); err == nil {
				return "./" + filepath.ToSlash(rel)
			}
			return wd
		}
		if filepath.Dir(dir) == dir {
			return wd
		}
	}
}

// StockClients returns the paths of the stock clients that
// scripts/test-peers.sh installed, by the names of its clients.env
// (NODE_BIN, E2B_JS, ...): the file AGENT2ENV_CLIENTS names (make test
// sets it to this checkout's), else the last run's on the machine,
// whichever checkout ran it. Without one it stops t as [Missing] does.
func StockClients(t testing.TB) map[string]string {
	t.Helper()
	path := os.Getenv("AGENT2ENV_CLIENTS")
	if path == "" {
		cache := os.Getenv("AGENT2ENV_CACHE_DIR")
		if cache == "" {
			cache = "/var/cache/agent2env"
		}
		path = filepath.Join(cache, "peers", "clients.env")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		Missing(t, "the stock clients are not installed: run scripts/test-peers.sh, as make test does (%v)", err)
	}
	env := map[string]string{}
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(strings.TrimRight(line, "\n"), "="); ok {
			env[k] = v
		}
	}
	return env
}
