package manager

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// checkpointing is the fake runtime as a sandbox.Checkpointer: a
// checkpoint writes the sandbox's id into the snapshot dir, a restore makes
// and starts a fake sandbox; fail makes both fail.
type checkpointing struct {
	*fakeruntime.Runtime
	fail error
}

func (c *checkpointing) Capabilities() sandbox.Capabilities {
	caps := c.Runtime.Capabilities()
	caps.Checkpoint = true
	return caps
}

func (c *checkpointing) Checkpoint(ctx context.Context, id, dir string, leaveRunning bool) error {
	if c.fail != nil {
		return c.fail
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	if !leaveRunning {
		if err := c.Stop(ctx, id, 0); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, "of"), []byte(id), 0o600)
}

func (c *checkpointing) Restore(ctx context.Context, newID, dir string, labels map[string]string) error {
	if c.fail != nil {
		return c.fail
	}
	if _, err := os.ReadFile(filepath.Join(dir, "of")); err != nil {
		return err
	}
	if err := c.Create(ctx, &sandbox.Spec{ID: newID, Image: "alpine", Labels: labels}); err != nil {
		return err
	}
	return c.Start(ctx, newID)
}

// newSnapshotEnv is newEnv whose manager's runtime can checkpoint, with
// snapshots under a temporary dir.
func newSnapshotEnv(t *testing.T) (*env, *checkpointing) {
	t.Helper()
	e := newEnv(t, Config{})
	cp := &checkpointing{Runtime: e.rt}
	cfg := Config{SnapshotDir: filepath.Join(t.TempDir(), "snapshots"), Host: Host{MilliCPU: 1 << 20, MemoryBytes: 1 << 50}}
	e.m.Close()
	e.m = New(cfg, cp, e.st, slog.New(slog.DiscardHandler))
	e.m.now = e.clock.Now
	return e, cp
}

func TestSnapshotRestore(t *testing.T) {
	e, _ := newSnapshotEnv(t)
	ctx := context.Background()
	id := e.running(t)
	snap, err := e.m.Snapshot(ctx, id, false)
	if err != nil {
		t.Fatal(err)
	}
	if snap.SandboxID != id || snap.Image != "alpine" || snap.Status != string(api.SnapshotReady) || snap.SizeBytes <= 0 || snap.Stopped {
		t.Errorf("snapshot = %+v", snap)
	}
	e.waitStatus(t, id, api.StatusRunning)
	// The sandbox goes; the snapshot stays, and makes new sandboxes.
	if err := e.m.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	ttl := 60
	sb, err := e.m.Restore(ctx, snap.ID, RestoreRequest{TTL: &ttl, Metadata: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	if sb.ID == id || sb.Status != string(api.StatusRunning) || sb.TTL != 60 || sb.Metadata["k"] != "v" || sb.CPU != snap.CPU {
		t.Errorf("restored sandbox = %+v", sb)
	}
	if st, err := e.rt.Status(ctx, sb.ID); err != nil || st.Labels["agent2env.snapshot"] != snap.ID {
		t.Errorf("runtime status of the restored sandbox = %+v, %v", st, err)
	}
	list, err := e.m.ListSnapshots(ctx, id)
	if err != nil || len(list) != 1 || list[0].ID != snap.ID {
		t.Errorf("ListSnapshots(%s) = %+v, %v", id, list, err)
	}
	if err := e.m.DeleteSnapshot(ctx, snap.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(e.m.snapshotDir(snap.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("snapshot dir after DeleteSnapshot: %v", err)
	}
	_, err = e.m.GetSnapshot(ctx, snap.ID)
	checkErr(t, err, errdefs.ErrNotFound, api.CodeNotFound)
	_, err = e.m.Restore(ctx, snap.ID, RestoreRequest{})
	checkErr(t, err, errdefs.ErrNotFound, api.CodeNotFound)
}

// A snapshot with stop leaves the sandbox stopped (succeeded), and one of
// a stopped sandbox is 409.
func TestSnapshotStop(t *testing.T) {
	e, _ := newSnapshotEnv(t)
	ctx := context.Background()
	id := e.running(t)
	snap, err := e.m.Snapshot(ctx, id, true)
	if err != nil || !snap.Stopped {
		t.Fatalf("Snapshot(stop) = %+v, %v", snap, err)
	}
	e.waitStatus(t, id, api.StatusSucceeded)
	_, err = e.m.Snapshot(ctx, id, false)
	checkErr(t, err, errdefs.ErrFailedPrecondition, api.CodeConflict)
}

// A runtime that cannot is 501, and nothing is recorded.
func TestSnapshotNotImplemented(t *testing.T) {
	e := newEnv(t, Config{SnapshotDir: t.TempDir()})
	ctx := context.Background()
	id := e.running(t)
	_, err := e.m.Snapshot(ctx, id, false)
	checkErr(t, err, errdefs.ErrNotImplemented, api.CodeNotImplemented)
	if list, err := e.m.ListSnapshots(ctx, ""); err != nil || len(list) != 0 {
		t.Errorf("snapshots after a refusal: %+v, %v", list, err)
	}
}

// A checkpoint or a restore the runtime fails leaves nothing: no snapshot
// record, no sandbox.
func TestSnapshotRuntimeFailure(t *testing.T) {
	e, cp := newSnapshotEnv(t)
	ctx := context.Background()
	id := e.running(t)
	snap, err := e.m.Snapshot(ctx, id, false)
	if err != nil {
		t.Fatal(err)
	}
	cp.fail = errdefs.Unavailable("criu stuck")
	if _, err := e.m.Snapshot(ctx, id, false); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("Snapshot = %v, want the runtime's error", err)
	}
	if _, err := e.m.Restore(ctx, snap.ID, RestoreRequest{}); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("Restore = %v, want the runtime's error", err)
	}
	if list, _ := e.m.ListSnapshots(ctx, ""); len(list) != 1 {
		t.Errorf("snapshots: %d, want the first one only", len(list))
	}
	if sbs, err := e.m.List(ctx); err != nil || len(sbs) != 1 || sbs[0].ID != id {
		t.Errorf("sandboxes after a failed restore: %+v, %v; want the parent only", sbs, err)
	}
	e.waitStatus(t, id, api.StatusRunning)
}

// Recover removes the files of a snapshot that has no record (a daemon
// that died while it saved one) and keeps the recorded ones'.
func TestSnapshotRecoverSweeps(t *testing.T) {
	e, _ := newSnapshotEnv(t)
	ctx := context.Background()
	snap, err := e.m.Snapshot(ctx, e.running(t), false)
	if err != nil {
		t.Fatal(err)
	}
	stray := e.m.snapshotDir("snap-stray")
	if err := os.MkdirAll(filepath.Join(stray, "images"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stray); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("unrecorded snapshot files after Recover: %v", err)
	}
	if _, err := os.Stat(e.m.snapshotDir(snap.ID)); err != nil {
		t.Errorf("recorded snapshot files after Recover: %v", err)
	}
}
