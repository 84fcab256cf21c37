package oci

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/runtime/runtimetest"
	"github.com/agent2env/agent2env/internal/testenv"
)

// TestFreezer freezes and thaws a counting shell in a cgroup of each
// freezer the host has: v1's freezer controller and cgroup2's (on a hybrid
// host, its empty hierarchy has a freezer in every cgroup too), so that
// both code paths run on one host.
func TestFreezer(t *testing.T) {
	runtimetest.RequiresRoot(t)
	cg, err := readCgroups("agent2env-test")
	if err != nil {
		t.Fatal(err)
	}
	var tested int
	for _, h := range cg.all {
		if !h.v2 && !strings.Contains(strings.Join(h.controllers, ","), "freezer") {
			continue
		}
		tested++
		t.Run(map[bool]string{true: "v2", false: "v1"}[h.v2], func(t *testing.T) {
			dir, err := os.MkdirTemp(h.dir, "a2e-freezer-")
			if err != nil {
				t.Fatal(err)
			}
			f := freezer{dir: dir, v2: h.v2}
			counter := filepath.Join(t.TempDir(), "n")
			cmd := exec.Command("sh", "-c", `i=0; while :; do i=$((i+1)); echo $i >>`+counter+`; done`)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				_ = f.thaw()
				_ = cmd.Wait()
				_ = os.Remove(dir)
			})
			if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0); err != nil {
				t.Fatal(err)
			}
			// The file's size counts the loop's turns.
			read := func() int64 {
				fi, err := os.Stat(counter)
				if err != nil {
					return 0
				}
				return fi.Size()
			}
			time.Sleep(50 * time.Millisecond)
			start := time.Now()
			if err := f.freeze(context.Background()); err != nil {
				t.Fatalf("freeze: %v", err)
			}
			t.Logf("frozen in %s", time.Since(start))
			if frozen, err := f.frozen(); err != nil || !frozen {
				t.Fatalf("frozen = %v, %v after freeze", frozen, err)
			}
			before := read()
			time.Sleep(200 * time.Millisecond)
			if after := read(); after != before {
				t.Fatalf("the counter went from %d to %d while frozen", before, after)
			}
			if err := f.thaw(); err != nil {
				t.Fatalf("thaw: %v", err)
			}
			if frozen, err := f.frozen(); err != nil || frozen {
				t.Fatalf("frozen = %v, %v after thaw", frozen, err)
			}
			time.Sleep(100 * time.Millisecond)
			if after := read(); after <= before {
				t.Fatalf("the counter stayed at %d after thaw", after)
			}
		})
	}
	if tested == 0 {
		testenv.Skip(t, "the host mounts neither a v1 freezer nor cgroup2")
	}
}

// TestHasFreezer checks which cgroup layouts the runtime can pause on.
func TestHasFreezer(t *testing.T) {
	v1 := func(ctrls ...string) hierarchy { return hierarchy{dir: "/x", controllers: ctrls} }
	v2 := hierarchy{dir: "/sys/fs/cgroup", v2: true}
	for _, tc := range []struct {
		name string
		all  []hierarchy
		want bool
	}{
		{"pure v2", []hierarchy{v2}, true},
		{"v1 with freezer", []hierarchy{v1("cpu"), v1("freezer")}, true},
		{"hybrid with freezer", []hierarchy{v1("memory"), v1("freezer"), v2}, true},
		{"hybrid without freezer", []hierarchy{v1("memory"), v2}, false},
		{"v1 without freezer", []hierarchy{v1("memory")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := (&cgroups{all: tc.all}).hasFreezer(); got != tc.want {
				t.Errorf("hasFreezer = %v, want %v", got, tc.want)
			}
		})
	}
}

// BenchmarkPause times a pause and a resume of a running sandbox, by the
// freezer written directly (the runtime's Pause and Resume) and by `runc
// pause` and `runc resume`, which do the same after starting a Go binary:
// the measurement behind writing the freezer directly.
func BenchmarkPause(b *testing.B) {
	runtimetest.RequiresRoot(b)
	root := newRoot(b)
	rt := newRuntime(b, root, "runc")
	ctx := context.Background()
	sp := newSpec(b, "bench-pause")
	sp.Resources.DiskBytes = 32 << 20
	if err := rt.Create(ctx, sp); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rt.Delete(ctx, sp.ID) })
	if err := rt.Start(ctx, sp.ID); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name          string
		pause, resume func() error
	}{
		{"freezer", func() error { return rt.Pause(ctx, sp.ID) }, func() error { return rt.Resume(ctx, sp.ID) }},
		{"runc", func() error { _, err := rt.oci.output(ctx, "pause", sp.ID); return err },
			func() error { _, err := rt.oci.output(ctx, "resume", sp.ID); return err }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if err := bc.pause(); err != nil {
					b.Fatal(err)
				}
				if err := bc.resume(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
