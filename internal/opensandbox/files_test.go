package opensandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http/httptest"
	"path"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/service"
)

// fakeFiles is a sandbox's file tree in memory: directories end in "/" in
// ops, files hold their content; modes are octal strings.
type fakeFiles struct {
	mu    sync.Mutex
	files map[string]string // path → content, "\x00dir" for a directory
	modes map[string]string
	ops   []string
}

const fakeDir = "\x00dir"

func newFakeFiles() *fakeFiles {
	f := &fakeFiles{files: map[string]string{}, modes: map[string]string{}}
	for p, c := range map[string]string{
		"/w": fakeDir, "/w/a.txt": "one two one\n", "/w/sub": fakeDir, "/w/sub/b.py": "print(1)\n",
		"/w/sub/deep": fakeDir, "/w/sub/deep/c.txt": "c", "/w/link": "->/w/sub",
		"/old-agent-link": "->/w/a.txt", // its agent, older than the daemon, does not follow it
		"/links/file":     "->/w/a.txt", "/links/nowhere": "->/none",
	} {
		f.files[p], f.modes[p] = c, "0644"
	}
	return f
}

func notFound(p string) error {
	return errdefs.WithCode(errdefs.NotFound("file %s not found", p), api.CodeFileNotFound)
}

func (f *fakeFiles) stat(p string) (*service.FileStat, error) {
	c, ok := f.files[p]
	if !ok {
		return nil, notFound(p)
	}
	perm, _ := strconv.ParseUint(f.modes[p], 8, 32)
	fi := &service.FileStat{FileInfo: api.FileInfo{Name: path.Base(p), Path: p, Mode: f.modes[p],
		ModTime: time.Date(2026, 12, 4, 15, 0, 0, 0, time.UTC)}, FullMode: fs.FileMode(perm)}
	// Owners: directories root's, links a user without a name, files
	// the sandbox user's.
	switch {
	case c == fakeDir:
		fi.IsDir = true
	case strings.HasPrefix(c, "->"):
		fi.Link, fi.UID, fi.GID = c[2:], 1234, 1000
	default:
		fi.Regular, fi.Size, fi.UID, fi.GID = true, int64(len(c)), 1000, 1000
	}
	return fi, nil
}

func (f *fakeFiles) Stat(_ context.Context, _, p string) (*service.FileStat, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stat(p)
}

