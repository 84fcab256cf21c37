package cli

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
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
	for _, tc := range []struct{ setting, cache, want string }{
		{"off", cache, ""},
		{"auto", cache, newest},
		{"auto", empty, ""},
		{"/opt/criu", cache, "/opt/criu"},
	} {
		if got := resolveCRIU(tc.setting, tc.cache, log); got != tc.want {
			t.Errorf("resolveCRIU(%q, %s) = %q; want %q", tc.setting, tc.cache, got, tc.want)
		}
	}
}
