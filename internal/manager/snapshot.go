package manager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/image"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/store"
)

// snapshotPrefix starts every snapshot id.
const snapshotPrefix = "snap-"

// IsSnapshotID reports whether id has the form of a snapshot's id:
// snapshotPrefix and a sandbox id's 12 characters (newID).
func IsSnapshotID(id string) bool {
	rest, ok := strings.CutPrefix(id, snapshotPrefix)
	return ok && len(rest) == 12 && strings.Trim(rest, idAlphabet) == ""
}

// fileFork, in the directory of a sandbox's fork's snapshot, lists the
// fork's copies (a JSON list of ids) until they are all made: Recover
// removes the snapshot and the copies of a fork the daemon died in, which
// no client learnt of.
const fileFork = "fork.json"

// SnapshotRequest is how a sandbox is saved.
type SnapshotRequest struct {
	// Stop stops the sandbox once saved; else it runs on.
	Stop bool
	// Contexts are recorded with the snapshot (store.Snapshot.Contexts).
	Contexts []byte
}

// Snapshot saves running (or paused) sandbox id whole with the runtime's
// sandbox.Checkpointer: its processes with their memory, its writable
// files and its spec, in a directory of its own under
// Config.SnapshotDir, recorded once saved. Live (stop false), the sandbox
// is frozen only while saved and runs on; with stop it is stopped once
// saved (succeeded, "stopped by a snapshot"), its memory freed and its
// files kept. The snapshot outlives the sandbox. A runtime that cannot is
// 501; a sandbox in another state, 409.
func (m *Manager) Snapshot(ctx context.Context, id string, req SnapshotRequest) (*store.Snapshot, error) {
	snap, done, err := m.snapshot(ctx, id, req, nil)
	if err != nil {
		return nil, err
	}
	done()
	return snap, nil
}

// snapshot is Snapshot, and counts a use of the snapshot (snapshotUses)
// from before it is recorded: done ends it. A fork's restores thus read
// it with no moment in which it could be deleted. The ids of a fork's
// copies, when given, are written to its fileFork before it is recorded.
func (m *Manager) snapshot(ctx context.Context, id string, req SnapshotRequest, copies []string) (_ *store.Snapshot, done func(), err error) {
	stop := req.Stop
	unlock := m.lock(id)
	defer unlock()
	ctx = context.WithoutCancel(ctx)
	sb, err := m.Get(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	cp, err := m.checkpointer("snapshot sandbox " + id)
	if err != nil {
		return nil, nil, err
	}
	if !alive(sb) {
		return nil, nil, notNow("snapshot", sb)
	}
	snap := &store.Snapshot{ID: snapshotPrefix + newID(), SandboxID: id, Image: sb.Image, Template: sb.Template,
		TemplateVersion: sb.TemplateVersion, Env: sb.Env, CPU: sb.CPU, Memory: sb.Memory, Runtime: sb.Runtime, Status: string(api.SnapshotReady), Stopped: stop,
		Tenant: sb.Tenant, Spec: sb.Spec, Contexts: req.Contexts}
	dir := m.snapshotDir(snap.ID)
	if err := os.MkdirAll(m.cfg.SnapshotDir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("snapshot sandbox %s: %w", id, err)
	}
	start := time.Now()
	checkpoint := func() error { return cp.Checkpoint(ctx, id, dir, !stop) }
	if stop {
		// Recorded stopped before the checkpoint stops it (see stopAs):
		// should recording the snapshot fail, the sandbox is stopped with
		// its files, not lost to the sweep.
		_, err = m.stopAs(ctx, sb, api.StatusSucceeded, "stopped by snapshot "+snap.ID, checkpoint)
	} else {
		err = checkpoint()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot sandbox %s: %w", id, err)
	}
	took := time.Since(start)
	snap.CreatedAt = m.now().UTC()
	if copies != nil {
		err = writeForkFile(dir, copies)
	}
	if err == nil {
		done, err = m.snapshots.use(snap.ID) // a new id: never refused
	}
	if err == nil {
		if snap.SizeBytes, err = diskUsage(dir); err == nil {
			err = m.store.CreateSnapshot(ctx, snap)
		}
		if err != nil {
			done()
		}
	}
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("record snapshot of sandbox %s: %w", id, err), os.RemoveAll(dir))
	}
	m.log.Info("sandbox snapshot taken", "sandbox", id, "snapshot", snap.ID, "stop", stop, "took", took, "bytes", snap.SizeBytes)
	if !stop {
		m.event(ctx, id, sb.Status, "snapshot "+snap.ID+" taken")
	}
	return snap, done, nil
}

// GetSnapshot returns snapshot id, if the caller's tenant may see it.
func (m *Manager) GetSnapshot(ctx context.Context, id string) (*store.Snapshot, error) {
	snap, err := m.store.GetSnapshot(ctx, id)
	if err == nil {
		if t := auth.TenantOf(ctx); t != "" && snap.Tenant != t {
			err = errdefs.NotFound("snapshot %s not found", id)
		}
	}
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, errdefs.WithCode(err, api.CodeNotFound)
	}
	return snap, err
}

// ListSnapshots returns the snapshots the caller's tenant may see, of
// sandbox sandboxID when it is not empty, newest first.
func (m *Manager) ListSnapshots(ctx context.Context, sandboxID string) ([]*store.Snapshot, error) {
	out, _, err := m.ListSnapshotPage(ctx, sandboxID, store.Page{Desc: true})
	return out, err
}

