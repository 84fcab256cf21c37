package manager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/store"
)

// MaxForkCount bounds the sandboxes one fork makes.
const MaxForkCount = api.MaxForkCount

// RestoreRequest is what a sandbox made from a snapshot takes from its
// request: the rest is the snapshot's.
type RestoreRequest struct {
	// TTL in seconds; nil means the default, 0 never expires.
	TTL      *int
	Metadata map[string]string
	// Kernels maps the id of each kernel the snapshot holds (a context's)
	// to the id it gets in the new sandbox; one not named keeps its id.
	Kernels map[string]string
}

// Restore makes a new sandbox from snapshot snapID: its processes, memory
// and files as they were saved, under a new id with its own network
// namespace, control channel and hostname, its kernels renamed as
// req.Kernels says and reseeded, admitted like any new sandbox with the
// snapshot's cpu and memory. It returns the sandbox running; a restore
// that fails leaves no sandbox.
func (m *Manager) Restore(ctx context.Context, snapID string, req RestoreRequest) (*store.Sandbox, error) {
	sbs, err := m.Fork(ctx, snapID, []RestoreRequest{req})
	if err != nil {
		return nil, err
	}
	return sbs[0], nil
}

// Fork makes one sandbox from snapshot snapID per request, in parallel
// (see Restore). Every sandbox is admitted before any is made, so a
// capacity refusal makes none; a fork that fails part-way deletes those it
// made.
func (m *Manager) Fork(ctx context.Context, snapID string, reqs []RestoreRequest) ([]*store.Sandbox, error) {
	if err := checkForkCount(len(reqs)); err != nil {
		return nil, err
	}
	done, err := m.snapshots.use(snapID)
	if err != nil {
		return nil, err
	}
	defer done()
	snap, err := m.GetSnapshot(ctx, snapID)
	if err != nil {
		return nil, err
	}
	cp, err := m.checkpointer("make a sandbox from snapshot " + snapID)
	if err != nil {
		return nil, err
	}
	if snap.Runtime != m.rt.Name() {
		return nil, errdefs.WithCode(errdefs.Precondition("snapshot %s was taken by runtime %s, not this daemon's %s", snapID, snap.Runtime, m.rt.Name()), api.CodeConflict)
	}
	sbs, made, err := m.admitCopies(ctx, snap.Image, snap.Template, snap.CPU, snap.Memory, reqs)
	if err != nil {
		return nil, err
	}
	defer made()
	return m.restoreCopies(ctx, cp, snap, sbs, reqs)
}

// ForkSandbox takes a live snapshot of sandbox id, which runs on, and
// makes one sandbox from it per request, as Fork does; contexts are
// recorded with the snapshot (SnapshotRequest.Contexts). The copies are
// admitted before the snapshot is taken. The snapshot is kept, and
// returned, unless the fork fails; it lists the copies (fileFork) until
// they are made, for Recover to remove a fork the daemon died in.
func (m *Manager) ForkSandbox(ctx context.Context, id string, contexts []byte, reqs []RestoreRequest) (*store.Snapshot, []*store.Sandbox, error) {
	if err := checkForkCount(len(reqs)); err != nil {
		return nil, nil, err
	}
	sb, err := m.Get(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	cp, err := m.checkpointer("fork sandbox " + id)
	if err != nil {
		return nil, nil, err
	}
	if !alive(sb) {
		return nil, nil, notNow("fork", sb)
	}
	sbs, made, err := m.admitCopies(ctx, sb.Image, sb.Template, sb.CPU, sb.Memory, reqs)
	if err != nil {
		return nil, nil, err
	}
	defer made()
	copies := make([]string, len(sbs))
	for i, sb := range sbs {
		copies[i] = sb.ID
	}
	snap, done, err := m.snapshot(ctx, id, SnapshotRequest{Contexts: contexts}, copies)
	if err != nil {
		m.dropRecords(ctx, sbs)
		return nil, nil, fmt.Errorf("fork sandbox %s: %w", id, err)
	}
	out, err := m.restoreCopies(ctx, cp, snap, sbs, reqs)
	done()
	if err == nil {
		// The fork is made: Recover must keep it.
		if err = os.Remove(filepath.Join(m.snapshotDir(snap.ID), fileFork)); err != nil {
			for _, sb := range out {
				err = errors.Join(err, m.Delete(context.WithoutCancel(ctx), sb.ID))
			}
		}
	}
	if err != nil {
		if derr := m.DeleteSnapshot(context.WithoutCancel(ctx), snap.ID); derr != nil {
			err = errors.Join(err, derr)
		}
		return nil, nil, fmt.Errorf("fork sandbox %s: %w", id, err)
	}
	return snap, out, nil
}

func checkForkCount(n int) error {
	if n < 1 || n > MaxForkCount {
		return errdefs.Invalid("count must be 1 to %d, not %d", MaxForkCount, n)
	}
	return nil
}

// admitCopies records one pending sandbox per request, of the given image
// and resources, each admitted like a new sandbox; when one is refused it
// removes those it recorded. The caller makes them, and calls made once
// it has (createRecord).
func (m *Manager) admitCopies(ctx context.Context, image, template, cpu, memory string, reqs []RestoreRequest) (sbs []*store.Sandbox, made func(), err error) {
	sbs = make([]*store.Sandbox, 0, len(reqs))
	var claims []func()
	made = func() {
		for _, c := range claims {
			c()
		}
	}
	for _, req := range reqs {
		r, err := m.resolve(CreateRequest{Image: image, Template: template, CPU: cpu, Memory: memory,
			TTL: req.TTL, Metadata: req.Metadata})
		if err == nil {
			var sb *store.Sandbox
			var claim func()
			if sb, claim, err = m.createRecord(ctx, r); err == nil {
				sbs, claims = append(sbs, sb), append(claims, claim)
				continue
			}
		}
		m.dropRecords(ctx, sbs)
		made()
		return nil, nil, err
	}
	return sbs, made, nil
}

// dropRecords removes the records of sandboxes that were never made.
func (m *Manager) dropRecords(ctx context.Context, sbs []*store.Sandbox) {
	for _, sb := range sbs {
		if err := m.deleteRecord(context.WithoutCancel(ctx), sb.ID); err != nil {
			m.log.Warn("remove the record of a sandbox not made", "sandbox", sb.ID, "err", err)
		}
	}
}

// restoreCopies makes the recorded sandboxes sbs from snap, in parallel,
// sbs[i] as reqs[i] asks. If one fails, the others are deleted.
func (m *Manager) restoreCopies(ctx context.Context, cp sandbox.Checkpointer, snap *store.Snapshot, sbs []*store.Sandbox, reqs []RestoreRequest) ([]*store.Sandbox, error) {
	out := make([]*store.Sandbox, len(sbs))
	errs := make([]error, len(sbs))
	var wg sync.WaitGroup
	for i := range sbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = m.restoreCopy(ctx, cp, snap, sbs[i].ID, reqs[i].Kernels)
		}()
	}
	wg.Wait()
	err := errors.Join(errs...)
	if err == nil {
		return out, nil
	}
	for i, sb := range out {
		if errs[i] != nil {
			continue
		}
		if derr := m.Delete(context.WithoutCancel(ctx), sb.ID); derr != nil {
			m.log.Warn("delete a sandbox of a failed fork", "sandbox", sb.ID, "err", derr)
		}
	}
	return nil, err
}

