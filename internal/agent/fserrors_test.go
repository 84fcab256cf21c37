package agent

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/testenv"
)

// TestFSErrorClasses: what the file system refuses for the request's own
// sake is the caller's error (never "unavailable", which clients retry).
func TestFSErrorClasses(t *testing.T) {
	c, work := startAgent(t)
	ctx := context.Background()
	for _, l := range [][2]string{{"l1", "l2"}, {"l2", "l1"}} {
		if err := os.Symlink(filepath.Join(work, l[1]), filepath.Join(work, l[0])); err != nil {
			t.Fatal(err)
		}
	}
	long := strings.Repeat("a", 300)
	for _, tc := range []struct {
		name string
		op   func() error
		want error
	}{
		{"a name too long", func() error { _, err := c.Stat(ctx, long); return err }, errdefs.ErrInvalidArgument},
		{"a link loop", func() error { _, _, err := c.Download(ctx, "l1/x"); return err }, errdefs.ErrInvalidArgument},
		{"a mount's root moved", func() error { return c.Move(ctx, "/", "x") }, errdefs.ErrAlreadyExists},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.op(); !errors.Is(err, tc.want) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// TestDownloadPseudoFile: a file of /proc or /sys, whose size says nothing
// of its content, is sent whole.
func TestDownloadPseudoFile(t *testing.T) {
	c, _ := startAgent(t)
	for _, tc := range []struct {
		path   string
		offset int64
	}{
		{"/proc/version", 0},
		{"/proc/version", 5},
		{"/sys/kernel/mm/transparent_hugepage/enabled", 0},
	} {
		want, err := os.ReadFile(tc.path)
		if err != nil {
			testenv.Missing(t, "%s: %v", tc.path, err)
			continue
		}
		rc, size, err := c.DownloadFrom(context.Background(), tc.path, tc.offset)
		if err != nil {
			t.Fatalf("download %s: %v", tc.path, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		// The length is unknown, unless the whole answer fitted the
		// server's buffer, which then counted it.
		if err != nil || !bytes.Equal(got, want[tc.offset:]) || (size != -1 && size != int64(len(got))) {
			t.Errorf("download %s from %d: %q, size %d (%v); want %q", tc.path, tc.offset, got, size, err, want[tc.offset:])
		}
	}
}

// TestMoveAcrossMounts: a move between two file systems (a sandbox's /tmp
// and /workspace) copies and removes, as mv(1), keeping what it moves
// whole: contents, modes, times and links.
func TestMoveAcrossMounts(t *testing.T) {
	c, work := startAgent(t)
	other, err := os.MkdirTemp("/dev/shm", "a2e-move-")
	if err != nil {
		testenv.Missing(t, "a second file system at /dev/shm: %v", err)
		return
	}
	t.Cleanup(func() { os.RemoveAll(other) })
	var a, b syscall.Stat_t
	if syscall.Stat(work, &a) != nil || syscall.Stat(other, &b) != nil || a.Dev == b.Dev {
		t.Fatalf("%s and %s are not on two file systems", work, other)
	}
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	tree := filepath.Join(other, "tree")
	for _, p := range []string{"tree/sub", "tree/empty"} {
		if err := os.MkdirAll(filepath.Join(other, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []struct {
		path string
		mode os.FileMode
	}{{"tree/sub/run.sh", 0o750}, {"tree/top.txt", 0o600}, {"one.txt", 0o644}} {
		p := filepath.Join(other, f.path)
		if err := os.WriteFile(p, []byte(f.path), f.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("sub/run.sh", filepath.Join(tree, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(tree, "sub"), 0o711); err != nil {
		t.Fatal(err)
	}

	if err := c.Move(context.Background(), filepath.Join(other, "one.txt"), filepath.Join(work, "one.txt")); err != nil {
		t.Fatalf("move a file: %v", err)
	}
	if err := c.Move(context.Background(), tree, filepath.Join(work, "tree")); err != nil {
		t.Fatalf("move a tree: %v", err)
	}
	for _, f := range []struct {
		path string
		mode os.FileMode
		data string
	}{
		{"one.txt", 0o644, "one.txt"},
		{"tree/top.txt", 0o600, "tree/top.txt"},
		{"tree/sub/run.sh", 0o750, "tree/sub/run.sh"},
		{"tree/sub", os.ModeDir | 0o711, ""},
		{"tree/empty", os.ModeDir | 0o755, ""},
		{"tree/link", os.ModeSymlink | 0o777, ""},
	} {
		p := filepath.Join(work, f.path)
		fi, err := os.Lstat(p)
		if err != nil {
			t.Errorf("%s: %v", f.path, err)
			continue
		}
		if fi.Mode() != f.mode {
			t.Errorf("%s: mode %v, want %v", f.path, fi.Mode(), f.mode)
		}
		if f.data != "" {
			if b, _ := os.ReadFile(p); string(b) != f.data || !fi.ModTime().Equal(old) {
				t.Errorf("%s: %q of %v, want %q of %v", f.path, b, fi.ModTime(), f.data, old)
			}
		}
	}
	if target, _ := os.Readlink(filepath.Join(work, "tree/link")); target != "sub/run.sh" {
		t.Errorf("link: %q", target)
	}
	if ents, _ := os.ReadDir(other); len(ents) != 0 {
		t.Errorf("left behind in the source's file system: %v", ents)
	}
	if ents, _ := os.ReadDir(work); len(ents) != 2 {
		t.Errorf("the destination holds %v, want one.txt and tree alone", ents)
	}
}

// TestCwdAsUser: a working directory the sandbox's user cannot enter is
// refused as such, naming it, before anything starts; a watch of it is
// refused as the file system refuses it.
func TestCwdAsUser(t *testing.T) {
	testenv.RequireRoot(t)
	sock, dir, _ := serveAgent(t, func(string) ServerConfig {
		return ServerConfig{Env: []string{"PATH=" + os.Getenv("PATH")}, Cwd: "/", UID: 65534, GID: 65534}
	})
	private := filepath.Join(dir, "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := NewClient(UnixDialer(sock), "")
	t.Cleanup(c.Close)
	want := "working directory " + private + " cannot be entered by the sandbox's user"
	_, err := c.Exec(context.Background(), ExecRequest{Command: []string{"pwd"}, Cwd: private}, nil, nil, nil)
	if !errors.Is(err, errdefs.ErrInvalidArgument) || err.Error() != want {
		t.Errorf("exec: %v, want invalid argument %q", err, want)
	}
	_, err = c.StartProc(context.Background(), ProcRequest{Command: []string{"pwd"}, Cwd: private})
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), want) {
		t.Errorf("process: %v, want invalid argument %q", err, want)
	}
	if w, err := c.WatchDir(context.Background(), private, false); !errors.Is(err, errdefs.ErrPermissionDenied) {
		if err == nil {
			w.Close()
		}
		t.Errorf("watch: %v, want permission denied", err)
	}
}

// TestUploadBodyError: an upload whose body fails to read (a client's
// body cut short) is the caller's error, and leaves nothing.
func TestUploadBodyError(t *testing.T) {
	c, work := startAgent(t)
	body := io.MultiReader(strings.NewReader("partial"), iotest.ErrReader(io.ErrUnexpectedEOF))
	if _, err := c.Upload(context.Background(), "f", 0o644, body); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("upload: %v, want invalid argument", err)
	}
	time.Sleep(100 * time.Millisecond)
	if ents, _ := os.ReadDir(work); len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
}

// TestDownloadNamedPipe: a named pipe is refused at once, not read until
// someone writes to it (which held the request and one of the agent's
// threads for as long).
func TestDownloadNamedPipe(t *testing.T) {
	c, work := startAgent(t)
	fifo := filepath.Join(work, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if rc, _, err := c.Download(ctx, fifo); !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "named pipe") {
		if err == nil {
			rc.Close()
		}
		t.Errorf("download of a named pipe: %v, want invalid argument", err)
	}
}

// TestUploadErrorNamesPath: an upload that cannot be written says so of
// the path asked for, once, never of the temporary file it is written to
// first, by itself and in a batch.
func TestUploadErrorNamesPath(t *testing.T) {
	c, work := startAgent(t)
	ctx := context.Background()
	if err := os.Mkdir(filepath.Join(work, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	upload := func(p string) error {
		_, err := c.Upload(ctx, p, 0o644, strings.NewReader("x"))
		return err
	}
	batch := func(p string) error {
		b, err := c.StartUpload(ctx)
		if err != nil {
			return err
		}
		if err := b.Add(p, 0o644, strings.NewReader("x")); err != nil {
			b.Abort()
			return err
		}
		_, err = b.Commit() // what Add streamed may fail only here
		return err
	}
	for _, tc := range []struct {
		name, path, want string
	}{
		// /proc takes no new file: the temporary one cannot be made.
		{"a directory where no file can be made", "/proc/a2e-upload", "write /proc/a2e-upload: no such file or directory"},
		{"a directory", filepath.Join(work, "dir"), "write " + filepath.Join(work, "dir") + ": is a directory"},
	} {
		for way, do := range map[string]func(string) error{"upload": upload, "batch": batch} {
			t.Run(tc.name+", "+way, func(t *testing.T) {
				err := do(tc.path)
				if err == nil || !strings.HasSuffix(err.Error(), tc.want) || strings.Count(err.Error(), tc.path) != 1 {
					t.Errorf("got %v, want an error that ends %q and names the path once", err, tc.want)
				}
			})
		}
	}
}

// An upload's error names no temporary file of the agent's, and keeps
// its class (a full disk is still ENOSPC).
func TestWithoutTemp(t *testing.T) {
	const tmp = "/workspace/.upload-123"
	other := &fs.PathError{Op: "open", Path: "/workspace", Err: syscall.EACCES}
	for _, tc := range []struct {
		name string
		err  error
		want error
		text string
	}{
		{"a write to it", &fs.PathError{Op: "write", Path: tmp, Err: syscall.ENOSPC}, syscall.ENOSPC, "no space left on device"},
		{"its rename", &os.LinkError{Op: "rename", Old: tmp, New: "/workspace/f", Err: syscall.EXDEV}, syscall.EXDEV, "invalid cross-device link"},
		{"another file", other, syscall.EACCES, "open /workspace: permission denied"},
	} {
		got := withoutTemp(tc.err, tmp)
		if !errors.Is(got, tc.want) || got.Error() != tc.text || strings.Contains(got.Error(), ".upload-") {
			t.Errorf("%s: withoutTemp = %v, want %q (%v)", tc.name, got, tc.text, tc.want)
		}
	}
}
