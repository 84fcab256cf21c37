package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/runtime/runtimetest"
)

func unpackEntries(t *testing.T, dir string, entries ...entry) (int64, error) {
	t.Helper()
	return unpack(context.Background(), bytes.NewReader(tarBytes(t, entries...)), dir, slog.New(slog.DiscardHandler))
}

// TestUnpackRejectsEscapes feeds layers that try to write outside the
// layer dir. host stands in for a host directory such as /etc: the layer
// "evil -> /etc, evil/passwd" is tested as "evil -> host, evil/passwd" so
// that a regression cannot damage the machine running the test.
func TestUnpackRejectsEscapes(t *testing.T) {
	tests := []struct {
		name    string
		entries func(host string) []entry
	}{
		{"absolute name", func(host string) []entry {
			return []entry{{name: filepath.Join(host, "passwd"), body: "pwned"}}
		}},
		{"dotdot", func(string) []entry {
			return []entry{{name: "../passwd", body: "pwned"}}
		}},
		{"dotdot inside", func(string) []entry {
			return []entry{{name: "a/../../passwd", body: "pwned"}}
		}},
		{"file through symlink", func(host string) []entry {
			return []entry{
				{name: "evil", typ: tar.TypeSymlink, link: host},
				{name: "evil/passwd", body: "pwned"},
			}
		}},
		{"file through relative symlink", func(host string) []entry {
			return []entry{
				{name: "d/", typ: tar.TypeDir},
				{name: "d/evil", typ: tar.TypeSymlink, link: "../../../../../../../../../../" + host},
				{name: "d/evil/passwd", body: "pwned"},
			}
		}},
		{"dir through symlink", func(host string) []entry {
			return []entry{
				{name: "evil", typ: tar.TypeSymlink, link: host},
				{name: "evil/newdir/", typ: tar.TypeDir},
			}
		}},
		{"symlink replacing a dir", func(host string) []entry {
			return []entry{
				{name: "evil/", typ: tar.TypeDir},
				{name: "evil", typ: tar.TypeSymlink, link: host},
				{name: "evil/passwd", body: "pwned"},
			}
		}},
		{"hardlink out of the layer", func(string) []entry {
			return []entry{{name: "h", typ: tar.TypeLink, link: "../secret"}}
		}},
		{"hardlink through symlink", func(host string) []entry {
			return []entry{
				{name: "evil", typ: tar.TypeSymlink, link: host},
				{name: "h", typ: tar.TypeLink, link: "evil/secret"},
			}
		}},
		{"whiteout through symlink", func(host string) []entry {
			return []entry{
				{name: "evil", typ: tar.TypeSymlink, link: host},
				{name: "evil/.wh.secret", body: ""},
			}
		}},
		{"opaque through symlink", func(host string) []entry {
			return []entry{
				{name: "evil", typ: tar.TypeSymlink, link: host},
				{name: "evil/.wh..wh..opq", body: ""},
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host := t.TempDir()
			if err := os.WriteFile(filepath.Join(host, "secret"), []byte("keep"), 0o600); err != nil {
				t.Fatal(err)
			}
			layer := filepath.Join(t.TempDir(), "layer")
			if err := os.Mkdir(layer, 0o755); err != nil {
				t.Fatal(err)
			}
			_, err := unpackEntries(t, layer, tt.entries(host)...)
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("unpack error = %v, want ErrInvalidArgument", err)
			}
			if got := dirEntries(t, host); len(got) != 1 || got[0] != "secret" {
				t.Errorf("host dir now holds %v, want only secret", got)
			}
			if got := readFile(t, filepath.Join(host, "secret")); got != "keep" {
				t.Errorf("host secret = %q, want keep", got)
			}
			if _, err := unix.Getxattr(host, opaqueXattr, make([]byte, 8)); err == nil {
				t.Errorf("host dir got %s", opaqueXattr)
			}
			if exists(filepath.Join(filepath.Dir(layer), "passwd")) {
				t.Error("entry written next to the layer dir")
			}
		})
	}
}

