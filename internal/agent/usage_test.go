package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agent2env/agent2env/internal/errdefs"
)

func TestDiskUsage(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, size int) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("a", 1<<20)
	big := write("sub/b", 2<<20)
	if err := os.Link(big, filepath.Join(dir, "sub", "b-link")); err != nil {
		t.Fatal(err)
	}
	got, err := diskUsage([]string{dir, filepath.Join(dir, "sub"), filepath.Join(dir, "missing")}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	// 3 MiB of data, each file once however often it is reached, plus
	// the directories' own blocks.
	if got < 3<<20 || got > 3<<20+64<<10 {
		t.Errorf("disk usage = %d, want 3 MiB and the directories", got)
	}
	partial, err := diskUsage([]string{dir}, 2)
	if err != nil || partial >= got {
		t.Errorf("disk usage bounded to 2 entries = %d, %v; want less than %d", partial, err, got)
	}
}

func TestUsageBadPath(t *testing.T) {
	c, _ := startAgent(t)
	_, err := c.Usage(context.Background(), "bad\x00path")
	if !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Usage with a NUL in a path = %v, want ErrInvalidArgument", err)
	}
}

func TestDiskCache(t *testing.T) {
	var c diskCache
	walks := 0
	walk := func() (uint64, error) { walks++; return uint64(walks), nil }
	for _, tc := range []struct {
		dirs      []string
		want      uint64
		wantWalks int
	}{
		{[]string{"/a"}, 1, 1},
		{[]string{"/a"}, 1, 1},       // fresh: answered again
		{[]string{"/a", "/b"}, 2, 2}, // other directories: walked
		{[]string{"/a", "/b"}, 2, 2},
	} {
		if got, err := c.get(tc.dirs, walk); err != nil || got != tc.want || walks != tc.wantWalks {
			t.Errorf("get(%q) = %d, %v after %d walks; want %d after %d", tc.dirs, got, err, walks, tc.want, tc.wantWalks)
		}
	}
	c.at = c.at.Add(-diskFresh)
	if got, _ := c.get([]string{"/a", "/b"}, walk); got != 3 {
		t.Errorf("get after diskFresh = %d, want a new walk", got)
	}
}
