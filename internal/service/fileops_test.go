package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
)

// fileTree writes files (path → content; a trailing "/" makes a
// directory) in a new running sandbox of e and returns its id.
func fileTree(t *testing.T, e *env, files map[string]string) string {
	t.Helper()
	ctx := context.Background()
	id := e.running(t).ID
	for p, c := range files {
		if strings.HasSuffix(p, "/") {
			if err := e.sb.Mkdir(ctx, id, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if _, err := e.sb.Upload(ctx, id, p, 0o640, strings.NewReader(c)); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

var testTree = map[string]string{
	"/workspace/a.txt": "one two one\n", "/workspace/sub/b.py": "print(1)\n", "/workspace/sub/deep/c.txt": "c",
	"/workspace/empty/": "",
}

func paths(fis []FileStat) string {
	out := make([]string, len(fis))
	for i, fi := range fis {
		out[i] = strings.TrimPrefix(fi.Path, "/workspace/")
	}
	return strings.Join(out, ",")
}

func TestSearchAndWalk(t *testing.T) {
	e := newEnv(t, "")
	id := fileTree(t, e, testTree)
	ctx := context.Background()
	for _, tc := range []struct {
		name, root, pattern string
		depth               int // a walk when pattern is "-"
		want                string
		wantErr             error
	}{
		{name: "by name", root: "/workspace", pattern: "*.txt", want: "a.txt,sub/deep/c.txt"},
		{name: "relative root", root: "sub", pattern: "*.py", want: "sub/b.py"},
		{name: "all", root: "/workspace", pattern: "", want: "a.txt,empty,sub,sub/b.py,sub/deep,sub/deep/c.txt"},
		{name: "by path, one level", root: "/workspace", pattern: "sub/*", want: "sub/b.py,sub/deep"},
		{name: "by path, any depth", root: "/workspace", pattern: "**/*.txt", want: "a.txt,sub/deep/c.txt"},
		{name: "class", root: "/workspace", pattern: "[ab].*", want: "a.txt,sub/b.py"},
		{name: "no match", root: "/workspace", pattern: "*.go", want: ""},
		{name: "bad pattern", root: "/workspace", pattern: "[a", wantErr: errdefs.ErrInvalidArgument},
		{name: "missing root", root: "/workspace/none", pattern: "*", wantErr: errdefs.ErrNotFound},
		{name: "root a file", root: "/workspace/a.txt", pattern: "*", wantErr: errdefs.ErrInvalidArgument},
		{name: "walk depth 1", root: "/workspace", pattern: "-", depth: 1, want: "a.txt,empty,sub"},
		{name: "walk depth 2", root: "/workspace", pattern: "-", depth: 2, want: "a.txt,empty,sub,sub/b.py,sub/deep"},
		{name: "walk all", root: "/workspace/sub", pattern: "-", depth: 0, want: "sub/b.py,sub/deep,sub/deep/c.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var fis []FileStat
			var err error
			if tc.pattern == "-" {
				fis, _, err = e.sb.Walk(ctx, id, tc.root, tc.depth)
			} else {
				fis, _, err = e.sb.Search(ctx, id, tc.root, tc.pattern)
			}
			if tc.wantErr != nil {
				checkErr(t, err, tc.wantErr, "")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := paths(fis); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// fakeTree answers a walker's reads: dir → its entries' names (a name
// ending in "/" a directory); a dir mapped to an error fails with it.
type fakeTree map[string]any

func (ft fakeTree) readDir(dir string) ([]FileStat, error) {
	switch v := ft[dir].(type) {
	case error:
		return nil, v
	case []string:
		var out []FileStat
		for _, n := range v {
			name, isDir := strings.CutSuffix(n, "/")
			out = append(out, FileStat{FileInfo: api.FileInfo{Path: path.Join(dir, name), IsDir: isDir}})
		}
		return out, nil
	}
	return nil, errdefs.WithCode(errdefs.NotFound("%s", dir), api.CodeFileNotFound)
}

// A walk skips the directories it cannot read (root-only ones, ones gone
// since listed) and says when it was cut; an error of another kind, or
// on the root, fails it.
func TestWalker(t *testing.T) {
	denied := fmt.Errorf("list: %w", errdefs.ErrPermissionDenied)
	many := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("f%05d", i)
		}
		return out
	}
	// wide has maxWalkReads+1 entries, under directories of 1000 each.
	wide := fakeTree{"/": many(0)}
	for i := range maxWalkReads/1000 + 1 {
		d := fmt.Sprintf("d%04d", i)
		wide["/"] = append(wide["/"].([]string), d+"/")
		wide["/"+d] = many(999)
	}
	for _, tc := range []struct {
		name          string
		tree          fakeTree
		keep          func(FileStat) bool
		wantN         int
		wantLast      string
		wantTruncated bool
		wantErr       error
	}{
		{name: "unreadable directories skipped", tree: fakeTree{"/": []string{"a/", "root/", "gone/", "z"}, "/a": []string{"x"}, "/root": denied},
			wantN: 5, wantLast: "/z"},
		{name: "unreadable root", tree: fakeTree{"/": denied}, wantErr: errdefs.ErrPermissionDenied},
		{name: "another error", tree: fakeTree{"/": []string{"a/"}, "/a": errors.New("agent gone")}, wantErr: errors.New("")},
		{name: "at the bound", tree: fakeTree{"/": many(MaxWalkEntries)}, wantN: MaxWalkEntries, wantLast: fmt.Sprintf("/f%05d", MaxWalkEntries-1)},
		{name: "past the bound: cut", tree: fakeTree{"/": many(MaxWalkEntries + 1)}, wantN: MaxWalkEntries,
			wantLast: fmt.Sprintf("/f%05d", MaxWalkEntries-1), wantTruncated: true},
		{name: "too many read: cut", tree: wide, keep: func(fi FileStat) bool { return fi.Path == "/d0000/f00000" },
			wantN: 1, wantLast: "/d0000/f00000", wantTruncated: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keep := tc.keep
			if keep == nil {
				keep = func(FileStat) bool { return true }
			}
			w := walker{readDir: tc.tree.readDir, keep: keep}
			err := w.visit("/", 1, true)
			if tc.wantErr != nil {
				if err == nil || errors.Is(err, errWalkCut) {
					t.Fatalf("error %v, want one", err)
				}
				if errors.Is(tc.wantErr, errdefs.ErrPermissionDenied) && !errors.Is(err, errdefs.ErrPermissionDenied) {
					t.Errorf("error %v, want permission denied", err)
				}
				return
			}
			if err != nil && !errors.Is(err, errWalkCut) {
				t.Fatal(err)
			}
			if len(w.out) != tc.wantN || w.out[len(w.out)-1].Path != tc.wantLast || w.truncated != tc.wantTruncated {
				t.Errorf("%d entries, the last %s, truncated %v; want %d, %s, %v",
					len(w.out), w.out[len(w.out)-1].Path, w.truncated, tc.wantN, tc.wantLast, tc.wantTruncated)
			}
		})
	}
}

func TestMoveRemoveReplace(t *testing.T) {
	e := newEnv(t, "")
	id := fileTree(t, e, testTree)
	ctx := context.Background()
	read := func(p string) string {
		rc, _, err := e.sb.Download(ctx, id, p)
		if err != nil {
			return "error: " + err.Error()
		}
		defer rc.Close()
		b, _ := io.ReadAll(rc)
		return string(b)
	}
	if err := e.sb.Move(ctx, id, "/workspace/a.txt", "z.txt"); err != nil {
		t.Fatal(err)
	}
	if got := read("/workspace/z.txt"); got != "one two one\n" {
		t.Errorf("moved file holds %q", got)
	}
	checkErr(t, e.sb.Move(ctx, id, "/workspace/a.txt", "y"), errdefs.ErrNotFound, api.CodeFileNotFound)
	checkErr(t, e.sb.Move(ctx, id, "", "y"), errdefs.ErrInvalidArgument, "")
	checkErr(t, e.sb.Move(ctx, id, "z.txt", "../../etc/x"), errdefs.ErrInvalidArgument, "")

	n, err := e.sb.Replace(ctx, id, "z.txt", "one", "1")
	if err != nil || n != 2 {
		t.Fatalf("replace = %d, %v", n, err)
	}
	if got := read("/workspace/z.txt"); got != "1 two 1\n" {
		t.Errorf("replaced file holds %q", got)
	}
	if fi, err := e.sb.Stat(ctx, id, "z.txt"); err != nil || fi.Mode != "0640" {
		t.Errorf("mode after replace: %+v, %v", fi, err)
	}
	if n, err := e.sb.Replace(ctx, id, "z.txt", "absent", "x"); err != nil || n != 0 {
		t.Errorf("replace of nothing = %d, %v", n, err)
	}
	_, err = e.sb.Replace(ctx, id, "z.txt", "", "x")
	checkErr(t, err, errdefs.ErrInvalidArgument, "")
	_, err = e.sb.Replace(ctx, id, "sub", "a", "b")
	checkErr(t, err, errdefs.ErrInvalidArgument, "")
	_, err = e.sb.Replace(ctx, id, "none", "a", "b")
	checkErr(t, err, errdefs.ErrNotFound, api.CodeFileNotFound)

	checkErr(t, e.sb.Remove(ctx, id, "sub", false), errdefs.ErrInvalidArgument, "")
	checkErr(t, e.sb.Remove(ctx, id, "none", false), errdefs.ErrNotFound, api.CodeFileNotFound)
	if err := e.sb.Remove(ctx, id, "z.txt", false); err != nil {
		t.Fatal(err)
	}
	if err := e.sb.Remove(ctx, id, "sub", true); err != nil {
		t.Fatal(err)
	}
	fis, _, err := e.sb.Walk(ctx, id, "/workspace", 0)
	if err != nil || paths(fis) != "empty" {
		t.Errorf("left: %s, %v", paths(fis), err)
	}
}

func TestReadRange(t *testing.T) {
	e := newEnv(t, "")
	id := fileTree(t, e, map[string]string{"/workspace/f": "0123456789", "/workspace/empty": ""})
	ctx := context.Background()
	// Links to f, relative and through another link, and a loop; and
	// d/up: a relative "../" link reached through a linked directory, which
	// leads from the directory d leads to (sub/g), not from d (g).
	res, release, err := e.sb.Exec(ctx, id, api.ExecRequest{Cwd: "/workspace",
		Command: []string{"sh", "-c", "ln -s f flink && ln -s flink flink2 && ln -s loop1 loop2 && ln -s loop2 loop1 && " +
			"mkdir -p sub/deep && printf abcdef > sub/g && printf wrong > g && ln -s sub/deep d && ln -s ../g sub/deep/up"}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("ln: %v %+v", err, res)
	}
	release()
	for _, tc := range []struct {
		name, path     string
		offset, length int64
		want           string
		wantErr        error
	}{
		{name: "middle", path: "f", offset: 2, length: 3, want: "234"},
		{name: "to the end", path: "f", offset: 7, length: -1, want: "789"},
		{name: "past the end clipped", path: "f", offset: 8, length: 100, want: "89"},
		{name: "whole", path: "f", offset: 0, length: -1, want: "0123456789"},
		{name: "empty file", path: "empty", offset: 0, length: -1, want: ""},
		{name: "offset at the end", path: "f", offset: 10, length: 1, wantErr: errdefs.ErrInvalidArgument},
		{name: "negative offset", path: "f", offset: -1, length: 1, wantErr: errdefs.ErrInvalidArgument},
		{name: "missing", path: "none", offset: 0, length: 1, wantErr: errdefs.ErrNotFound},
		{name: "through a link: its target's bytes", path: "flink", offset: 2, length: -1, want: "23456789"},
		{name: "through two links", path: "flink2", offset: 0, length: 4, want: "0123"},
		{name: "a relative link through a linked directory", path: "d/up", offset: 1, length: 2, want: "bc"},
		{name: "a link loop", path: "loop1", offset: 0, length: 1, wantErr: errdefs.ErrInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, size, err := e.sb.ReadRange(ctx, id, tc.path, tc.offset, tc.length)
			if tc.wantErr != nil {
				checkErr(t, err, tc.wantErr, "")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			b, _ := io.ReadAll(rc)
			if string(b) != tc.want || size != int64(len(map[string]string{"f": "0123456789", "flink": "0123456789", "flink2": "0123456789", "d/up": "abcdef"}[tc.path])) {
				t.Errorf("got %q (size %d), want %q", b, size, tc.want)
			}
		})
	}
}

// Chmod and Chown run commands in the sandbox (covered end to end); here,
// what they refuse before running one.
func TestChmodChownRefusals(t *testing.T) {
	e := newEnv(t, "")
	id := fileTree(t, e, map[string]string{"/workspace/f": "x"})
	ctx := context.Background()
	checkErr(t, e.sb.Chmod(ctx, id, "none", 0o600), errdefs.ErrNotFound, api.CodeFileNotFound)
	checkErr(t, e.sb.Chmod(ctx, id, "../../etc/passwd", 0o600), errdefs.ErrInvalidArgument, "")
	checkErr(t, e.sb.Chown(ctx, id, "f", "a:b", ""), errdefs.ErrInvalidArgument, "")
	checkErr(t, e.sb.Chown(ctx, id, "f", "-R", ""), errdefs.ErrInvalidArgument, "")
	checkErr(t, e.sb.Chown(ctx, id, "none", "sandbox", ""), errdefs.ErrNotFound, api.CodeFileNotFound)
	// A user or group the sandbox does not have is the request's fault.
	checkErr(t, e.sb.Chown(ctx, id, "f", "nosuchuser-a2e", ""), errdefs.ErrInvalidArgument, "")
	checkErr(t, e.sb.Chown(ctx, id, "f", "", "nosuchgroup-a2e"), errdefs.ErrInvalidArgument, "")
	if err := e.sb.Chown(ctx, id, "none", "", ""); err != nil {
		t.Errorf("a chown of nothing: %v", err)
	}
}

func TestGlobRegexp(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		match   []string
		nomatch []string
	}{
		{"*.txt", []string{"a.txt", ".txt"}, []string{"a/b.txt", "a.txt.bak"}},
		{"**", []string{"a", "a/b/c", "a\nb.txt", "d\n/e"}, nil},
		{"**/*.txt", []string{"d\n/a\nb.txt"}, []string{"a.txt\n"}},
		{"", []string{"a", "a/b"}, nil},
		{"**/*.go", []string{"x.go", "a/x.go", "a/b/x.go"}, []string{"x.gox"}},
		{"a/**", []string{"a/b", "a/b/c"}, []string{"b/a"}},
		{"?.md", []string{"a.md"}, []string{"ab.md", "/.md"}},
		{"[!a]*", []string{"b", "bc"}, []string{"a", "ab", "/b"}},
		{"x[^a]y", []string{"xby"}, []string{"xay", "x/y"}},
		{`[\]]`, []string{"]"}, []string{`\`, "]]"}},
		{`[\\x]`, []string{`\`, "x"}, []string{"y"}},
		{"[a-c]", []string{"a", "b", "c"}, []string{"d", "-"}},
		{`[a\-c]`, []string{"a", "-", "c"}, []string{"b"}},
		{"[[]", []string{"["}, []string{"a"}},
		{"[é-ë]", []string{"é", "ê"}, []string{"e"}},
		{`\*`, []string{"*"}, []string{"a"}},
		{"a.b", []string{"a.b"}, []string{"axb"}},
	} {
		re, err := globRegexp(tc.pattern)
		if err != nil {
			t.Fatalf("%q: %v", tc.pattern, err)
		}
		for _, s := range tc.match {
			if !re.MatchString(s) {
				t.Errorf("%q does not match %q", tc.pattern, s)
			}
		}
		for _, s := range tc.nomatch {
			if re.MatchString(s) {
				t.Errorf("%q matches %q", tc.pattern, s)
			}
		}
	}
	for _, bad := range []string{"[a", "a[", "[]"} {
		if _, err := globRegexp(bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%q: %v, want invalid", bad, err)
		}
	}
}

// TestUploadFiles: several files land together, and a batch refused at
// any file leaves the sandbox as it was.
func TestUploadFiles(t *testing.T) {
	e := newEnv(t, "")
	id := fileTree(t, e, testTree)
	ctx := context.Background()
	put := func(files ...string) func(put PutFile) error {
		return func(put PutFile) error {
			for i := 0; i+1 < len(files); i += 2 {
				if err := put(files[i], 0o600, strings.NewReader(files[i+1])); err != nil {
					return err
				}
			}
			return nil
		}
	}
	fis, err := e.sb.UploadFiles(ctx, id, put("new/one.txt", "1", "a.txt", "replaced"))
	if err != nil {
		t.Fatal(err)
	}
	if len(fis) != 2 || fis[0].Path != "/workspace/new/one.txt" || fis[1].Path != "/workspace/a.txt" || fis[1].Size != 8 {
		t.Errorf("files %+v", fis)
	}
	before, _, err := e.sb.Walk(ctx, id, "/workspace", 0)
	if err != nil {
		t.Fatal(err)
	}
	refused := []struct {
		name  string
		files func(put PutFile) error
		class error
	}{
		{"a directory in a later file's place", put("a.txt", "again", "x/y", "y", "sub", "s"), errdefs.ErrInvalidArgument},
		{"a later path refused", put("a.txt", "again", "../etc/x", "x"), errdefs.ErrInvalidArgument},
		{"the caller's failure", func(put PutFile) error {
			if err := put("a.txt", 0o644, strings.NewReader("again")); err != nil {
				return err
			}
			return errdefs.Invalid("the body was cut")
		}, errdefs.ErrInvalidArgument},
	}
	for _, tt := range refused {
		_, err := e.sb.UploadFiles(ctx, id, tt.files)
		checkErr(t, err, tt.class, "")
		after, _, err := e.sb.Walk(ctx, id, "/workspace", 0)
		if err != nil {
			t.Fatal(err)
		}
		if paths(after) != paths(before) {
			t.Errorf("%s: left %s, want %s", tt.name, paths(after), paths(before))
		}
	}
	rc, _, err := e.sb.Download(ctx, id, "a.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if b, _ := io.ReadAll(rc); string(b) != "replaced" {
		t.Errorf("a.txt holds %q after the refused batches", b)
	}
}

func TestOctalMode(t *testing.T) {
	tests := []struct {
		mode fs.FileMode
		want string
	}{
		{0o644, "0644"},
		{0o755 | fs.ModeDir, "0755"},
		{0o777 | fs.ModeSticky, "1777"},
		{0o755 | fs.ModeSetuid, "4755"},
		{0o750 | fs.ModeSetgid, "2750"},
		{fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky, "7000"},
	}
	for _, tt := range tests {
		if got := OctalMode(tt.mode); got != tt.want {
			t.Errorf("OctalMode(%v) = %s, want %s", tt.mode, got, tt.want)
		}
	}
}
