package buildcache

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/testenv"
	"golang.org/x/sys/unix"
)

// file is a file or directory a test puts in a cache dir.
type file struct {
	dir    bool
	at     time.Time // its modification time
	link   string    // a symbolic link to this (relative to the test's temp dir)
	locked bool      // flock'ed by the test while pruning
}

var (
	now    = time.Now()
	long   = now.Add(-2 * Grace)
	lately = now.Add(-Grace / 2)
)

// makeFiles puts files (their names relative to cache) in cache, and an
// "outside" dir beside it with a file that links may point to.
func makeFiles(t *testing.T, cache string, files map[string]file) {
	t.Helper()
	outside := filepath.Join(filepath.Dir(cache), "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "precious"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Deepest first, so that a parent's time is set after its children
	// are made.
	for _, name := range slices.Backward(slices.Sorted(maps.Keys(files))) {
		f, path := files[name], filepath.Join(cache, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case f.link != "":
			err = os.Symlink(filepath.Join(filepath.Dir(cache), f.link), path)
		case f.dir:
			err = os.MkdirAll(path, 0o755)
		default:
			err = os.WriteFile(path, []byte(name), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		if f.locked {
			l, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			if err := unix.Flock(int(l.Fd()), unix.LOCK_EX); err != nil {
				t.Fatal(err)
			}
		}
		if !f.at.IsZero() {
			at := unix.NsecToTimespec(f.at.UnixNano())
			if err := unix.UtimesNanoAt(unix.AT_FDCWD, path, []unix.Timespec{at, at}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// tree lists what is under dir (paths relative to it, directories with a
// trailing slash), not following links.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.IsDir() {
			rel += "/"
		}
		names = append(names, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// hashVersion is a versionOf as the image builds': the name up to its
// first dot, when it is "v" and a number.
func hashVersion(name string) (string, bool) {
	v, _, _ := strings.Cut(name, ".")
	return v, len(v) > 1 && v[0] == 'v' && strings.Trim(v[1:], "0123456789") == ""
}

// TestPrune checks which versions' files Prune removes: other versions'
// unused for Grace and not locked, all their files (locks, partial files,
// directories) with them, and nothing else: not the current versions'
// however old, not a version one of whose files was used lately or
// whose lock is held, not names of no version, never what a symbolic
// link points to.
func TestPrune(t *testing.T) {
	for _, tc := range []struct {
		name        string
		files       map[string]file
		wantRemoved []string
		want        []string // left in the cache dir
	}{
		{name: "current versions stay, however old",
			files: map[string]file{"v1.tar": {at: long}, "v1.tar.lock": {at: long}, "v1.build": {dir: true, at: long}},
			want:  []string{"v1.build/", "v1.tar", "v1.tar.lock"}},
		{name: "other versions go, with their locks, partial files and directories",
			files: map[string]file{
				"v1.tar": {at: long},
				"v2.tar": {at: long}, "v2.tar.lock": {at: long}, "v2.tar.zst.tmp7": {at: long},
				"v2.npm.d/usr/bin/node": {at: long}, "v2.npm.d": {dir: true, at: long}, "v2.npm.d.lock": {at: long},
				"v3.tar": {at: long},
			},
			wantRemoved: []string{"v2", "v3"},
			want:        []string{"v1.tar"}},
		{name: "a version one of whose files was used lately stays",
			files: map[string]file{
				"v2.tar": {at: long}, "v2.tar.zst": {at: lately}, "v2.tar.lock": {at: long},
				"v3.npm.d": {dir: true, at: lately}, "v3.npm.tar": {at: long},
			},
			want: []string{"v2.tar", "v2.tar.lock", "v2.tar.zst", "v3.npm.d/", "v3.npm.tar"}},
		{name: "a version whose lock is held stays",
			files: map[string]file{
				"v2.tar.tmp9": {at: long}, "v2.tar.lock": {at: long}, "v2.tar.zst.lock": {at: long, locked: true},
			},
			want: []string{"v2.tar.lock", "v2.tar.tmp9", "v2.tar.zst.lock"}},
		{name: "names of no version stay",
			files: map[string]file{"criu-4.1.1-abc": {dir: true, at: long}, "notes.tar": {at: long}, "v.tar": {at: long}, "peers": {dir: true, at: long}},
			want:  []string{"criu-4.1.1-abc/", "notes.tar", "peers/", "v.tar"}},
		{name: "links are removed, never followed",
			files: map[string]file{
				"v2.tar": {link: "outside/precious", at: long}, "v2.d": {dir: true, at: long}, "v2.d/etc": {link: "outside"},
			},
			wantRemoved: []string{"v2"}},
		{name: "a linked lock is never opened, and keeps its version",
			files: map[string]file{"v2.tar": {at: long}, "v2.tar.lock": {link: "outside/precious", at: long}},
			want:  []string{"v2.tar", "v2.tar.lock"}},
		{name: "an empty cache dir", files: map[string]file{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := filepath.Join(t.TempDir(), "cache")
			if err := os.Mkdir(cache, 0o755); err != nil {
				t.Fatal(err)
			}
			makeFiles(t, cache, tc.files)
			removed, err := Prune(cache, hashVersion, map[string]bool{"v1": true}, now)
			if err != nil {
				t.Fatalf("Prune: %v", err)
			}
			if diff := cmp.Diff(tc.wantRemoved, removed); diff != "" {
				t.Errorf("removed (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, tree(t, cache)); diff != "" {
				t.Errorf("left in the cache dir (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"precious"}, tree(t, filepath.Join(filepath.Dir(cache), "outside"))); diff != "" {
				t.Errorf("left outside the cache dir (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("a missing cache dir", func(t *testing.T) {
		removed, err := Prune(filepath.Join(t.TempDir(), "none"), hashVersion, nil, now)
		if err != nil || removed != nil {
			t.Errorf("Prune = %v, %v; want nothing, no error", removed, err)
		}
	})
}

// TestMarkUsed checks that MarkUsed sets a file's time to now, and a
// link's own, not its target's.
func TestMarkUsed(t *testing.T) {
	dir := t.TempDir()
	makeFiles(t, filepath.Join(dir, "cache"), map[string]file{"v2.tar": {at: long}, "v3.tar": {link: "outside/precious"}})
	precious := filepath.Join(dir, "outside", "precious")
	if err := os.Chtimes(precious, long, long); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"v2.tar", "v3.tar"} {
		path := filepath.Join(dir, "cache", name)
		if err := MarkUsed(path); err != nil {
			t.Fatalf("MarkUsed(%s): %v", name, err)
		}
		if fi, err := os.Lstat(path); err != nil || fi.ModTime().Before(now) {
			t.Errorf("%s after MarkUsed: %v, %v; want a time after %v", name, fi.ModTime(), err, now)
		}
	}
	if fi, err := os.Stat(precious); err != nil || !fi.ModTime().Equal(long) {
		t.Errorf("a link's target after MarkUsed: %v, %v; want it untouched", fi.ModTime(), err)
	}
}

// TestShellPrune runs scripts/cache-prune.sh's cache_prune, the shell
// scripts' pruning, on cases like TestPrune's: its entries are the
// directories and files matching a pattern, each one version, their
// locks inside them.
func TestShellPrune(t *testing.T) {
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "cache-prune.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		files map[string]file
		want  []string // left in the cache dir
	}{
		{name: "current versions stay, however old",
			files: map[string]file{"criu-1-a": {dir: true, at: long}, "criu-1-a/criu": {at: long}, "criu-1-a/.lock": {at: long}},
			want:  []string{"criu-1-a/", "criu-1-a/.lock", "criu-1-a/criu"}},
		{name: "other versions go, with their locks; partial ones too",
			files: map[string]file{
				"criu-1-a": {dir: true, at: long},
				"criu-0-b": {dir: true, at: long}, "criu-0-b/criu": {at: long}, "criu-0-b/.lock": {at: long},
				"criu-0-c.tmp.12": {dir: true, at: long}, "criu-0-c.tmp.12/criu": {at: long},
				"criu-0-d.env": {at: long},
			},
			want: []string{"criu-1-a/"}},
		{name: "a version used lately stays",
			files: map[string]file{"criu-0-b": {dir: true, at: lately}, "criu-0-b/.lock": {at: long}},
			want:  []string{"criu-0-b/", "criu-0-b/.lock"}},
		{name: "a version whose lock is held stays",
			files: map[string]file{"criu-0-b": {dir: true, at: long}, "criu-0-b/.lock": {at: long, locked: true}},
			want:  []string{"criu-0-b/", "criu-0-b/.lock"}},
		{name: "names the pattern does not match stay",
			files: map[string]file{"kube": {dir: true, at: long}, "v2.tar": {at: long}, ".criu-0-b": {dir: true, at: long}},
			want:  []string{".criu-0-b/", "kube/", "v2.tar"}},
		{name: "links stay, never followed",
			files: map[string]file{
				"criu-0-b": {link: "outside"}, "criu-0-c": {dir: true, at: long}, "criu-0-c/.lock": {link: "outside/precious"},
				"criu-0-d": {dir: true, at: long}, "criu-0-d/etc": {link: "outside"},
			},
			want: []string{"criu-0-b", "criu-0-c/", "criu-0-c/.lock"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := filepath.Join(t.TempDir(), "cache")
			if err := os.Mkdir(cache, 0o755); err != nil {
				t.Fatal(err)
			}
			makeFiles(t, cache, tc.files)
			cmd := exec.Command("bash", "-euo", "pipefail", "-c", `source "$1"; cache_prune "$2" 'criu-*' criu-1-a`, "test", script, cache)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("cache_prune: %v\n%s", err, out)
			}
			if diff := cmp.Diff(tc.want, tree(t, cache)); diff != "" {
				t.Errorf("left in the cache dir (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"precious"}, tree(t, filepath.Join(filepath.Dir(cache), "outside"))); diff != "" {
				t.Errorf("left outside the cache dir (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPruneMounted checks that Prune leaves a version with a mount at or
// below one of its directories (a build killed with its chroot's /proc
// mounted): removing it would reach what is mounted.
func TestPruneMounted(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Missing(t, "mounting needs root")
	}
	for _, at := range []string{"v2.build/rootfs/proc", "v3.npm.d"} {
		t.Run(at, func(t *testing.T) {
			cache := filepath.Join(t.TempDir(), "cache")
			version, _ := hashVersion(at)
			makeFiles(t, cache, map[string]file{at: {dir: true}, at + "/kept": {}})
			if err := unix.Mount("tmpfs", filepath.Join(cache, at), "tmpfs", 0, "size=1m"); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { unix.Unmount(filepath.Join(cache, at), unix.MNT_DETACH) })
			if err := os.WriteFile(filepath.Join(cache, at, "on-the-mount"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			top, _, _ := strings.Cut(at, "/")
			for _, dir := range []string{filepath.Join(cache, top), filepath.Join(cache, at)} {
				if err := os.Chtimes(dir, long, long); err != nil {
					t.Fatal(err)
				}
			}
			removed, err := Prune(cache, hashVersion, nil, now)
			if len(removed) > 0 || err == nil || !strings.Contains(err.Error(), "has mounts") {
				t.Errorf("Prune = %v, %v; want nothing removed and an error naming the mount", removed, err)
			}
			if _, err := os.Stat(filepath.Join(cache, at, "on-the-mount")); err != nil {
				t.Errorf("the mounted file system of version %s: %v", version, err)
			}
		})
	}
}

// TestHold checks that an entry held by a process using it stays through
// both prunes, however old, and goes once let go: Go's (an image's file
// beside its lock) and the scripts' (a directory with its lock inside).
func TestHold(t *testing.T) {
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "cache-prune.sh"))
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(t.TempDir(), "cache")
	makeFiles(t, cache, map[string]file{
		"v2.tar": {at: long}, "v2.tar.lock": {at: long},
		"criu-0-b": {dir: true, at: long}, "criu-0-b/criu": {at: long}, "criu-0-b/.lock": {at: long},
	})
	if _, err := Hold(filepath.Join(cache, "criu-0-a", ".lock")); err == nil {
		t.Error("Hold of a missing lock succeeded")
	}
	var releases []func()
	for _, lock := range []string{"v2.tar.lock", "criu-0-b/.lock"} {
		release, err := Hold(filepath.Join(cache, lock))
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, release)
	}
	prune := func() {
		t.Helper()
		if _, err := Prune(cache, hashVersion, map[string]bool{"v3": true}, now); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", `source "$1"; cache_prune "$2" 'criu-*' criu-1-a`, "test", script, cache)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("cache_prune: %v\n%s", err, out)
		}
	}
	prune()
	if diff := cmp.Diff([]string{"criu-0-b/", "criu-0-b/.lock", "criu-0-b/criu", "v2.tar", "v2.tar.lock"}, tree(t, cache)); diff != "" {
		t.Errorf("held, left in the cache dir (-want +got):\n%s", diff)
	}
	for _, release := range releases {
		release()
	}
	prune()
	if diff := cmp.Diff([]string(nil), tree(t, cache)); diff != "" {
		t.Errorf("let go, left in the cache dir (-want +got):\n%s", diff)
	}
}
