package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// nextEvents reads n events of w, failing after 5 s.
func nextEvents(t *testing.T, w *DirWatch, n int) []string {
	t.Helper()
	got := make(chan []string, 1)
	go func() {
		var out []string
		for len(out) < n {
			ev, err := w.Next()
			if err != nil {
				out = append(out, "error "+err.Error())
				break
			}
			out = append(out, ev.Op+" "+ev.Name)
		}
		got <- out
	}()
	select {
	case out := <-got:
		return out
	case <-time.After(5 * time.Second):
		t.Fatalf("fewer than %d events in 5 s", n)
		return nil
	}
}

// TestWatchLink watches a directory through a symbolic link to it, as
// E2B's /home/user is to the home: its changes, named as from the link.
func TestWatchLink(t *testing.T) {
	c, work := startAgent(t)
	dir := filepath.Join(work, "home")
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(work, "user")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	for _, recursive := range []bool{false, true} {
		w, err := c.WatchDir(context.Background(), link, recursive)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"create a.txt"}
		if err := os.WriteFile(filepath.Join(dir, "a.txt"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if recursive {
			want = append(want, "create sub/b.txt")
			if err := os.WriteFile(filepath.Join(link, "sub", "b.txt"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if diff := cmp.Diff(want, nextEvents(t, w, len(want))); diff != "" {
			t.Errorf("recursive %v (-want +got):\n%s", recursive, diff)
		}
		w.Close()
		for _, name := range []string{"a.txt", "sub/b.txt"} {
			if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestWatch watches directories with inotify: files made, written in
// place, uploaded over (a write, the upload's temporary file unseen),
// renamed and removed, and a recursive watch's new subdirectory.
func TestWatch(t *testing.T) {
	c, work := startAgent(t)
	ctx := context.Background()
	defer func(n int) { maxWatchDirs = n }(maxWatchDirs)
	maxWatchDirs = 3 // w, w/sub and w/new; at the end work, w, away, x and x/y are more
	dir := filepath.Join(work, "w")
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "old.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	flat, err := c.WatchDir(ctx, dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer flat.Close()
	deep, err := c.WatchDir(ctx, dir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer deep.Close()
	steps := []struct {
		name       string
		do         func() error
		flat, deep []string
	}{
		{"upload a new file", func() error {
			_, err := c.Upload(ctx, filepath.Join(dir, "a.txt"), 0o644, strings.NewReader("1"))
			return err
		}, []string{"create a.txt"}, []string{"create a.txt"}},
		{"upload over it", func() error {
			_, err := c.Upload(ctx, filepath.Join(dir, "a.txt"), 0o644, strings.NewReader("22"))
			return err
		}, []string{"write a.txt"}, []string{"write a.txt"}},
		{"upload over a file that was there", func() error {
			_, err := c.Upload(ctx, filepath.Join(dir, "old.txt"), 0o644, strings.NewReader("y"))
			return err
		}, []string{"write old.txt"}, []string{"write old.txt"}},
		{"write in place", func() error {
			f, err := os.OpenFile(filepath.Join(dir, "a.txt"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return err
			}
			_, err = f.WriteString("3")
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			return err
		}, []string{"write a.txt"}, []string{"write a.txt"}},
		{"in a subdirectory", func() error {
			return os.WriteFile(filepath.Join(dir, "sub", "b.txt"), nil, 0o644)
		}, nil, []string{"create sub/b.txt"}},
		{"a new subdirectory, then a file in it", func() error {
			if err := os.Mkdir(filepath.Join(dir, "new"), 0o755); err != nil {
				return err
			}
			time.Sleep(100 * time.Millisecond) // the watch adds it
			return os.WriteFile(filepath.Join(dir, "new", "c.txt"), nil, 0o644)
		}, []string{"create new"}, []string{"create new", "create new/c.txt"}},
		{"rename", func() error { return os.Rename(filepath.Join(dir, "a.txt"), filepath.Join(dir, "b.txt")) },
			[]string{"rename a.txt", "create b.txt"}, []string{"rename a.txt", "create b.txt"}},
		{"remove", func() error { return os.Remove(filepath.Join(dir, "b.txt")) },
			[]string{"remove b.txt"}, []string{"remove b.txt"}},
		{"a subdirectory renamed away, then written in", func() error {
			if err := os.Rename(filepath.Join(dir, "new"), filepath.Join(work, "away")); err != nil {
				return err
			}
			time.Sleep(100 * time.Millisecond) // the watch forgets it
			if err := os.WriteFile(filepath.Join(work, "away", "d.txt"), nil, 0o644); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, "e.txt"), nil, 0o644)
		}, []string{"rename new", "create e.txt"}, []string{"rename new", "create e.txt"}},
		{"a subdirectory removed with its file", func() error { return os.RemoveAll(filepath.Join(dir, "sub")) },
			[]string{"remove sub"}, []string{"remove sub/b.txt", "remove sub"}},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if s.flat != nil {
			if diff := cmp.Diff(s.flat, nextEvents(t, flat, len(s.flat))); diff != "" {
				t.Errorf("%s, not recursive (-want +got):\n%s", s.name, diff)
			}
		}
		if diff := cmp.Diff(s.deep, nextEvents(t, deep, len(s.deep))); diff != "" {
			t.Errorf("%s, recursive (-want +got):\n%s", s.name, diff)
		}
	}
	// Closed, a watch ends.
	flat.Close()
	if _, err := flat.Next(); err == nil {
		t.Error("Next after Close: no error")
	}
	if err := os.MkdirAll(filepath.Join(work, "x", "y"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		path      string
		recursive bool
		class     error
	}{
		"missing":             {filepath.Join(work, "nope"), false, errdefs.ErrNotFound},
		"a file":              {filepath.Join(dir, "old.txt"), false, errdefs.ErrInvalidArgument},
		"too many, recursive": {work, true, errdefs.ErrResourceExhausted},
	} {
		if _, err := c.WatchDir(ctx, tc.path, tc.recursive); !errors.Is(err, tc.class) {
			t.Errorf("watch %s: %v, want %v", name, err, tc.class)
		}
	}
}
