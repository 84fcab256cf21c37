package service

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// opNames name the changes in the tests.
var opNames = map[FileOp]string{FileCreated: "create", FileWritten: "write", FileRemoved: "remove", FileRenamed: "rename", FileChmodded: "chmod"}

// nextEvents reads n changes of w; a watch silent for 5 s is closed and
// fails the test.
func nextEvents(t *testing.T, w DirWatcher, n int) []string {
	t.Helper()
	silent := time.AfterFunc(5*time.Second, func() { w.Close() })
	defer silent.Stop()
	var out []string
	for len(out) < n {
		ev, err := w.Next()
		if err != nil {
			t.Fatalf("after %v: %v", out, err)
		}
		out = append(out, opNames[ev.Op]+" "+ev.Name)
	}
	return out
}

// TestWatchDir watches a directory of a sandbox through the service (the
// agent's tests cover the watch itself): the changes of uploads, a move
// and a removal below it, in order; the end of the watch at Close; the
// directories that cannot be watched.
func TestWatchDir(t *testing.T) {
	e := newEnv(t, "")
	id := fileTree(t, e, map[string]string{"/workspace/w/a.txt": "a", "/workspace/w/sub/": ""})
	ctx := context.Background()
	w, err := e.sb.WatchDir(ctx, id, "w", true)
	if err != nil {
		t.Fatal(err)
	}
	if w.Root() != "/workspace/w" {
		t.Errorf("root %s, want /workspace/w", w.Root())
	}
	if _, err := e.sb.Upload(ctx, id, "/workspace/w/sub/new.txt", 0o644, strings.NewReader("n")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.sb.Upload(ctx, id, "/workspace/w/a.txt", 0o644, strings.NewReader("longer")); err != nil {
		t.Fatal(err)
	}
	checkErr(t, e.sb.Move(ctx, id, "/workspace/w/a.txt", "/workspace/w/b.txt"), nil, "")
	checkErr(t, e.sb.Remove(ctx, id, "/workspace/w/b.txt", false), nil, "")
	want := []string{"create sub/new.txt", "write a.txt", "rename a.txt", "create b.txt", "remove b.txt"}
	if diff := cmp.Diff(want, nextEvents(t, w, len(want))); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	checkErr(t, w.Close(), nil, "")
	if _, err := w.Next(); err == nil {
		t.Error("a closed watch goes on")
	}
	for p, class := range map[string]error{
		"/workspace/nope":          errdefs.ErrNotFound,
		"/workspace/w/sub/new.txt": errdefs.ErrInvalidArgument,
		"../etc":                   errdefs.ErrInvalidArgument,
	} {
		_, err = e.sb.WatchDir(ctx, id, p, false)
		checkErr(t, err, class, "")
	}
}
