package oci

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/runtime/runtimetest"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// TestValidatePersistence checks that persistence sizes the disk, and
// that what the runtime cannot give is refused, naming the field.
func TestValidatePersistence(t *testing.T) {
	layer := t.TempDir()
	rt := &Runtime{maxDisk: 1 << 30, cfg: Config{Root: "/tmp/a2e-x", DefaultResources: sandbox.Resources{
		MilliCPU: 1000, MemoryBytes: 1 << 30, Pids: 512, DiskBytes: 256 << 20,
	}}}
	for _, tc := range []struct {
		name     string
		spec     sandbox.Spec
		wantDisk int64
		wantErr  string
	}{
		{"no persistence", sandbox.Spec{}, 256 << 20, ""},
		{"size", sandbox.Spec{Persistence: &sandbox.Persistence{SizeBytes: 64 << 20, Retain: true}}, 64 << 20, ""},
		{"size rounded to blocks", sandbox.Spec{Persistence: &sandbox.Persistence{SizeBytes: 64<<20 + 1}}, 64<<20 + 4096, ""},
		{"size over the disk limit", sandbox.Spec{Resources: sandbox.Resources{DiskBytes: 32 << 20},
			Persistence: &sandbox.Persistence{SizeBytes: 512 << 20}}, 512 << 20, ""},
		{"largest", sandbox.Spec{Persistence: &sandbox.Persistence{SizeBytes: 1 << 30}}, 1 << 30, ""},
		{"beyond the file system", sandbox.Spec{Persistence: &sandbox.Persistence{SizeBytes: 1<<30 + 1}}, 0, "persistence.size 1073741825 is more than"},
		{"tiny", sandbox.Spec{Persistence: &sandbox.Persistence{SizeBytes: 1 << 20}}, 0, "disk size"},
		{"zero", sandbox.Spec{Persistence: &sandbox.Persistence{}}, 0, "persistence.size 0"},
		{"storage class", sandbox.Spec{Persistence: &sandbox.Persistence{SizeBytes: 64 << 20, StorageClass: "fast"}}, 0, `persistence.storageClassName "fast"`},
		{"runtime class", sandbox.Spec{RuntimeClass: "gvisor"}, 0, `runtimeClassName "gvisor"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := tc.spec
			sp.ID = "sb1"
			res, err := rt.validate(&sp, []string{layer})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && (!errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want an invalid argument saying %q", err, tc.wantErr)
			case err == nil && res.DiskBytes != tc.wantDisk:
				t.Errorf("disk %d, want %d", res.DiskBytes, tc.wantDisk)
			}
		})
	}
}

// TestPersistence checks on real sandboxes that persistence sizes the
// disk the sandbox sees, that Retain keeps it, readable, after Delete,
// and that Delete removes the others.
func TestPersistence(t *testing.T) {
	runtimetest.RequiresRoot(t)
	ctx := context.Background()
	root := filepath.Join(newRoot(t), "oci") // New makes it
	rt := newRuntime(t, root, "runc")
	start := func(id string, persist *sandbox.Persistence, script string) string {
		t.Helper()
		sp := newSpec(t, id)
		sp.Resources.DiskBytes = 32 << 20
		sp.Persistence = persist
		if err := rt.Create(ctx, sp); err != nil {
			t.Fatal(err)
		}
		if err := rt.Start(ctx, id); err != nil {
			t.Fatal(err)
		}
		c, err := rt.Agent(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		code, out := run(t, c, script)
		if code != 0 {
			t.Fatalf("%q exited %d: %s", script, code, out)
		}
		return out
	}
	// df's total of /workspace: the disk, less ext4's metadata.
	const script = "df -k /workspace | tail -n 1 | awk '{print $2}'; echo kept > /workspace/file; mkdir -p ~/.cache && echo home > ~/.cache/x"
	for _, tc := range []struct {
		id      string
		persist *sandbox.Persistence
		size    int64
	}{
		{"scratch", nil, 32 << 20},
		{"persist-delete", &sandbox.Persistence{SizeBytes: 96 << 20}, 96 << 20},
		{"persist-retain", &sandbox.Persistence{SizeBytes: 80 << 20, Retain: true}, 80 << 20},
	} {
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.SplitN(start(tc.id, tc.persist, script), "\n", 2)[0]), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if got := kb << 10; got > tc.size || got < tc.size*9/10 {
			t.Errorf("%s: df says /workspace has %d bytes, want about %d", tc.id, got, tc.size)
		}
		if err := rt.Delete(ctx, tc.id); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(rt.dir(tc.id)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: its dir is still there after Delete: %v", tc.id, err)
		}
	}
	kept, err := filepath.Glob(filepath.Join(root, dirRetained, "*"))
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(root, dirRetained, "persist-retain.img")
	if len(kept) != 1 || kept[0] != want {
		t.Fatalf("retained %v, want only %s", kept, want)
	}
	// The retained disk holds the files, as an operator reads them.
	mnt := t.TempDir()
	if err := mountDisk(want, mnt); err != nil {
		t.Fatal(err)
	}
	defer unmount(mnt)
	for p, content := range map[string]string{diskWorkspace + "/file": "kept\n", diskHome + "/.cache/x": "home\n"} {
		if b, err := os.ReadFile(filepath.Join(mnt, p)); err != nil || string(b) != content {
			t.Errorf("retained %s = %q, %v; want %q", p, b, err, content)
		}
	}
	// Recover leaves retained disks alone.
	if _, err := newRuntime(t, root, "runc").Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(want); err != nil {
		t.Errorf("retained disk after Recover: %v", err)
	}
}