// ListSnapshotPage is ListSnapshots' page p, with the cursor of the next
// page ("" after the last).
func (m *Manager) ListSnapshotPage(ctx context.Context, sandboxID string, p store.Page) ([]*store.Snapshot, string, error) {
	return m.store.ListSnapshotPage(ctx, store.SnapshotFilter{SandboxID: sandboxID, Tenant: auth.TenantOf(ctx)}, p)
}

// SnapshotsOfImage returns the ids of the snapshots, of every tenant, of
// sandboxes of image ref (compared normalized): a restore mounts the
// image's layers, so removing the image would break it.
func (m *Manager) SnapshotsOfImage(ctx context.Context, ref string) ([]string, error) {
	key, err := image.Normalize(ref)
	if err != nil {
		return nil, err
	}
	snaps, err := m.store.ListSnapshots(ctx, store.SnapshotFilter{})
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, s := range snaps {
		if k, err := image.Normalize(s.Image); err == nil && k == key {
			ids = append(ids, s.ID)
		}
	}
	return ids, nil
}

// DeleteSnapshot removes snapshot id: its files, then its record.
// Sandboxes made from it are not affected; while sandboxes are being made
// from it, it is 409.
func (m *Manager) DeleteSnapshot(ctx context.Context, id string) error {
	if _, err := m.GetSnapshot(ctx, id); err != nil {
		return err
	}
	done, err := m.snapshots.remove(id)
	if err != nil {
		return err
	}
	defer done()
	if err := os.RemoveAll(m.snapshotDir(id)); err != nil {
		return fmt.Errorf("delete snapshot %s: %w", id, err)
	}
	return m.store.DeleteSnapshot(ctx, id)
}

// sweepSnapshots removes, at Recover, the snapshot directories that have
// no record: a daemon that died while it saved a sandbox leaves one.
func (m *Manager) sweepSnapshots(ctx context.Context) {
	if m.cfg.SnapshotDir == "" {
		return
	}
	entries, err := os.ReadDir(m.cfg.SnapshotDir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			m.log.Error("recover snapshots", "err", err)
		}
		return
	}
	for _, e := range entries {
		_, err := m.store.GetSnapshot(ctx, e.Name())
		if err == nil {
			m.sweepFork(ctx, e.Name())
		}
		if !errors.Is(err, errdefs.ErrNotFound) {
			continue
		}
		if err := os.RemoveAll(m.snapshotDir(e.Name())); err != nil {
			m.log.Error("recover: remove the files of an unrecorded snapshot", "snapshot", e.Name(), "err", err)
			continue
		}
		m.log.Info("recover: removed the files of an unrecorded snapshot", "snapshot", e.Name())
	}
}

// sweepFork removes, at Recover, recorded snapshot id and its fork's
// copies when it has a fileFork: the daemon died in the fork.
func (m *Manager) sweepFork(ctx context.Context, id string) {
	b, err := os.ReadFile(filepath.Join(m.snapshotDir(id), fileFork))
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	var copies []string
	if err == nil {
		err = json.Unmarshal(b, &copies)
	}
	for _, c := range copies {
		if err == nil {
			err = m.remove(ctx, c)
		}
	}
	if err == nil {
		err = m.DeleteSnapshot(ctx, id)
	}
	if err != nil {
		m.log.Error("recover: remove an unfinished fork", "snapshot", id, "copies", copies, "err", err)
		return
	}
	m.log.Info("recover: removed an unfinished fork", "snapshot", id, "copies", copies)
}

// writeForkFile writes the fileFork of a fork's copies in dir.
func writeForkFile(dir string, copies []string) error {
	b, err := json.Marshal(copies)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, fileFork), b, 0o600)
	}
	if err != nil {
		return fmt.Errorf("write the fork's copies: %w", err)
	}
	return nil
}

// snapshotDir is where snapshot id's files are.
func (m *Manager) snapshotDir(id string) string { return filepath.Join(m.cfg.SnapshotDir, id) }

// checkpointer returns the runtime as a sandbox.Checkpointer, or a 501
// naming why it cannot do what (op).
func (m *Manager) checkpointer(op string) (sandbox.Checkpointer, error) {
	cp, ok := m.rt.(sandbox.Checkpointer)
	if ok && m.rt.Capabilities().Checkpoint && m.cfg.SnapshotDir != "" {
		return cp, nil
	}
	why := m.rt.Capabilities().NoCheckpoint
	switch {
	case !ok && !m.rt.Capabilities().LocalFiles:
		why = "its sandboxes run on other machines (a cluster's nodes), which it has no checkpoint API for"
	case !ok || why == "":
		why = "it cannot checkpoint sandboxes"
	}
	err := fmt.Errorf("cannot %s: runtime %s has no snapshots: %s: %w", op, m.rt.Name(), why, errdefs.ErrNotImplemented)
	return nil, errdefs.WithCode(err, api.CodeNotImplemented)
}

// diskUsage is what the files under dir take on disk (sparse files count
// their allocated blocks). A file with other links is not counted: the
// agent binary a snapshot shares with its sandboxes is theirs too.
func diskUsage(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && (st.Nlink == 1 || d.IsDir()) {
			n += st.Blocks * 512
		}
		return nil
	})
	return n, err
}
