package agent

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// TestUploadBatch: a batch's files land together at its commit, and a
// batch that fails, is given up or cut short leaves the sandbox as it
// was: existing files unchanged, no staged file, no directory it made.
func TestUploadBatch(t *testing.T) {
	type file struct {
		path, content string
		mode          os.FileMode
		src           io.Reader // instead of content
	}
	for _, tc := range []struct {
		name   string
		files  []file
		end    string // "commit", "abort" or "cancel"
		class  error  // of the Add or Commit that fails
		code   string
		placed map[string]string // path in work → content, after the batch
	}{
		{
			name: "two files, one replaced, one in new directories",
			files: []file{
				{path: "old.txt", content: "new", mode: 0o600},
				{path: "a/b/c.txt", content: strings.Repeat("x", 100<<10), mode: 0o755},
			},
			end:    "commit",
			placed: map[string]string{"old.txt": "new", "a/b/c.txt": strings.Repeat("x", 100<<10)},
		},
		{
			name: "the same path twice: the last one",
			files: []file{
				{path: "twice", content: "1", mode: 0o644},
				{path: "twice", content: "2", mode: 0o644},
			},
			end:    "commit",
			placed: map[string]string{"old.txt": "old", "twice": "2"},
		},
		{
			name: "a directory in a later file's place",
			files: []file{
				{path: "old.txt", content: "new", mode: 0o644},
				{path: "n/ew.txt", content: "n", mode: 0o644},
				{path: "dir", content: "d", mode: 0o644},
			},
			end: "commit", class: errdefs.ErrInvalidArgument, code: "INVALID_PATH",
			placed: map[string]string{"old.txt": "old"},
		},
		{
			// The agent ends the batch while the file is still being
			// sent: the client hears why, not a broken connection.
			name: "refused while a large file is sent",
			files: []file{
				{path: "new.txt", content: "new", mode: 0o644},
				{path: "old.txt/x", content: strings.Repeat("y", 8<<20), mode: 0o644},
			},
			end: "commit", class: errdefs.ErrInvalidArgument, code: "INVALID_PATH",
			placed: map[string]string{"old.txt": "old"},
		},
		{
			name: "a path that is not one",
			files: []file{
				{path: "old.txt", content: "new", mode: 0o644},
				{path: "nul\x00", content: "n", mode: 0o644},
			},
			end: "commit", class: errdefs.ErrInvalidArgument, code: "INVALID_REQUEST",
			placed: map[string]string{"old.txt": "old"},
		},
		{
			name: "a source that fails",
			files: []file{
				{path: "x/old.txt", content: "x", mode: 0o644},
				{path: "y.txt", src: io.MultiReader(strings.NewReader("part"), iotest.ErrReader(io.ErrUnexpectedEOF))},
			},
			end: "commit", class: errdefs.ErrInvalidArgument,
			placed: map[string]string{"old.txt": "old"},
		},
		{
			name:   "given up",
			files:  []file{{path: "old.txt", content: "new", mode: 0o644}, {path: "d/e/f", content: "f", mode: 0o644}},
			end:    "abort",
			placed: map[string]string{"old.txt": "old"},
		},
		{
			name:   "cut short",
			files:  []file{{path: "old.txt", content: "new", mode: 0o644}, {path: "d/e/f", content: "f", mode: 0o644}},
			end:    "cancel",
			placed: map[string]string{"old.txt": "old"},
		},
	} {
		for _, first := range []bool{true, false} {
			name := tc.name
			if !first {
				name += ", the agent known to take batches"
			}
			t.Run(name, func(t *testing.T) {
				c, work := startAgent(t)
				if !first {
					b, err := c.StartUpload(context.Background())
					if err != nil {
						t.Fatal(err)
					}
					if fis, err := b.Commit(); err != nil || len(fis) != 0 {
						t.Fatalf("an empty batch: %v, %v", fis, err)
					}
				}
				if err := os.WriteFile(filepath.Join(work, "old.txt"), []byte("old"), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Mkdir(filepath.Join(work, "dir"), 0o755); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				b, err := c.StartUpload(ctx)
				if err != nil {
					t.Fatal(err)
				}
				var failed error
				for _, f := range tc.files {
					src := f.src
					if src == nil {
						src = strings.NewReader(f.content)
					}
					if failed = b.Add(f.path, f.mode, src); failed != nil {
						break
					}
				}
				var got []FileInfo
				switch {
				case failed != nil:
					b.Abort()
				case tc.end == "commit":
					got, failed = b.Commit()
				case tc.end == "abort":
					b.Abort()
				case tc.end == "cancel":
					cancel()
					<-b.done
				}
				switch {
				case tc.class == nil && failed != nil:
					t.Fatalf("batch: %v", failed)
				case tc.class != nil && !errors.Is(failed, tc.class):
					t.Fatalf("batch: %v, want %v", failed, tc.class)
				case tc.code != "":
					if ae := (*Error)(nil); !errors.As(failed, &ae) || ae.Code != tc.code {
						t.Errorf("batch: %v, want code %s", failed, tc.code)
					}
				}
				if tc.class == nil && tc.end == "commit" {
					if len(got) != len(tc.files) {
						t.Fatalf("files %+v, want %d", got, len(tc.files))
					}
					for i, f := range tc.files {
						if got[i].Path != filepath.Join(work, f.path) || got[i].Mode.Perm() != f.mode || got[i].Size != int64(len(f.content)) {
							t.Errorf("file %d: %+v, want %s, %v, %d bytes", i, got[i], f.path, f.mode, len(f.content))
						}
					}
				}
				want := map[string]string{"dir/": ""}
				for p, content := range tc.placed {
					want[p] = content
					for d := filepath.Dir(p); d != "."; d = filepath.Dir(d) {
						want[d+"/"] = ""
					}
				}
				// A batch cut short is removed once the agent sees its end.
				deadline := time.Now().Add(2 * time.Second)
				tree := readTree(t, work)
				for !maps.Equal(tree, want) && tc.end == "cancel" && time.Now().Before(deadline) {
					time.Sleep(20 * time.Millisecond)
					tree = readTree(t, work)
				}
				if !maps.Equal(tree, want) {
					t.Errorf("work after the batch:\n%v\nwant\n%v", tree, want)
				}
			})
		}
	}
}

// readTree maps every entry under root to its content (directories with
// a trailing slash, no content).
func readTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	// Entries may go while it walks (a batch cut short being removed).
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			out[rel+"/"] = ""
			return nil
		}
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestUploadBatchOldAgent: an agent that has no batch uploads is told
// from the answer, before anything was sent.
func TestUploadBatchOldAgent(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "old.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var asked atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		http.NotFound(w, r)
	})}
	go srv.Serve(l)
	defer srv.Close()
	c := NewClient(UnixDialer(sock), "")
	defer c.Close()
	// Asked once: the answer holds for the agent's life.
	for range 2 {
		if _, err := c.StartUpload(context.Background()); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("start: %v, want unsupported", err)
		}
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("the agent was asked %d times", n)
	}
}