func TestUnpackEntries(t *testing.T) {
	dir := t.TempDir()
	size, err := unpackEntries(t, dir,
		entry{name: "./", typ: tar.TypeDir, mode: 0o755},
		entry{name: "./etc/", typ: tar.TypeDir, mode: 0o750, uid: 0, gid: 0},
		entry{name: "./etc/conf", body: "v1"},
		entry{name: "./etc/conf", body: "v2"}, // a later entry replaces an earlier one
		entry{name: "bin/tool", body: "#!/bin/sh\n", mode: 0o4755},
		entry{name: "bin/tool-link", typ: tar.TypeLink, link: "bin/tool"},
		entry{name: "bin/sh", typ: tar.TypeSymlink, link: "/usr/bin/dash"},
		entry{name: "home/user/", typ: tar.TypeDir, mode: 0o700, uid: 1000, gid: 1000},
		entry{name: "home/user/.profile", body: "x", uid: 1000, gid: 1000, mode: 0o600},
		entry{name: "run/fifo", typ: tar.TypeFifo, mode: 0o600},
		entry{name: "dev/null", typ: tar.TypeChar, mode: 0o666},
		entry{name: "xattr", body: "x", xattrs: map[string]string{"user.agent2env": "yes", "trusted.overlay.opaque": "y"}},
	)
	if err != nil {
		t.Fatalf("unpack: %v", err)
	}
	if want := int64(len("v2") + len("#!/bin/sh\n") + 2); size != want {
		t.Errorf("size = %d, want %d", size, want)
	}
	if got := readFile(t, filepath.Join(dir, "etc/conf")); got != "v2" {
		t.Errorf("etc/conf = %q, want v2", got)
	}

	tests := []struct {
		path     string
		mode     os.FileMode
		uid, gid int
	}{
		{"etc", os.ModeDir | 0o750, 0, 0},
		{"bin/tool", os.ModeSetuid | 0o755, 0, 0},
		{"home/user", os.ModeDir | 0o700, 1000, 1000},
		{"home/user/.profile", 0o600, 1000, 1000},
		{"run/fifo", os.ModeNamedPipe | 0o600, 0, 0},
		{"bin/sh", os.ModeSymlink | 0o777, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			fi, err := os.Lstat(filepath.Join(dir, tt.path))
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode() != tt.mode {
				t.Errorf("mode = %v, want %v", fi.Mode(), tt.mode)
			}
			if !fi.ModTime().Equal(testMtime) {
				t.Errorf("mtime = %v, want %v", fi.ModTime(), testMtime)
			}
			st := fi.Sys().(*syscall.Stat_t)
			if os.Geteuid() == 0 && (int(st.Uid) != tt.uid || int(st.Gid) != tt.gid) {
				t.Errorf("owner = %d:%d, want %d:%d", st.Uid, st.Gid, tt.uid, tt.gid)
			}
		})
	}
	if target, err := os.Readlink(filepath.Join(dir, "bin/sh")); err != nil || target != "/usr/bin/dash" {
		t.Errorf("bin/sh -> %q, %v; want /usr/bin/dash", target, err)
	}
	a, _ := os.Stat(filepath.Join(dir, "bin/tool"))
	b, _ := os.Stat(filepath.Join(dir, "bin/tool-link"))
	if !os.SameFile(a, b) {
		t.Error("bin/tool-link is not a hardlink of bin/tool")
	}
	if exists(filepath.Join(dir, "dev/null")) {
		t.Error("device node created; devices must be skipped")
	}
	buf := make([]byte, 16)
	if n, err := unix.Getxattr(filepath.Join(dir, "xattr"), "user.agent2env", buf); err != nil || string(buf[:n]) != "yes" {
		t.Errorf("user.agent2env xattr = %q, %v; want yes", buf[:n], err)
	}
	if _, err := unix.Getxattr(filepath.Join(dir, "xattr"), "trusted.overlay.opaque", buf); err == nil {
		t.Error("overlay xattr from the layer was applied")
	}
}

// TestWhiteouts unpacks a layer with OCI whiteouts, checks they became
// overlayfs whiteouts, then mounts the layers as overlay lowerdirs and
// checks what a sandbox would see.
func TestWhiteouts(t *testing.T) {
	runtimetest.RequiresRoot(t)
	s := newTestStore(t)
	base := gzipLayer(t,
		entry{name: "a/", typ: tar.TypeDir},
		entry{name: "a/deleted", body: "old"},
		entry{name: "a/kept", body: "kept"},
		entry{name: "gone.txt", body: "old"},
		entry{name: "gonedir/", typ: tar.TypeDir},
		entry{name: "gonedir/file", body: "old"},
		entry{name: "opq/", typ: tar.TypeDir},
		entry{name: "opq/old", body: "old"},
	)
	upper := gzipLayer(t,
		entry{name: "a/.wh.deleted"},
		entry{name: ".wh.gone.txt"},
		entry{name: ".wh.gonedir"},
		entry{name: "opq/", typ: tar.TypeDir},
		entry{name: "opq/.wh..wh..opq"},
		entry{name: "opq/new", body: "new"},
		entry{name: "fresh/.wh.never-existed"}, // parent only implied by the whiteout
	)
	img := storeImage(t, s, "example.com/whiteouts:v1", testImage(t, "A=1", base, upper))
	if len(img.Layers) != 2 {
		t.Fatalf("got %d layers, want 2", len(img.Layers))
	}
	top := img.Layers[1]

	for _, p := range []string{"a/deleted", "gone.txt", "gonedir", "fresh/never-existed"} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(top, p), &st); err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 || st.Uid != 0 || st.Gid != 0 {
			t.Errorf("%s: mode %o rdev %d owner %d:%d, want a 0:0 char device owned by root", p, st.Mode, st.Rdev, st.Uid, st.Gid)
		}
	}
	buf := make([]byte, 4)
	if n, err := unix.Lgetxattr(filepath.Join(top, "opq"), opaqueXattr, buf); err != nil || string(buf[:n]) != "y" {
		t.Errorf("opq %s = %q, %v; want y", opaqueXattr, buf[:n], err)
	}
	err := filepath.Walk(top, func(p string, fi os.FileInfo, err error) error {
		if err == nil && strings.HasPrefix(fi.Name(), whiteoutPrefix) {
			t.Errorf("OCI whiteout file left in the layer: %s", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	// overlayfs lists lowerdirs top first.
	mnt := t.TempDir()
	opts := "lowerdir=" + img.Layers[1] + ":" + img.Layers[0]
	if err := unix.Mount("overlay", mnt, "overlay", unix.MS_RDONLY, opts); err != nil {
		t.Fatalf("mount overlay (%s): %v", opts, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	for _, tt := range []struct {
		path    string
		visible bool
	}{
		{"a/kept", true},
		{"a/deleted", false},
		{"gone.txt", false},
		{"gonedir", false},
		{"opq/new", true},
		{"opq/old", false},
		{"fresh/never-existed", false},
	} {
		if got := exists(filepath.Join(mnt, tt.path)); got != tt.visible {
			t.Errorf("%s visible = %v, want %v", tt.path, got, tt.visible)
		}
	}
}
