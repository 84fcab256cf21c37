package oci

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/runtime/runtimetest"
)

// TestThickDisks runs a runtime with thick disks on a host file system of
// its own, 256 MiB: a thick disk is allocated whole when it is made; one
// that does not fit with the reserve free is refused with NO_SPACE
// naming its size, leaving no sandbox dir, mount or loop device; a thin
// one of that size is made as before, and is refused when it starts
// (which allocates a disk made thin); one that fits is allocated at its
// start. A restore from a snapshot (a fork's too) allocates its copy of
// the disk, or is refused as a create is. Then the host file system is filled by another writer, and the
// thick sandbox still writes its whole disk, fsync'd, and reads it back
// from the host's disk. With thin disks the sandbox's dd fails there
// (the kernel logs lost page writes of its loop device).
func TestThickDisks(t *testing.T) {
	runtimetest.RequiresRoot(t)
	ctx := context.Background()
	host := hostFS(t, 256<<20)
	root := filepath.Join(host, "oci")
	rt, err := New(Config{
		Root:          root,
		RuntimeBinary: testBinary(t, "crun"),
		AgentBinary:   agentAlone(t), // the whole daemon's binary would take 100 MiB of the host
		Images:        testImages{},
		CRIU:          testCRIU(t),
		Logger:        slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
		ThickDisks:    true,
		DiskReserve:   16 << 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	deleteLeftOnCleanup(t, rt)
	create := func(id string, size int64, thick bool) error {
		rt.cfg.ThickDisks = thick
		defer func() { rt.cfg.ThickDisks = true }()
		sp := newSpec(t, id)
		sp.Resources.DiskBytes = size
		return rt.Create(ctx, sp)
	}

	if err := create("thick", 64<<20, true); err != nil {
		t.Fatal(err)
	}
	if alloc, size := allocated(t, rt, "thick"); alloc < size {
		t.Errorf("thick disk: %d of its %d bytes allocated", alloc, size)
	}
	if err := rt.Start(ctx, "thick"); err != nil {
		t.Fatal(err)
	}

	err = create("big", 160<<20, true)
	if errdefs.Code(err) != api.CodeNoSpace || !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("thick create past the host's room: %v (code %q), want NO_SPACE", err, errdefs.Code(err))
	}
	if msg := err.Error(); !strings.Contains(msg, "disk of 160Mi") || !strings.Contains(msg, "16Mi free (--disk-reserve)") {
		t.Errorf("refusal %q does not name the disk's size and the reserve", msg)
	}
	assertGone(t, rt, "big")

	if err := create("thin", 160<<20, false); err != nil {
		t.Fatalf("thin create of the disk refused thick: %v", err)
	}
	if alloc, size := allocated(t, rt, "thin"); alloc > size/4 {
		t.Errorf("thin disk: %d of its %d bytes allocated, want a sparse file", alloc, size)
	}
	if err := rt.Start(ctx, "thin"); errdefs.Code(err) != api.CodeNoSpace {
		t.Errorf("start of a thin disk that does not fit, thick: %v, want NO_SPACE", err)
	}
	if err := create("small", 32<<20, false); err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx, "small"); err != nil {
		t.Fatal(err)
	}
	if alloc, size := allocated(t, rt, "small"); alloc < size {
		t.Errorf("disk made thin, started thick: %d of its %d bytes allocated", alloc, size)
	}
	for _, id := range []string{"thin", "small"} {
		if err := rt.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}

	// A restore (and so a fork) copies the snapshot's disk, thin, and
	// allocates it; the snapshot's copy stays sparse.
	snap := filepath.Join(host, "snap")
	if err := rt.Checkpoint(ctx, "thick", snap, true); err != nil {
		t.Fatal(err)
	}
	if err := rt.Restore(ctx, "copy", snap, nil); err != nil {
		t.Fatal(err)
	}
	if alloc, size := allocated(t, rt, "copy"); alloc < size {
		t.Errorf("restored disk: %d of its %d bytes allocated", alloc, size)
	}
	if err := rt.Delete(ctx, "copy"); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(host, "filler")
	fillTo(t, filler, 64<<20) // 64 MiB left: not the disk and the reserve
	if err := rt.Restore(ctx, "nocopy", snap, nil); errdefs.Code(err) != api.CodeNoSpace {
		t.Errorf("restore past the host's room: %v, want NO_SPACE", err)
	}
	assertGone(t, rt, "nocopy")
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}

	// Another writer takes every free block of the host.
	fill(t, filepath.Join(host, "fill"))
	c, err := rt.Agent(ctx, "thick")
	if err != nil {
		t.Fatal(err)
	}
	out := mustExec(t, c, `set -e
mib=$(( $(df -k /workspace | tail -1 | awk '{print $4}') / 1024 - 1 ))
dd if=/dev/urandom of=/workspace/data bs=1M count=$mib conv=fsync
echo $mib $(md5sum < /workspace/data)`)
	var mib int
	var sum string
	if _, err := fmt.Sscan(out, &mib, &sum); err != nil || mib < 48 {
		t.Fatalf("write: %q (%v), want the MiB written and their md5", out, err)
	}
	// Read back from the host's disk, not the page caches.
	unix.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0o200); err != nil {
		t.Fatal(err)
	}
	if back := mustExec(t, c, `md5sum < /workspace/data`); strings.Fields(back)[0] != sum {
		t.Errorf("read back %q, wrote %s", back, sum)
	}
	if err := rt.Delete(ctx, "thick"); err != nil {
		t.Fatal(err)
	}
	runtimetest.AssertNoLeaks(t, root)
}

