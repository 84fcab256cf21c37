package oci

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

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
