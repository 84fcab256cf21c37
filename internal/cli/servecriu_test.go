package cli

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestResolveCached resolves serve's --criu and --runtime against a cache
// holding two criu builds and a crun build, and an empty one, with
// nothing on PATH.
func TestResolveCached(t *testing.T) {
	cache, empty := t.TempDir(), t.TempDir()
	entry := func(name string, age time.Duration) (path, lock string) {
		dir := filepath.Join(cache, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		path, lock = filepath.Join(dir, strings.Split(name, "-")[0]), filepath.Join(dir, ".lock")
		for _, f := range []string{path, lock} {
			if err := os.WriteFile(f, nil, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		at := time.Now().Add(-age)
		if err := os.Chtimes(path, at, at); err != nil {
			t.Fatal(err)
		}
		return path, lock
	}
	entry("criu-4.1.0-aa", 2*time.Hour)
	criu, criuLock := entry("criu-4.1.1-bb", time.Hour)
	crun, crunLock := entry("crun-1.21-cc", time.Hour)
	t.Setenv("PATH", empty)
	log := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		resolve              func(setting, cacheDir string, log *slog.Logger) (string, func())
		setting, cache, want string
		lock                 string // the cache entry's, held until release; "" none
	}{
		{resolveCRIU, "off", cache, "", ""},
		{resolveCRIU, "auto", cache, criu, criuLock},
		{resolveCRIU, "auto", empty, "", ""},
		{resolveCRIU, "/opt/criu", cache, "/opt/criu", ""},
		{resolveOCIBinary, "auto", cache, crun, crunLock},
		{resolveOCIBinary, "crun", cache, crun, crunLock},
		{resolveOCIBinary, "runc", cache, "runc", ""},
		{resolveOCIBinary, "/opt/crun", cache, "/opt/crun", ""},
		{resolveOCIBinary, "auto", empty, "runc", ""},
		{resolveOCIBinary, "crun", empty, "crun", ""},
	} {
		got, release := tc.resolve(tc.setting, tc.cache, log)
		if got != tc.want {
			t.Errorf("%q, %s resolves to %q; want %q", tc.setting, tc.cache, got, tc.want)
		}
		for _, lock := range []string{criuLock, crunLock} {
			if held := !lockable(t, lock); held != (lock == tc.lock) {
				t.Errorf("%q, %s: %s held %v; want %v", tc.setting, tc.cache, lock, held, !held)
			}
		}
		release()
		if tc.lock != "" && !lockable(t, tc.lock) {
			t.Errorf("%q, %s: the entry's lock still held after release", tc.setting, tc.cache)
		}
	}
}

// lockable reports whether lock can be locked exclusively now, as a prune
// of the cache would.
func lockable(t *testing.T, lock string) bool {
	t.Helper()
	f, err := os.Open(lock)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil
}
