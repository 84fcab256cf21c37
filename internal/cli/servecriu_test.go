package cli

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestResolveCRIU(t *testing.T) {
	cache, empty := t.TempDir(), t.TempDir()
	var newest string
	for i, v := range []string{"4.1.0-aa", "4.1.1-bb"} {
		dir := filepath.Join(cache, "criu-"+v)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		newest = filepath.Join(dir, "criu")
		if err := os.WriteFile(newest, nil, 0o755); err != nil {
			t.Fatal(err)
		}
		at := time.Now().Add(time.Duration(i-2) * time.Hour)
		if err := os.Chtimes(newest, at, at); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", empty)
	log := slog.New(slog.DiscardHandler)
	lock := filepath.Join(filepath.Dir(newest), ".lock")
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		setting, cache, want string
		holds                bool // the cache entry's lock, until release
	}{
		{"off", cache, "", false},
		{"auto", cache, newest, true},
		{"auto", empty, "", false},
		{"/opt/criu", cache, "/opt/criu", false},
	} {
		got, release := resolveCRIU(tc.setting, tc.cache, log)
		if got != tc.want {
			t.Errorf("resolveCRIU(%q, %s) = %q; want %q", tc.setting, tc.cache, got, tc.want)
		}
		if held := !lockable(t, lock); held != tc.holds {
			t.Errorf("resolveCRIU(%q, %s): the entry's lock held %v; want %v", tc.setting, tc.cache, held, tc.holds)
		}
		release()
		if !lockable(t, lock) {
			t.Errorf("resolveCRIU(%q, %s): the entry's lock still held after release", tc.setting, tc.cache)
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