func (f *fakeFiles) under(root string, depth int, keep func(string) bool) []service.FileStat {
	var out []service.FileStat
	for p := range f.files {
		rel, ok := strings.CutPrefix(p, root+"/")
		if !ok || (depth > 0 && strings.Count(rel, "/") >= depth) || !keep(p) {
			continue
		}
		fi, _ := f.stat(p)
		out = append(out, *fi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// Walk and Search say they were cut under /w/sub/deep.
func (f *fakeFiles) Walk(_ context.Context, _, root string, depth int) ([]service.FileStat, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.under(root, depth, func(string) bool { return true }), root == "/w/sub/deep", nil
}

func (f *fakeFiles) Search(_ context.Context, _, root, pattern string) ([]service.FileStat, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.files[root]; !ok {
		return nil, false, notFound(root)
	}
	return f.under(root, 0, func(p string) bool { ok, _ := path.Match(pattern, path.Base(p)); return ok }), root == "/w/sub/deep", nil
}

// Mkdir makes p and its missing parents, as mkdir -p.
func (f *fakeFiles) Mkdir(_ context.Context, _, p string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for q := p; q != "/"; q = path.Dir(q) {
		if _, ok := f.files[q]; !ok {
			f.files[q], f.modes[q] = fakeDir, "0755"
		}
	}
	f.ops = append(f.ops, "mkdir "+p)
	return nil
}

func (f *fakeFiles) Move(_ context.Context, _, from, to string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.files[from]
	if !ok {
		return notFound(from)
	}
	delete(f.files, from)
	f.files[to], f.modes[to] = c, f.modes[from]
	f.ops = append(f.ops, "mv "+from+" "+to)
	return nil
}

func (f *fakeFiles) Remove(_ context.Context, _, p string, recursive bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.files[p]
	if !ok {
		return notFound(p)
	}
	if c == fakeDir && !recursive {
		return errdefs.Invalid("%s is a directory", p)
	}
	for q := range f.files {
		if q == p || strings.HasPrefix(q, p+"/") {
			delete(f.files, q)
		}
	}
	f.ops = append(f.ops, fmt.Sprintf("rm %s %v", p, recursive))
	return nil
}

func (f *fakeFiles) Chmod(_ context.Context, _, p string, mode fs.FileMode) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.files[p]; !ok {
		return notFound(p)
	}
	f.modes[p] = fmt.Sprintf("%04o", mode)
	f.ops = append(f.ops, fmt.Sprintf("chmod %s %s", p, service.OctalMode(mode)))
	return nil
}

func (f *fakeFiles) Chown(_ context.Context, _, p, owner, group string) error {
	if owner == "" && group == "" {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if owner == "root" {
		return fmt.Errorf("chown %s: Operation not permitted: %w", p, errdefs.ErrPermissionDenied)
	}
	f.ops = append(f.ops, "chown "+p+" "+owner+":"+group)
	return nil
}

func (f *fakeFiles) Replace(_ context.Context, _, p, old, new string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.files[p]
	if !ok {
		return 0, notFound(p)
	}
	n := strings.Count(c, old)
	f.files[p] = strings.ReplaceAll(c, old, new)
	return n, nil
}

// target follows p's links (absolute, or relative to their directory).
func (f *fakeFiles) target(p string) (*service.FileStat, error) {
	for {
		fi, err := f.stat(p)
		if err != nil || fi.Link == "" {
			return fi, err
		}
		if path.IsAbs(fi.Link) {
			p = fi.Link
		} else {
			p = path.Join(path.Dir(p), fi.Link)
		}
	}
}

func (f *fakeFiles) StatTarget(_ context.Context, _, p string) (*service.FileStat, error) {
	if p == "/old-agent-link" {
		return nil, errdefs.Precondition("%s is a symbolic link, which this sandbox's agent does not follow", p)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.target(p)
}

func (f *fakeFiles) ReadRange(_ context.Context, _, p string, offset, length int64) (io.ReadCloser, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fi, err := f.target(p)
	if err != nil {
		return nil, 0, err
	}
	c := f.files[fi.Path]
	return io.NopCloser(strings.NewReader(c[offset : offset+length])), int64(len(c)), nil
}

func newFilesSetup(t *testing.T) (*setup, *fakeExecd, *fakeFiles) {
	t.Helper()
	s, ex := newExecdSetup(t)
	ff := newFakeFiles()
	s.h.cfg.Files = ff
	return s, ex, ff
}

func TestExecdFileOps(t *testing.T) {
	for _, tc := range []struct {
		name, method, target, body string
		wantStatus                 int
		wantBody                   string   // exact JSON, when set
		wantOps                    []string // the file operations done
		check                      func(t *testing.T, ff *fakeFiles)
		wantTruncated              bool // HeaderTruncated set
	}{
		{
			name: "info of several paths", method: "GET", target: "/files/info?path=/w/a.txt&path=/w/sub&path=/w/link", wantStatus: 200,
			wantBody: `{"/w/a.txt":{"path":"/w/a.txt","size":12,"modified_at":"2026-12-04T15:00:00Z","created_at":"2026-12-04T15:00:00Z","owner":"sandbox","group":"sandbox","mode":644,"type":"file"},` +
				`"/w/link":{"path":"/w/link","size":0,"modified_at":"2026-12-04T15:00:00Z","created_at":"2026-12-04T15:00:00Z","owner":"1234","group":"sandbox","mode":644,"type":"symlink"},` +
				`"/w/sub":{"path":"/w/sub","size":0,"modified_at":"2026-12-04T15:00:00Z","created_at":"2026-12-04T15:00:00Z","owner":"root","group":"root","mode":644,"type":"directory"}}`,
		},
		{name: "info of a missing file", method: "GET", target: "/files/info?path=/w/none", wantStatus: 404},
		{name: "info without a path", method: "GET", target: "/files/info", wantStatus: 400},
		{name: "search by name", method: "GET", target: "/files/search?path=/w&pattern=*.txt", wantStatus: 200},
		{name: "search of a missing root", method: "GET", target: "/files/search?path=/none&pattern=*", wantStatus: 404},
		{name: "search without a root", method: "GET", target: "/files/search?pattern=*", wantStatus: 400},
		{name: "list depth 1", method: "GET", target: "/directories/list?path=/w", wantStatus: 200},
		{name: "search cut", method: "GET", target: "/files/search?path=/w/sub/deep&pattern=*", wantStatus: 200, wantTruncated: true},
		{name: "list cut", method: "GET", target: "/directories/list?path=/w/sub/deep", wantStatus: 200, wantTruncated: true},
		{name: "list a symbolic link", method: "GET", target: "/directories/list?path=/w/link", wantStatus: 400},
		{name: "list a bad depth", method: "GET", target: "/directories/list?path=/w&depth=0", wantStatus: 400},
		{
			name: "delete files", method: "DELETE", target: "/files?path=/w/a.txt&path=/w/sub/b.py", wantStatus: 200,
			wantOps: []string{"rm /w/a.txt false", "rm /w/sub/b.py false"},
		},
		{name: "delete a directory as a file", method: "DELETE", target: "/files?path=/w/sub", wantStatus: 400},
		// A link to a directory is refused as execd's os.Stat refuses it
		// (a 500 there), another link goes.
		{name: "delete a link to a directory as a file", method: "DELETE", target: "/files?path=/w/link", wantStatus: 400,
			wantBody: `{"code":"INVALID_REQUEST","message":"/w/link is a symbolic link to a directory: delete the link with DELETE /directories (delete_directories), which removes it alone"}`,
			check:    unchanged("/w/link", "->/w/sub")},
		{name: "delete files, one a link to a directory", method: "DELETE", target: "/files?path=/w/a.txt&path=/w/link", wantStatus: 400,
			check: unchanged("/w/a.txt", "one two one\n")},
		{
			name: "delete links to a file and to nowhere", method: "DELETE", target: "/files?path=/links/file&path=/links/nowhere", wantStatus: 200,
			wantOps: []string{"rm /links/file false", "rm /links/nowhere false"}, check: unchanged("/w/a.txt", "one two one\n"),
		},
		{
			name: "delete a link an older agent does not follow", method: "DELETE", target: "/files?path=/old-agent-link", wantStatus: 200,
			wantOps: []string{"rm /old-agent-link false"},
		},
		// A missing path is removed already, as execd has it.
		{
			name: "delete files, one missing", method: "DELETE", target: "/files?path=/w/a.txt&path=/w/none&path=/w/sub/b.py", wantStatus: 200,
			wantOps: []string{"rm /w/a.txt false", "rm /w/sub/b.py false"},
		},
		{
			name: "delete directories, one missing", method: "DELETE", target: "/directories?path=/w/sub/deep&path=/w/none", wantStatus: 200,
			wantOps: []string{"rm /w/sub/deep true"},
		},
		{name: "delete a missing file", method: "DELETE", target: "/files?path=/w/none", wantStatus: 200},
		{name: "delete a missing directory", method: "DELETE", target: "/directories?path=/w/none/deeper", wantStatus: 200},
		// Every path is checked before any is removed.
		{name: "delete files, one a directory", method: "DELETE", target: "/files?path=/w/a.txt&path=/w/sub", wantStatus: 400},
		{name: "delete files, one missing, one a directory", method: "DELETE", target: "/files?path=/w/none&path=/w/a.txt&path=/w/sub", wantStatus: 400},
		// A path an earlier one of the request took with it is done, not
		// a failure after the removal.
		{
			name: "delete directories, one inside another", method: "DELETE", target: "/directories?path=/w/sub&path=/w/sub/deep", wantStatus: 200,
			wantOps: []string{"rm /w/sub true"},
		},
		{
			name: "delete a file twice", method: "DELETE", target: "/files?path=/w/a.txt&path=/w/a.txt", wantStatus: 200,
			wantOps: []string{"rm /w/a.txt false"},
		},
		{
			name: "delete directories", method: "DELETE", target: "/directories?path=/w/sub", wantStatus: 200,
			wantOps: []string{"rm /w/sub true"},
			check: func(t *testing.T, ff *fakeFiles) {
				if _, ok := ff.files["/w/sub/deep/c.txt"]; ok {
					t.Error("contents left")
				}
			},
		},
		// execd's os.RemoveAll: a file or a link goes as a directory does
		// (the link, not what it leads to).
		{
			name: "delete a file as a directory", method: "DELETE", target: "/directories?path=/w/a.txt", wantStatus: 200,
			wantOps: []string{"rm /w/a.txt true"},
		},
		{
			name: "delete a link as a directory", method: "DELETE", target: "/directories?path=/w/link", wantStatus: 200,
			wantOps: []string{"rm /w/link true"},
			check: func(t *testing.T, ff *fakeFiles) {
				if _, ok := ff.files["/w/sub/b.py"]; !ok {
					t.Error("the link's target went with it")
				}
			},
		},
		{
			name: "delete directories and a file", method: "DELETE", target: "/directories?path=/w/sub/deep&path=/w/a.txt", wantStatus: 200,
			wantOps: []string{"rm /w/sub/deep true", "rm /w/a.txt true"},
		},
		{
			name: "make directories with modes", method: "POST", target: "/directories", body: `{"/w/n/m":{"mode":700}}`, wantStatus: 200,
			wantOps: []string{"mkdir /w/n/m", "chmod /w/n/m 0700"},
		},
		// Modes are checked before anything is made; a directory made
		// is removed again when a later step fails.
		{name: "make directories, a bad mode", method: "POST", target: "/directories", body: `{"/w/n":{"mode":700},"/w/nd":{"mode":999}}`, wantStatus: 400,
			check: func(t *testing.T, ff *fakeFiles) {
				if _, ok := ff.files["/w/n"]; ok {
					t.Error("/w/n made")
				}
			}},
		{name: "make a directory, an owner not allowed", method: "POST", target: "/directories", body: `{"/w/n2/m":{"owner":"root"}}`, wantStatus: 403,
			wantOps: []string{"mkdir /w/n2/m", "rm /w/n2 true"},
			check: func(t *testing.T, ff *fakeFiles) {
				if _, ok := ff.files["/w/n2/m"]; ok {
					t.Error("/w/n2/m left")
				}
			}},
		{name: "make an existing directory, an owner not allowed", method: "POST", target: "/directories", body: `{"/w/sub":{"owner":"root"}}`, wantStatus: 403,
			wantOps: []string{"mkdir /w/sub"}},
		{
			name: "make a directory, owner mine", method: "POST", target: "/directories", body: `{"/w/o":{"mode":755,"owner":"sandbox","group":"sandbox"}}`,
			wantStatus: 200, wantOps: []string{"mkdir /w/o", "chmod /w/o 0755", "chown /w/o sandbox:sandbox"},
		},
		{
			name: "move", method: "POST", target: "/files/mv", body: `[{"src":"/w/a.txt","dest":"/w/z.txt"}]`, wantStatus: 200,
			wantOps: []string{"mv /w/a.txt /w/z.txt"},
		},
		{name: "move a missing file", method: "POST", target: "/files/mv", body: `[{"src":"/w/none","dest":"/w/z"}]`, wantStatus: 404},
		{
			name: "move in a chain", method: "POST", target: "/files/mv", body: `[{"src":"/w/a.txt","dest":"/w/z.txt"},{"src":"/w/z.txt","dest":"/w/y.txt"}]`, wantStatus: 200,
			wantOps: []string{"mv /w/a.txt /w/z.txt", "mv /w/z.txt /w/y.txt"},
		},
		// A bad item is refused before anything is moved; a move that
		// fails has the moves before it undone.
		{name: "move, one without dest", method: "POST", target: "/files/mv", body: `[{"src":"/w/a.txt","dest":"/w/z.txt"},{"src":"/w/sub/b.py"}]`, wantStatus: 400},
		{name: "move, one a path out", method: "POST", target: "/files/mv", body: `[{"src":"/w/a.txt","dest":"/w/z.txt"},{"src":"/w/sub/b.py","dest":"/w/../etc/b"}]`, wantStatus: 400},
		{
			name: "move, one failing", method: "POST", target: "/files/mv", body: `[{"src":"/w/a.txt","dest":"/w/z.txt"},{"src":"/w/sub/b.py","dest":"/w/b.py"},{"src":"/w/a.txt","dest":"/w/y.txt"}]`, wantStatus: 404,
			wantOps: []string{"mv /w/a.txt /w/z.txt", "mv /w/sub/b.py /w/b.py", "mv /w/b.py /w/sub/b.py", "mv /w/z.txt /w/a.txt"},
			check:   unchanged("/w/a.txt", "one two one\n"),
		},
		{name: "move, not a list", method: "POST", target: "/files/mv", body: `{"src":"/w/a.txt"}`, wantStatus: 400},
		{
			name: "permissions", method: "POST", target: "/files/permissions", body: `{"/w/a.txt":{"mode":600}}`, wantStatus: 200,
			wantOps: []string{"chmod /w/a.txt 0600"},
		},
		{name: "permissions, a bad mode", method: "POST", target: "/files/permissions", body: `{"/w/a.txt":{"mode":999}}`, wantStatus: 400},
		{
			name: "permissions, sticky and setgid", method: "POST", target: "/files/permissions", body: `{"/w/sub":{"mode":1777},"/w/a.txt":{"mode":2750}}`,
			wantStatus: 200, wantOps: []string{"chmod /w/a.txt 2750", "chmod /w/sub 1777"},
		},
		{name: "permissions, an owner not allowed", method: "POST", target: "/files/permissions", body: `{"/w/a.txt":{"owner":"root"}}`, wantStatus: 403},
		// Every path is checked before anything is changed; what a
		// request changed before a later step failed is set back.
		{name: "permissions, one missing", method: "POST", target: "/files/permissions", body: `{"/w/a.txt":{"mode":600},"/w/none":{"mode":600}}`, wantStatus: 404,
			check: mode("/w/a.txt", "0644")},
		{
			name: "permissions, an owner not allowed after a mode", method: "POST", target: "/files/permissions",
			body: `{"/w/a.txt":{"mode":600},"/w/sub/b.py":{"mode":700,"group":"sandbox"},"/w/sub/deep/c.txt":{"owner":"root"}}`, wantStatus: 403,
			wantOps: []string{"chmod /w/a.txt 0600", "chmod /w/sub/b.py 0700", "chown /w/sub/b.py :sandbox",
				"chown /w/sub/b.py 1000:1000", "chmod /w/sub/b.py 0644", "chmod /w/a.txt 0644"},
			check: mode("/w/a.txt", "0644"),
		},
		{
			name: "permissions of a link an older agent does not follow", method: "POST", target: "/files/permissions",
			body: `{"/old-agent-link":{"mode":600}}`, wantStatus: 200, wantOps: []string{"chmod /old-agent-link 0600"},
		},
		{
			name: "permissions of a link an older agent does not follow, not set back", method: "POST", target: "/files/permissions",
			body: `{"/old-agent-link":{"mode":600},"/w/sub/deep/c.txt":{"owner":"root"}}`, wantStatus: 403, wantOps: []string{"chmod /old-agent-link 0600"},
		},
		{
			name: "make directories, an existing one's mode set back", method: "POST", target: "/directories",
			body: `{"/w/sub":{"mode":700},"/w/sub/x":{"owner":"root"}}`, wantStatus: 403,
			wantOps: []string{"mkdir /w/sub", "chmod /w/sub 0700", "mkdir /w/sub/x", "rm /w/sub/x true", "chmod /w/sub 0644"},
			check:   mode("/w/sub", "0644"),
		},
		{
			name: "replace", method: "POST", target: "/files/replace", body: `{"/w/a.txt":{"old":"one","new":"1"}}`, wantStatus: 200,
			check: func(t *testing.T, ff *fakeFiles) {
				if ff.files["/w/a.txt"] != "1 two 1\n" {
					t.Errorf("content %q", ff.files["/w/a.txt"])
				}
			},
		},
		{
			name: "replace, verbose", method: "POST", target: "/files/replace?verbose=true", body: `{"/w/a.txt":{"old":"one","new":"1"}}`, wantStatus: 200,
			wantBody: `{"/w/a.txt":{"replacedCount":2}}`,
		},
		{name: "replace without new", method: "POST", target: "/files/replace", body: `{"/w/a.txt":{"old":"one"}}`, wantStatus: 400},
		{name: "replace in a missing file", method: "POST", target: "/files/replace", body: `{"/w/none":{"old":"a","new":"b"}}`, wantStatus: 404},
		// Every file is checked before any is changed.
		{name: "replace, one without new", method: "POST", target: "/files/replace", body: `{"/w/a.txt":{"old":"one","new":"1"},"/w/sub/b.py":{"old":"1"}}`, wantStatus: 400,
			check: unchanged("/w/a.txt", "one two one\n")},
		{name: "replace, one missing", method: "POST", target: "/files/replace", body: `{"/w/a.txt":{"old":"one","new":"1"},"/w/none":{"old":"a","new":"b"}}`, wantStatus: 404,
			check: unchanged("/w/a.txt", "one two one\n")},
		{name: "replace, one a directory", method: "POST", target: "/files/replace", body: `{"/w/a.txt":{"old":"one","new":"1"},"/w/sub":{"old":"a","new":"b"}}`, wantStatus: 400,
			check: unchanged("/w/a.txt", "one two one\n")},
		{name: "replace, one old empty", method: "POST", target: "/files/replace", body: `{"/w/a.txt":{"old":"one","new":"1"},"/w/sub/b.py":{"old":"","new":"b"}}`, wantStatus: 400,
			check: unchanged("/w/a.txt", "one two one\n")},
		{name: "info by POST", method: "POST", target: "/files/info?path=/w", body: `{}`, wantStatus: 405},
		{name: "unknown files route", method: "GET", target: "/files/other", wantStatus: 501},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, ff := newFilesSetup(t)
			ctype := ""
			if tc.body != "" {
				ctype = "application/json"
			}
			rec := execdDo(t, s, tc.method, "/opensandbox/a/execd"+tc.target, ctype, strings.NewReader(tc.body), "tok-a")
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d %s, want %d", rec.Code, rec.Body, tc.wantStatus)
			}
			if got := rec.Header().Get(HeaderTruncated) == "true"; got != tc.wantTruncated {
				t.Errorf("%s: %q, want truncated %v", HeaderTruncated, rec.Header().Get(HeaderTruncated), tc.wantTruncated)
			}
			if tc.wantBody != "" && strings.TrimSpace(rec.Body.String()) != tc.wantBody {
				t.Errorf("body %s\nwant %s", rec.Body, tc.wantBody)
			}
			if tc.wantStatus == 200 && strings.HasPrefix(tc.method+tc.target, "GET/") && !strings.Contains(tc.target, "info") {
				// Lists of FileInfo: check the paths.
				var list []fileInfo
				if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil {
					t.Fatalf("body %s: %v", rec.Body, err)
				}
				var paths []string
				for _, fi := range list {
					paths = append(paths, fi.Path)
				}
				want := map[string]string{
					"search by name": "/w/a.txt,/w/sub/deep/c.txt",
					"list depth 1":   "/w/a.txt,/w/link,/w/sub",
					"search cut":     "/w/sub/deep/c.txt",
					"list cut":       "/w/sub/deep/c.txt",
				}[tc.name]
				if strings.Join(paths, ",") != want {
					t.Errorf("paths %v, want %s", paths, want)
				}
			}
			if fmt.Sprint(ff.ops) != fmt.Sprint(tc.wantOps) && !(len(ff.ops) == 0 && len(tc.wantOps) == 0) {
				t.Errorf("ops %v, want %v", ff.ops, tc.wantOps)
			}
			if tc.check != nil {
				tc.check(t, ff)
			}
		})
	}
}

// mode checks that file p has mode m (octal).
func mode(p, m string) func(t *testing.T, ff *fakeFiles) {
	return func(t *testing.T, ff *fakeFiles) {
		t.Helper()
		if got := ff.modes[p]; got != m {
			t.Errorf("%s has mode %s, want %s", p, got, m)
		}
	}
}

// unchanged checks that file p still holds content.
func unchanged(p, content string) func(t *testing.T, ff *fakeFiles) {
	return func(t *testing.T, ff *fakeFiles) {
		t.Helper()
		if got := ff.files[p]; got != content {
			t.Errorf("%s holds %q, want %q", p, got, content)
		}
	}
}

func TestExecdRangedDownload(t *testing.T) {
	for _, tc := range []struct {
		name, path, query, rng string
		wantStatus             int
		wantBody               string
		wantRange              string
	}{
		// A link's range is of its target, as a plain download.
		{name: "through a link", path: "/w/alink", rng: "bytes=0-3", wantStatus: 206, wantBody: "one ", wantRange: "bytes 0-3/12"},
		{name: "through a link, past its path's length", path: "/w/alink", rng: "bytes=8-", wantStatus: 206, wantBody: "one\n", wantRange: "bytes 8-11/12"},
		{name: "suffix of an empty file", path: "/w/empty", rng: "bytes=-5", wantStatus: 416, wantRange: "bytes */0"},
		{name: "suffix of 0 bytes", rng: "bytes=-0", wantStatus: 416, wantRange: "bytes */12"},
		{name: "lines, a limit as large as can be", query: "&offset=2&limit=9223372036854775807", wantStatus: 200, wantBody: "l2\nl3\nl4"},
		{name: "first bytes", rng: "bytes=0-3", wantStatus: 206, wantBody: "one ", wantRange: "bytes 0-3/12"},
		{name: "open end", rng: "bytes=8-", wantStatus: 206, wantBody: "one\n", wantRange: "bytes 8-11/12"},
		{name: "suffix", rng: "bytes=-4", wantStatus: 206, wantBody: "one\n", wantRange: "bytes 8-11/12"},
		{name: "end past the size", rng: "bytes=4-100", wantStatus: 206, wantBody: "two one\n", wantRange: "bytes 4-11/12"},
		{name: "past the end", rng: "bytes=12-", wantStatus: 416, wantRange: "bytes */12"},
		{name: "several ranges", rng: "bytes=0-1,3-4", wantStatus: 400},
		{name: "backwards", rng: "bytes=5-2", wantStatus: 400},
		{name: "not bytes", rng: "lines=1-2", wantStatus: 400},
		{name: "lines from the second", query: "&offset=2&limit=2", wantStatus: 200, wantBody: "l2\nl3\n"},
		{name: "lines to the end", query: "&offset=3", wantStatus: 200, wantBody: "l3\nl4"},
		{name: "the first line", query: "&limit=1", wantStatus: 200, wantBody: "l1\n"},
		{name: "no lines", query: "&limit=0", wantStatus: 200, wantBody: ""},
		{name: "offset past the end", query: "&offset=9", wantStatus: 200, wantBody: ""},
		{name: "offset 0", query: "&offset=0", wantStatus: 400},
		{name: "both", query: "&offset=1", rng: "bytes=0-1", wantStatus: 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ex, ff := newFilesSetup(t)
			ff.files["/w/a.txt"] = "one two one\n"
			ff.files["/w/alink"], ff.files["/w/empty"] = "->a.txt", ""
			ex.files["/w/a.txt"] = []byte("l1\nl2\nl3\nl4")
			p := tc.path
			if p == "" {
				p = "/w/a.txt"
			}
			req := httptest.NewRequest("GET", "/opensandbox/a/execd/files/download?path="+p+tc.query, nil)
			req.Header.Set(HeaderAccessToken, "tok-a")
			if tc.rng != "" {
				req.Header.Set("Range", tc.rng)
			}
			rec := httptest.NewRecorder()
			s.h.ServeHTTP(rec, req)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d %s, want %d", rec.Code, rec.Body, tc.wantStatus)
			}
			if got := rec.Header().Get("Content-Range"); got != tc.wantRange {
				t.Errorf("Content-Range %q, want %q", got, tc.wantRange)
			}
			if tc.wantStatus < 300 {
				if rec.Body.String() != tc.wantBody {
					t.Errorf("body %q, want %q", rec.Body, tc.wantBody)
				}
				if cl := rec.Header().Get("Content-Length"); tc.wantStatus == 206 && cl != fmt.Sprint(len(tc.wantBody)) {
					t.Errorf("Content-Length %s", cl)
				}
				return
			}
			var eb map[string]string
			if err := json.NewDecoder(bytes.NewReader(rec.Body.Bytes())).Decode(&eb); err != nil || eb["code"] == "" || eb["message"] == "" {
				t.Errorf("error body %s", rec.Body)
			}
		})
	}
}

// A line download streams: a long line, skipped or sent, is never held
// whole in the daemon's memory.
func TestExecdLinesBoundedMemory(t *testing.T) {
	const size = 32 << 20
	line := bytes.Repeat([]byte{'x'}, size)
	for _, tc := range []struct {
		name, query string
		wantLen     int
	}{
		{name: "skipped", query: "&offset=2", wantLen: 3},
		{name: "sent", query: "&limit=1", wantLen: size + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ex, _ := newFilesSetup(t)
			ex.files["/w/big"] = append(line, "\nok\n"...)
			req := httptest.NewRequest("GET", "/opensandbox/a/execd/files/download?path=/w/big"+tc.query, nil)
			req.Header.Set(HeaderAccessToken, "tok-a")
			rec := httptest.NewRecorder()
			rec.Body.Grow(tc.wantLen)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			s.h.ServeHTTP(rec, req)
			runtime.ReadMemStats(&after)
			if rec.Code != 200 || rec.Body.Len() != tc.wantLen {
				t.Fatalf("status %d, %d bytes, want 200 and %d", rec.Code, rec.Body.Len(), tc.wantLen)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > size/4 {
				t.Errorf("the download allocated %d bytes for a line of %d", alloc, size)
			}
		})
	}
}
