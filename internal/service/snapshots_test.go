package service

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
	"github.com/agent2env/agent2env/internal/sandbox"
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
