package manager

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
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
	// failRestore, when set, makes the restore of that number (1: the
	// first since set) fail.
	failRestore, restores atomic.Int32
	// restoring, when set, is called by a restore once it has read the
	// snapshot.
	restoring func()
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
	if c.restoring != nil {
		c.restoring()
	}
	if n := c.failRestore.Load(); n > 0 && c.restores.Add(1) == n {
		return errdefs.Unavailable("restore %d failed", n)
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
	env := map[string]string{"A": "1"}
	id := e.create(t, CreateRequest{Env: env}).ID
	e.waitStatus(t, id, api.StatusRunning)
	snap, err := e.m.Snapshot(ctx, id, SnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if snap.SandboxID != id || snap.Image != "alpine" || !maps.Equal(snap.Env, env) || snap.Status != string(api.SnapshotReady) || snap.SizeBytes <= 0 || snap.Stopped {
		t.Errorf("snapshot = %+v", snap)
	}
	if !IsSnapshotID(snap.ID) || IsSnapshotID(id) {
		t.Errorf("IsSnapshotID(%q) = %v, IsSnapshotID(%q) = %v; want true, false", snap.ID, IsSnapshotID(snap.ID), id, IsSnapshotID(id))
	}
	e.waitStatus(t, id, api.StatusRunning)
	// The sandbox goes; the snapshot stays, and makes new sandboxes.
	if err := e.m.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	// The request names a kernel the snapshot does not hold (a context's
	// sandbox was stopped and started before the snapshot): it is not
	// renamed, and the restore works all the same.
	ttl := 60
	sb, err := e.m.Restore(ctx, snap.ID, RestoreRequest{TTL: &ttl, Metadata: map[string]string{"k": "v"},
		Kernels: map[string]string{"ctx-gone": "ctx-new"}})
	if err != nil {
		t.Fatal(err)
	}
	// Its view is the snapshot's sandbox's: image, resources, environment.
	if sb.ID == id || sb.Status != string(api.StatusRunning) || sb.TTL != 60 || sb.Metadata["k"] != "v" || sb.CPU != snap.CPU ||
		!maps.Equal(sb.Env, env) {
		t.Errorf("restored sandbox = %+v", sb)
	}
	if st, err := e.rt.Status(ctx, sb.ID); err != nil || st.Labels["agent2env.snapshot"] != snap.ID {
		t.Errorf("runtime status of the restored sandbox = %+v, %v", st, err)
	}
	list, err := e.m.ListSnapshots(ctx, id)
	if err != nil || len(list) != 1 || list[0].ID != snap.ID {
		t.Errorf("ListSnapshots(%s) = %+v, %v", id, list, err)
	}
	// The snapshot pins its image (any spelling of it), no other.
	for ref, want := range map[string][]string{"alpine": {snap.ID}, "docker.io/library/alpine:latest": {snap.ID}, "busybox": nil} {
		if got, err := e.m.SnapshotsOfImage(ctx, ref); err != nil || !slices.Equal(got, want) {
			t.Errorf("SnapshotsOfImage(%s) = %v, %v; want %v", ref, got, err, want)
		}
	}
	if err := e.m.DeleteSnapshot(ctx, snap.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := e.m.SnapshotsOfImage(ctx, "alpine"); err != nil || len(got) != 0 {
		t.Errorf("SnapshotsOfImage(alpine) after DeleteSnapshot = %v, %v", got, err)
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
func TestIsSnapshotID(t *testing.T) {
	for id, want := range map[string]bool{
		"snap-abcdefgh2345":  true,
		"snap-abcdefgh234":   false, // too short
		"snap-abcdefgh23456": false, // too long
		"snap-abcdefgh2301":  false, // 0 and 1 are not of newID's alphabet
		"snap-ABCDEFGH2345":  false,
		"abcdefgh2345":       false,
		"snap-mine":          false,
		"":                   false,
	} {
		if got := IsSnapshotID(id); got != want {
			t.Errorf("IsSnapshotID(%q) = %v, want %v", id, got, want)
		}
	}
}

func TestSnapshotStop(t *testing.T) {
	e, _ := newSnapshotEnv(t)
	ctx := context.Background()
	id := e.running(t)
	snap, err := e.m.Snapshot(ctx, id, SnapshotRequest{Stop: true})
	if err != nil || !snap.Stopped {
		t.Fatalf("Snapshot(stop) = %+v, %v", snap, err)
	}
	e.waitStatus(t, id, api.StatusSucceeded)
	_, err = e.m.Snapshot(ctx, id, SnapshotRequest{})
	checkErr(t, err, errdefs.ErrFailedPrecondition, api.CodeConflict)
}

// A runtime that cannot is 501 naming why (one of this host; a
// cluster's, kubernetes, whose sandboxes run on other machines), for a
// snapshot and a fork alike, and nothing is recorded.
func TestSnapshotNotImplemented(t *testing.T) {
	for _, tc := range []struct {
		name string
		caps sandbox.Capabilities
		why  string
	}{
		{"this host", sandbox.Capabilities{LocalFiles: true, StopKeepsFiles: true}, "cannot checkpoint sandboxes"},
		{"remote nodes", sandbox.Capabilities{Persistence: true}, "run on other machines"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{SnapshotDir: t.TempDir()})
			ctx := context.Background()
			id := e.running(t)
			e.rt.SetCapabilities(tc.caps)
			for _, op := range []func() error{
				func() error { _, err := e.m.Snapshot(ctx, id, SnapshotRequest{}); return err },
				func() error { _, _, err := e.m.ForkSandbox(ctx, id, nil, make([]RestoreRequest, 2)); return err },
			} {
				err := op()
				checkErr(t, err, errdefs.ErrNotImplemented, api.CodeNotImplemented)
				if err != nil && !strings.Contains(err.Error(), tc.why) {
					t.Errorf("error %q does not say %q", err, tc.why)
				}
			}
			if list, err := e.m.ListSnapshots(ctx, ""); err != nil || len(list) != 0 {
				t.Errorf("snapshots after a refusal: %+v, %v", list, err)
			}
			if list, err := e.m.List(ctx); err != nil || len(list) != 1 {
				t.Errorf("sandboxes after a refused fork: %d, %v; want the parent alone", len(list), err)
			}
		})
	}
}

// unable is a Checkpointer that cannot checkpoint on this host, and says
// why (the oci runtime on crun without CRIU, or without a working criu).
type unable struct {
	*checkpointing
	why string
}

func (u unable) Capabilities() sandbox.Capabilities {
	caps := u.checkpointing.Capabilities()
	caps.Checkpoint, caps.NoCheckpoint = false, u.why
	return caps
}

// A Checkpointer that cannot checkpoint here is 501 with its own reason.
func TestSnapshotNotImplementedSaysWhy(t *testing.T) {
	e, cp := newSnapshotEnv(t)
	const why = "crun was built without CRIU (serve --runtime runc has snapshots)"
	e.m.Close()
	e.m = New(Config{SnapshotDir: t.TempDir()}, unable{cp, why}, e.st, slog.New(slog.DiscardHandler))
	id := e.running(t)
	_, err := e.m.Snapshot(context.Background(), id, SnapshotRequest{})
	checkErr(t, err, errdefs.ErrNotImplemented, api.CodeNotImplemented)
	if err != nil && !strings.Contains(err.Error(), why) {
		t.Errorf("error %q does not say %q", err, why)
	}
}

// A checkpoint or a restore the runtime fails leaves nothing: no snapshot
// record, no sandbox.
func TestSnapshotRuntimeFailure(t *testing.T) {
	e, cp := newSnapshotEnv(t)
	ctx := context.Background()
	id := e.running(t)
	snap, err := e.m.Snapshot(ctx, id, SnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	cp.fail = errdefs.Unavailable("criu stuck")
	if _, err := e.m.Snapshot(ctx, id, SnapshotRequest{}); !errors.Is(err, errdefs.ErrUnavailable) {
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
	snap, err := e.m.Snapshot(ctx, e.running(t), SnapshotRequest{})
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

// A fork makes its sandboxes from a live snapshot of the parent, which
// runs on; bad counts are 400; a capacity refusal makes none, and a fork
// that fails part-way leaves none of its sandboxes.
func TestFork(t *testing.T) {
	e, cp := newSnapshotEnv(t)
	ctx := context.Background()
	id := e.running(t)
	reqs := func(n int) []RestoreRequest { return make([]RestoreRequest, n) }
	for _, n := range []int{0, MaxForkCount + 1} {
		_, _, err := e.m.ForkSandbox(ctx, id, nil, reqs(n))
		checkErr(t, err, errdefs.ErrInvalidArgument, "")
		_, err = e.m.Fork(ctx, "snap-none", reqs(n))
		checkErr(t, err, errdefs.ErrInvalidArgument, "")
	}
	_, _, err := e.m.ForkSandbox(ctx, "nope", nil, reqs(1))
	checkErr(t, err, errdefs.ErrNotFound, api.CodeSandboxNotFound)
	_, err = e.m.Fork(ctx, "snap-none", reqs(1))
	checkErr(t, err, errdefs.ErrNotFound, api.CodeNotFound)

	snap, sbs, err := e.m.ForkSandbox(ctx, id, []byte(`[]`), reqs(3))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{id: true}
	for _, sb := range sbs {
		if seen[sb.ID] || sb.Status != string(api.StatusRunning) {
			t.Errorf("forked sandbox %+v: a repeated id or not running", sb)
		}
		seen[sb.ID] = true
	}
	if snap.SandboxID != id || string(snap.Contexts) != `[]` {
		t.Errorf("fork's snapshot = %+v", snap)
	}
	e.waitStatus(t, id, api.StatusRunning)
	count := func() int {
		t.Helper()
		list, err := e.m.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rt, err := e.rt.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(rt) != len(list) {
			t.Errorf("%d runtime sandboxes, %d records", len(rt), len(list))
		}
		return len(list)
	}
	if n := count(); n != 4 {
		t.Fatalf("%d sandboxes after a fork of 3, want 4", n)
	}
	e.m.cfg.MaxSandboxes = 5
	_, err = e.m.Fork(ctx, snap.ID, reqs(2))
	if !IsResourceError(err) {
		t.Errorf("fork past the limit: %v, want a capacity refusal", err)
	}
	e.m.cfg.MaxSandboxes = 0
	cp.failRestore.Store(2)
	if _, err := e.m.Fork(ctx, snap.ID, reqs(3)); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("fork with a failing restore: %v, want the runtime's error", err)
	}
	cp.restores.Store(0)
	if _, _, err := e.m.ForkSandbox(ctx, id, nil, reqs(3)); err == nil {
		t.Error("fork of the sandbox with a failing restore succeeded")
	}
	if n := count(); n != 4 {
		t.Errorf("%d sandboxes after refused and failed forks, want 4", n)
	}
	if list, _ := e.m.ListSnapshots(ctx, ""); len(list) != 1 {
		t.Errorf("%d snapshots after a failed fork of the sandbox, want the first one's only", len(list))
	}
}

// TestDeleteSnapshotInUse deletes a snapshot while a sandbox is being made
// from it: 409, and the restore works; once it is made, the deletion does.
func TestDeleteSnapshotInUse(t *testing.T) {
	e, cp := newSnapshotEnv(t)
	ctx := context.Background()
	snap, err := e.m.Snapshot(ctx, e.running(t), SnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	reading, release := make(chan struct{}), make(chan struct{})
	cp.restoring = func() {
		close(reading)
		<-release
	}
	errc := make(chan error, 1)
	go func() {
		_, err := e.m.Restore(ctx, snap.ID, RestoreRequest{})
		errc <- err
	}()
	<-reading
	checkErr(t, e.m.DeleteSnapshot(ctx, snap.ID), errdefs.ErrFailedPrecondition, api.CodeConflict)
	close(release)
	if err := <-errc; err != nil {
		t.Fatalf("restore while the snapshot's deletion was refused: %v", err)
	}
	if err := e.m.DeleteSnapshot(ctx, snap.ID); err != nil {
		t.Fatalf("delete once the restore is done: %v", err)
	}
}

// TestRecoverUnfinishedFork restarts after a daemon died in a sandbox's
// fork, its copies admitted and its snapshot taken: Recover removes the
// snapshot and the copies, which no client learnt of, and keeps a fork
// that was made.
func TestRecoverUnfinishedFork(t *testing.T) {
	e, _ := newSnapshotEnv(t)
	ctx := context.Background()
	id := e.running(t)
	made, forked, err := e.m.ForkSandbox(ctx, id, nil, make([]RestoreRequest, 1))
	if err != nil {
		t.Fatal(err)
	}
	sb := e.waitStatus(t, id, api.StatusRunning)
	sbs, unmade, err := e.m.admitCopies(ctx, sb.Image, sb.Template, sb.CPU, sb.Memory, make([]RestoreRequest, 2))
	if err != nil {
		t.Fatal(err)
	}
	unmade() // the daemon died making them
	snap, done, err := e.m.snapshot(ctx, id, SnapshotRequest{}, []string{sbs[0].ID, sbs[1].ID})
	if err != nil {
		t.Fatal(err)
	}
	done()
	if err := e.m.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.GetSnapshot(ctx, snap.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("the unfinished fork's snapshot after Recover: %v, want not found", err)
	}
	if _, err := os.Stat(e.m.snapshotDir(snap.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the unfinished fork's snapshot files after Recover: %v", err)
	}
	if got, want := e.records(t), []string{id, forked[0].ID}; !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Errorf("sandboxes after Recover: %v, want the parent and the made fork's copy %v", got, want)
	}
	if _, err := e.m.GetSnapshot(ctx, made.ID); err != nil {
		t.Errorf("the made fork's snapshot after Recover: %v", err)
	}
}

// TestDiskUsage counts what a snapshot dir's own files take, not a file
// linked elsewhere too (the agent binary the oci runtime shares with the
// snapshot's sandboxes).
func TestDiskUsage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		linked bool
		want   int64
	}{
		{"own file", false, 8192},
		{"file linked elsewhere", true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			f := filepath.Join(dir, "snap", "f")
			if err := os.Mkdir(filepath.Dir(f), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f, make([]byte, 8192), 0o600); err != nil {
				t.Fatal(err)
			}
			if tc.linked {
				if err := os.Link(f, filepath.Join(dir, "elsewhere")); err != nil {
					t.Fatal(err)
				}
			}
			base, err := diskUsage(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			got, err := diskUsage(filepath.Dir(f))
			if err != nil {
				t.Fatal(err)
			}
			if got-base != tc.want {
				t.Errorf("diskUsage = %d (an empty dir %d); want %d more", got, base, tc.want)
			}
		})
	}
}
