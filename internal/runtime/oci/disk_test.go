package oci

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agent2env/agent2env/internal/runtime/runtimetest"
)

// TestAttachLoopConcurrent attaches files all at once: each gets a device
// of its own, bound to it, and a claim is never handed out twice while it
// is being configured.
func TestAttachLoopConcurrent(t *testing.T) {
	runtimetest.RequiresRoot(t)
	dir := t.TempDir()
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	a, err := loops.claim(int(ctl.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	b, err := loops.claim(int(ctl.Fd()))
	loops.release(a)
	if err != nil {
		t.Fatal(err)
	}
	loops.release(b)
	if a == b || loopBound(a) || loopBound(b) {
		t.Fatalf("two claims held at once got loop%d and loop%d (bound: %v, %v)", a, b, loopBound(a), loopBound(b))
	}

	const n = 8
	devs := make([]*os.File, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		p := filepath.Join(dir, strconv.Itoa(i)+".img")
		if err := os.WriteFile(p, []byte(strings.Repeat("x", 1<<20)), 0o600); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				errs[i] = err
				return
			}
			defer f.Close()
			devs[i], errs[i] = attachLoop(f)
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for i, d := range devs {
		if errs[i] != nil {
			t.Fatalf("attach %d: %v", i, errs[i])
		}
		defer d.Close() // LO_FLAGS_AUTOCLEAR: the last close detaches it
		if seen[d.Name()] {
			t.Errorf("%s attached twice", d.Name())
		}
		seen[d.Name()] = true
		back, err := os.ReadFile("/sys/block/" + filepath.Base(d.Name()) + "/loop/backing_file")
		if want := filepath.Join(dir, strconv.Itoa(i)+".img"); err != nil || strings.TrimSpace(string(back)) != want {
			t.Errorf("%s is backed by %q (%v), want %s", d.Name(), back, err, want)
		}
	}
}

// TestSpreadSubdirs marks a directory on ext4 as a top directory, once.
func TestSpreadSubdirs(t *testing.T) {
	dir := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type != unix.EXT4_SUPER_MAGIC {
		t.Skipf("%s is not on ext2/3/4 (file system magic %#x): FS_TOPDIR_FL is theirs", dir, st.Type)
	}
	for range 2 {
		if err := spreadSubdirs(dir); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil || flags&fsTopdirFL == 0 {
		t.Fatalf("flags %#x, %v: want FS_TOPDIR_FL set", flags, err)
	}
}
