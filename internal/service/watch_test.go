package service

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// eventsText is events in a line each: the operation and the name.
func eventsText(events []FileEvent) []string {
	ops := map[FileOp]string{FileCreated: "create", FileWritten: "write", FileRemoved: "remove", FileChmodded: "chmod"}
	out := []string{}
	for _, ev := range events {
		out = append(out, ops[ev.Op]+" "+ev.Name)
	}
	return out
}

func TestDiffListings(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	file := func(p string, size int64, mode string, mod time.Time) FileStat {
		var fi FileStat
		fi.Path, fi.Size, fi.Mode, fi.ModTime, fi.Regular = p, size, mode, mod, true
		return fi
	}
	dir := func(p string) FileStat {
		var fi FileStat
		fi.Path, fi.IsDir, fi.Mode = p, true, "0755"
		return fi
	}
	link := func(p string) FileStat {
		var fi FileStat
		fi.Path, fi.Link = p, "target"
		return fi
	}
	listing := func(fis ...FileStat) map[string]FileStat {
		m := map[string]FileStat{}
		for _, fi := range fis {
			m[fi.Path] = fi
		}
		return m
	}
	base := listing(file("/w/a", 1, "0644", t0), dir("/w/d"), file("/w/d/b", 2, "0644", t0))
	for _, tc := range []struct {
		name string
		now  map[string]FileStat
		want []string
	}{
		{"nothing", base, []string{}},
		{"created", listing(file("/w/a", 1, "0644", t0), dir("/w/d"), file("/w/d/b", 2, "0644", t0), file("/w/c", 0, "0644", t0)),
			[]string{"create c"}},
		{"written by size", listing(file("/w/a", 5, "0644", t0), dir("/w/d"), file("/w/d/b", 2, "0644", t0)), []string{"write a"}},
		{"written by time", listing(file("/w/a", 1, "0644", t0.Add(time.Nanosecond)), dir("/w/d"), file("/w/d/b", 2, "0644", t0)),
			[]string{"write a"}},
		{"chmod", listing(file("/w/a", 1, "0600", t0), dir("/w/d"), file("/w/d/b", 2, "0644", t0)), []string{"chmod a"}},
		{"removed with its directory", listing(file("/w/a", 1, "0644", t0)), []string{"remove d", "remove d/b"}},
		{"renamed", listing(file("/w/z", 1, "0644", t0), dir("/w/d"), file("/w/d/b", 2, "0644", t0)), []string{"remove a", "create z"}},
		{"replaced by a link", listing(link("/w/a"), dir("/w/d"), file("/w/d/b", 2, "0644", t0)), []string{"remove a", "create a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, eventsText(diffListings("/w", base, tc.now))); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWatchDir watches a directory of a sandbox with real files: what
// each poll sees, recursively or not, and the directory's removal.
func TestWatchDir(t *testing.T) {
	e := newEnv(t, "")
	id := fileTree(t, e, map[string]string{"/workspace/w/a.txt": "a", "/workspace/w/sub/": ""})
	ctx := context.Background()
	flat, err := e.sb.WatchDir(ctx, id, "/workspace/w", false)
	if err != nil {
		t.Fatal(err)
	}
	deep, err := e.sb.WatchDir(ctx, id, "w", true)
	if err != nil {
		t.Fatal(err)
	}
	poll := func(w *DirWatch) []string {
		t.Helper()
		evs, err := w.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return eventsText(evs)
	}
	steps := []struct {
		name       string
		do         func() error
		flat, deep []string
	}{
		{"nothing", func() error { return nil }, []string{}, []string{}},
		{"create", func() error {
			_, err := e.sb.Upload(ctx, id, "/workspace/w/sub/new.txt", 0o644, strings.NewReader("n"))
			return err
		}, []string{}, []string{"create sub/new.txt"}}, // a directory's own time is no change
		{"write", func() error {
			_, err := e.sb.Upload(ctx, id, "/workspace/w/a.txt", 0o644, strings.NewReader("longer"))
			return err
		}, []string{"write a.txt"}, []string{"write a.txt"}},
		{"move", func() error { return e.sb.Move(ctx, id, "/workspace/w/a.txt", "/workspace/w/b.txt") },
			[]string{"remove a.txt", "create b.txt"}, []string{"remove a.txt", "create b.txt"}},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if diff := cmp.Diff(s.flat, poll(flat)); diff != "" {
			t.Errorf("%s, not recursive (-want +got):\n%s", s.name, diff)
		}
		if diff := cmp.Diff(s.deep, poll(deep)); diff != "" {
			t.Errorf("%s, recursive (-want +got):\n%s", s.name, diff)
		}
	}
	if err := e.sb.Remove(ctx, id, "/workspace/w", true); err != nil {
		t.Fatal(err)
	}
	_, err = flat.Poll(ctx)
	checkErr(t, err, errdefs.ErrNotFound, "")
	_, err = e.sb.WatchDir(ctx, id, "/workspace/nope", false)
	checkErr(t, err, errdefs.ErrNotFound, "")
	_, err = e.sb.WatchDir(ctx, id, "/workspace", false)
	checkErr(t, err, nil, "")
}