// hostFS mounts a fresh ext4 file system of size bytes (no blocks
// reserved for root: full is full) for as long as t runs and returns its
// mount point. Its loop device clears itself at the unmount.
func hostFS(t *testing.T, size int64) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "a2e-host-")
	if err != nil {
		t.Fatal(err)
	}
	img, mnt := filepath.Join(dir, "host.img"), filepath.Join(dir, "m")
	t.Cleanup(func() {
		if err := unmount(mnt); err != nil {
			t.Errorf("unmount the host file system: %v", err)
			return
		}
		if ok, _ := isMountpoint(mnt); !ok {
			os.RemoveAll(dir)
		}
	})
	mkfs, err := lookPath("mkfs.ext4", "/usr/sbin", "/sbin")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(mkfs, "-q", "-F", "-m", "0", img, strconv.FormatInt(size>>10, 10)+"k").CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", mkfs, err, out)
	}
	if err := mountDisk(img, mnt); err != nil {
		t.Fatal(err)
	}
	return mnt
}

// agentAlone builds the agent alone (cmd/agent2env-agent).
func agentAlone(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "agent2env-agent")
	cmd := exec.Command("go", "build", "-o", bin, "../../../cmd/agent2env-agent")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the agent: %v: %s", err, out)
	}
	return bin
}

// allocated returns the bytes of sandbox id's disk allocated on the host,
// and its size.
func allocated(t *testing.T, rt *Runtime, id string) (alloc, size int64) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(rt.dir(id), fileDisk), &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512, st.Size
}

// assertGone fails t when anything of sandbox id is left: its dir, a
// mount below it, a loop device backed by a file in it.
func assertGone(t *testing.T, rt *Runtime, id string) {
	t.Helper()
	dir := rt.dir(id)
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dir of refused sandbox %s: %v, want none", id, err)
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err != nil || strings.Contains(string(b), dir+"/") {
		t.Errorf("mounts of refused sandbox %s left (%v)", id, err)
	}
	backing, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, p := range backing {
		if b, err := os.ReadFile(p); err == nil && strings.HasPrefix(string(b), dir+"/") {
			t.Errorf("%s is still backed by %s", p, bytes.TrimSpace(b))
		}
	}
}

// fill writes path until its file system is full, and syncs it.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := bytes.Repeat([]byte{0xa5}, 1<<20)
	for {
		if _, err = f.Write(buf); err != nil {
			break
		}
	}
	if !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("fill %s: %v, want ENOSPC", path, err)
	}
	_ = f.Sync() // the last block may not fit: full is what is wanted
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil || st.Bavail*uint64(st.Bsize) >= 1<<20 {
		t.Fatalf("host file system after the fill: %d bytes free (%v)", st.Bavail*uint64(st.Bsize), err)
	}
}

// fillTo writes path until its file system has left bytes free.
func fillTo(t *testing.T, path string, left int64) {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(path), &st); err != nil {
		t.Fatal(err)
	}
	n := int64(st.Bavail)*st.Bsize - left
	if n <= 0 {
		t.Fatalf("%s has less than %d bytes free already", filepath.Dir(path), left)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fallocate(int(f.Fd()), 0, 0, n); err != nil {
		t.Fatal(err)
	}
}

// mustExec runs script in the sandbox of c and returns its output, failing
// t unless it exits 0.
func mustExec(t *testing.T, c *agent.Client, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	res, err := c.Exec(ctx, agent.ExecRequest{Shell: script, Timeout: 100 * time.Second}, nil, &out, &errOut)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec %q: exit %d, %v: %s%s", script, res.ExitCode, err, out.String(), errOut.String())
	}
	return out.String()
}

// BenchmarkThickDisks measures create → ready of sandboxes with the
// default disk (1 GiB) thin and thick, in turn in each iteration (who goes
// first alternates), on the file system of /tmp, and reports the p50 of
// each one's Create alone and of its create → ready, and the median of
// thick/thin per iteration.
func BenchmarkThickDisks(b *testing.B) {
	runtimetest.RequiresRoot(b)
	ctx := context.Background()
	rt := newRuntime(b, newRoot(b), "crun")
	var create, ready [2][]time.Duration // thin, thick
	var ratios []float64
	for i := 0; b.Loop(); i++ {
		var took [2]time.Duration
		for k := range 2 {
			thick := (i+k)%2 == 1
			rt.cfg.ThickDisks = thick
			sp := newSpec(b, fmt.Sprintf("b%d-%t", i, thick))
			start := time.Now()
			if err := rt.Create(ctx, sp); err != nil {
				b.Fatal(err)
			}
			made := time.Since(start)
			err := rt.Start(ctx, sp.ID)
			j := 0
			if thick {
				j = 1
			}
			took[j] = time.Since(start)
			create[j], ready[j] = append(create[j], made), append(ready[j], took[j])
			b.StopTimer()
			if derr := rt.Delete(ctx, sp.ID); derr != nil {
				b.Fatal(derr)
			}
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		ratios = append(ratios, float64(took[1])/float64(took[0]))
	}
	p50 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds()) / 1000
	}
	b.ReportMetric(p50(create[0]), "thin-create-p50-ms")
	b.ReportMetric(p50(create[1]), "thick-create-p50-ms")
	b.ReportMetric(p50(ready[0]), "thin-ready-p50-ms")
	b.ReportMetric(p50(ready[1]), "thick-ready-p50-ms")
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "thick/thin-median")
}