// restoreCopy makes recorded sandbox id from snap with the runtime, tells
// its agent it was restored (its kernels' new ids), and marks it running.
// When it fails, it removes what it made and the record.
func (m *Manager) restoreCopy(ctx context.Context, cp sandbox.Checkpointer, snap *store.Snapshot, id string, kernels map[string]string) (*store.Sandbox, error) {
	m.event(ctx, id, string(api.StatusPending), "restoring snapshot "+snap.ID+" of sandbox "+snap.SandboxID)
	unlock := m.lock(id)
	defer unlock()
	ctx, done := m.startContext(ctx)
	defer done()
	start := time.Now()
	labels := map[string]string{"agent2env.image": snap.Image, "agent2env.snapshot": snap.ID}
	err := cp.Restore(ctx, id, m.snapshotDir(snap.ID), labels)
	if err == nil {
		if err = m.restored(ctx, id, kernels); err != nil {
			err = errors.Join(err, m.rt.Delete(ctx, id))
		}
	}
	if err != nil {
		if derr := m.deleteRecord(ctx, id); derr != nil {
			m.log.Warn("remove the record of a sandbox whose restore failed", "sandbox", id, "err", derr)
		}
		return nil, fmt.Errorf("make a sandbox from snapshot %s: %w", snap.ID, err)
	}
	m.log.Info("sandbox restored", "sandbox", id, "snapshot", snap.ID, "took", time.Since(start))
	reason := "restored from snapshot " + snap.ID
	sb, err := m.store.UpdateSandbox(ctx, id, func(sb *store.Sandbox) error {
		sb.Spec, sb.Env, sb.TemplateVersion = snap.Spec, snap.Env, snap.TemplateVersion
		sb.Status, sb.Reason, sb.UpdatedAt = string(api.StatusRunning), reason, m.now().UTC()
		return nil
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("record sandbox restored from snapshot %s: %w", snap.ID, err), m.remove(ctx, id))
	}
	m.event(ctx, id, string(api.StatusRunning), reason)
	return sb, nil
}

// restored tells the agent of restored sandbox id its kernels' new ids and
// has it reseed them. A kernel the snapshot does not hold (its sandbox was
// stopped or restarted since the kernel started, and a context starts its
// kernel again only on its next execution) is not renamed: its context,
// recorded under the new id all the same, starts a kernel then, its state
// lost, as it would have in the snapshot's sandbox. A snapshot's agent
// older than the call (not found) is let be when no kernel is to be
// renamed.
func (m *Manager) restored(ctx context.Context, id string, kernels map[string]string) error {
	ac, err := m.rt.Agent(ctx, id)
	if err != nil {
		return fmt.Errorf("reach the restored agent: %w", err)
	}
	if len(kernels) > 0 {
		held, err := ac.Kernels(ctx)
		if err != nil {
			return fmt.Errorf("list the restored agent's kernels: %w", err)
		}
		n := len(kernels)
		if kernels = heldKernels(kernels, held); len(kernels) < n {
			m.log.Info("restored sandbox: contexts whose kernels the snapshot does not hold start afresh", "sandbox", id, "contexts", n-len(kernels))
		}
	}
	res, err := ac.Restored(ctx, agent.RestoredRequest{Kernels: kernels})
	switch {
	case err != nil && errors.Is(err, errdefs.ErrNotFound) && len(kernels) == 0:
		m.log.Warn("the restored agent predates reseeding: its random state is the snapshot's", "sandbox", id)
	case err != nil:
		return fmt.Errorf("tell the restored agent: %w", err)
	case len(res.NotReseeded) > 0:
		m.log.Warn("restored kernels keep the snapshot's random state", "sandbox", id, "kernels", res.NotReseeded)
	}
	return nil
}

// heldKernels returns the renames of kernels that are among held.
func heldKernels(renames map[string]string, held []agent.KernelInfo) map[string]string {
	out := make(map[string]string, len(renames))
	for _, k := range held {
		if to, ok := renames[k.ID]; ok {
			out[k.ID] = to
		}
	}
	return out
}
