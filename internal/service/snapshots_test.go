package service

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/store"
)

// saving is the fake runtime as a sandbox.Checkpointer: a checkpoint is
// a directory with a file, a restore starts a new fake sandbox and then
// calls restored, when set.
type saving struct {
	*fakeruntime.Runtime
	restored func()
}

func (c *saving) Capabilities() sandbox.Capabilities {
	caps := c.Runtime.Capabilities()
	caps.Checkpoint = true
	return caps
}

func (c *saving) Checkpoint(_ context.Context, _, dir string, _ bool) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "saved"), nil, 0o600)
}

func (c *saving) Restore(ctx context.Context, newID, _ string, labels map[string]string) error {
	if err := c.Create(ctx, &sandbox.Spec{ID: newID, Image: "alpine", Labels: labels}); err != nil {
		return err
	}
	if c.restored != nil {
		c.restored()
	}
	return c.Start(ctx, newID)
}

// newSnapshotEnv is newEnv whose runtime can checkpoint (the restore
// calling restored), its snapshots under snapDir.
func newSnapshotEnv(t *testing.T, restored func()) (e *env, snapDir string) {
	t.Helper()
	e = newEnv(t, "")
	snapDir = filepath.Join(t.TempDir(), "snapshots")
	e.m.Close()
	e.m = manager.New(manager.Config{StartTimeout: 10 * time.Second, SnapshotDir: snapDir},
		&saving{Runtime: e.rt, restored: restored}, e.st, slog.New(slog.DiscardHandler))
	e.sb = NewSandboxes(e.m, "")
	return e, snapDir
}

// A fork of a sandbox whose caller is gone before it is answered leaves
// nothing: neither its copies nor the snapshot it took, which no one
// would learn of.
func TestForkCallerGoneLeavesNoSnapshot(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e, snapDir := newSnapshotEnv(t, cancel)
	parent := e.running(t)
	if _, err := e.sb.Fork(ctx, parent.ID, api.ForkRequest{Count: 2}); err == nil {
		t.Fatal("a fork whose caller left was answered")
	}
	list, err := e.sb.Snapshots(context.Background(), "")
	if err != nil || len(list.Items) != 0 {
		t.Errorf("snapshots after the failed fork: %+v, %v; want none", list, err)
	}
	if files, _ := os.ReadDir(snapDir); len(files) != 0 {
		t.Errorf("files left in the snapshot dir: %v", files)
	}
	if n, err := e.sb.Count(context.Background(), ListOptions{}); err != nil || n != 1 {
		t.Errorf("%d sandboxes (%v) after the failed fork, want its parent alone", n, err)
	}
}

// A sandbox made from a snapshot has its source's contexts, each reached
// by whom reached it there: one made without an API key (as E2B's code
// interpreter makes its default context) stays without, one of the
// caller's stays the caller's, one the source's code made is the copy's
// code's.
func TestRestoreKeepsContextTenants(t *testing.T) {
	e, _ := newSnapshotEnv(t, nil)
	e.sb = NewSandboxes(e.m, "", WithContextRecords(e.st))
	const key = "tenant-a"
	ctx := auth.WithTenant(context.Background(), key)
	parent, err := e.sb.Create(ctx, api.CreateSandboxRequest{Image: "alpine"})
	if err != nil {
		t.Fatal(err)
	}
	if parent.Status != api.StatusRunning {
		t.Fatalf("new sandbox is %s, want running", parent.Status)
	}
	tenants := map[string]string{"ctx-none": "", "ctx-key": key, "ctx-code": auth.SandboxTenant(parent.ID)}
	for id, tenant := range tenants {
		if err := e.st.CreateContext(ctx, &store.Context{ID: id, SandboxID: parent.ID, Language: "python", Type: "kernel", Tenant: tenant, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := e.sb.Snapshot(ctx, parent.ID, api.CreateSnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := e.sb.Create(ctx, api.CreateSandboxRequest{FromSnapshot: snap.ID})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{sb.Contexts["ctx-none"]: "", sb.Contexts["ctx-key"]: key, sb.Contexts["ctx-code"]: auth.SandboxTenant(sb.ID)}
	cs, err := e.st.ListContexts(ctx, store.ContextFilter{SandboxID: sb.ID})
	if err != nil || len(cs) != len(want) {
		t.Fatalf("contexts of the copy: %d, %v; want %d", len(cs), err, len(want))
	}
	for _, c := range cs {
		if w, ok := want[c.ID]; !ok || c.Tenant != w {
			t.Errorf("context %s of the copy: tenant %q, want %q (known: %v)", c.ID, c.Tenant, w, ok)
		}
	}
}

// A snapshot recorded before contexts kept their tenant gives the copies'
// contexts the caller's.
func TestHeldTenantOfOlderSnapshots(t *testing.T) {
	ctx := auth.WithTenant(context.Background(), "tenant-a")
	other := "tenant-b"
	for _, tc := range []struct {
		held heldContext
		want string
	}{
		{heldContext{}, "tenant-a"},
		{heldContext{Tenant: &other}, other},
		{heldContext{Tenant: new(string)}, ""},
	} {
		if got := heldTenant(ctx, tc.held, "src", "copy"); got != tc.want {
			t.Errorf("heldTenant(%+v) = %q, want %q", tc.held, got, tc.want)
		}
	}
}
