package manager

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/store"
)

// Delete ends a sandbox and removes everything it had: runtime state first,
// then the record, so that a crash in between leaves a record that Recover
// finishes deleting rather than state that nothing refers to. One waiting
// in a warm pool is not found (see Get; its pool deletes it with
// DeletePooled).
func (m *Manager) Delete(ctx context.Context, id string) error {
	return m.delete(ctx, id, notPooled)
}

// DeletePooled deletes sandbox id, which waits in a warm pool, for its
// pool, as Delete does a claimed one; one claimed meanwhile is
// ErrFailedPrecondition and left as it is.
func (m *Manager) DeletePooled(ctx context.Context, id string) error {
	return m.delete(ctx, id, func(sb *store.Sandbox) error {
		if sb.Pool == "" {
			return errdefs.Precondition("sandbox %s is no longer in a warm pool", id)
		}
		return nil
	})
}

// delete deletes sandbox id if check lets it, as it is when marked
// terminating.
func (m *Manager) delete(ctx context.Context, id string, check func(*store.Sandbox) error) error {
	// A startup in progress holds no lock; end it first, if the sandbox
	// is one check lets this delete.
	if cancel, ok := m.starting.Load(id); ok {
		if sb, err := m.get(ctx, id); err == nil && check(sb) == nil {
			cancel.(context.CancelFunc)()
		}
	}
	unlock := m.lock(id)
	defer unlock()
	if _, err := m.setStatusIf(ctx, id, api.StatusTerminating, "deleted by request", check); err != nil {
		return sandboxErr(err)
	}
	return m.remove(context.WithoutCancel(ctx), id)
}

// remove deletes the runtime side and the record of a sandbox. The caller
// holds the sandbox's lock.
func (m *Manager) remove(ctx context.Context, id string) error {
	if err := m.rt.Delete(ctx, id); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return fmt.Errorf("delete sandbox %s: %w", id, err)
	}
	if err := m.deleteRecord(ctx, id); err != nil {
		return fmt.Errorf("delete sandbox %s record: %w", id, err)
	}
	m.removeOwned(ctx, id)
	return nil
}

// WithRemoved has removed told of every sandbox whose record is deleted,
// after it is: what refers to a sandbox by its id (an LLM key) ends with
// it. It must not call the manager.
func WithRemoved(removed func(ctx context.Context, id string)) Option {
	return func(m *Manager) { m.removed = removed }
}

// deleteRecord deletes sandbox id's record (one already gone is no
// error) and tells WithRemoved's func.
func (m *Manager) deleteRecord(ctx context.Context, id string) error {
	if err := m.store.DeleteSandbox(ctx, id); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return err
	}
	if m.removed != nil {
		m.removed(ctx, id)
	}
	return nil
}

// Recover reconciles the runtime with the records after a (re)start: live
// sandboxes with a running or paused record are re-adopted as they are
// (paused ones stay paused; a pause or resume the daemon died in is
// settled as the record says); stopped ones being started again stay
// stopped with their files; runtime state nothing refers to is deleted;
// records whose sandbox is gone are marked failed; deletions and creations
// a crash interrupted are finished or failed.
func (m *Manager) Recover(ctx context.Context) error {
	live, err := m.rt.Recover(ctx)
	if err != nil {
		return fmt.Errorf("recover runtime: %w", err)
	}
	states := make(map[string]sandbox.State, len(live))
	for _, st := range live {
		states[st.ID] = st.State
	}
	records, err := m.store.ListSandboxes(ctx)
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	known := make(map[string]bool, len(records))
	var adopted, cleaned, failed, errs int
	for _, sb := range records {
		known[sb.ID] = true
		state, exists := states[sb.ID]
		switch {
		case sb.Status == string(api.StatusTerminating) || sb.Pool != "":
			// Warm pools are refilled afresh rather than re-adopted.
			err = m.remove(ctx, sb.ID)
			cleaned++
		case sb.Status == string(api.StatusRunning) && state == sandbox.StateRunning,
			sb.Status == string(api.StatusPaused) && state == sandbox.StatePaused:
			adopted++
			continue
		case sb.Status == string(api.StatusRunning) && state == sandbox.StatePaused:
			// Frozen by a Pause the daemon died in before its record.
			if p, ok := m.rt.(sandbox.Pauser); ok {
				err = p.Resume(ctx, sb.ID)
			}
			adopted++
		case sb.Status == string(api.StatusPaused) && state == sandbox.StateRunning:
			// Thawed by a Resume the daemon died in before its record.
			_, err = m.setStatus(ctx, sb.ID, api.StatusRunning, "resumed while the daemon was down")
			adopted++
		case sb.Status == string(api.StatusPending):
			var kept bool
			if kept, err = m.settleUnmade(ctx, sb, state, exists, "daemon restarted"); kept {
				adopted++
			} else {
				failed++
			}
		case sb.Status == string(api.StatusRunning) || sb.Status == string(api.StatusPaused):
			if exists {
				err = m.rt.Delete(ctx, sb.ID)
			}
			_, ferr := m.fail(ctx, sb.ID, "sandbox stopped while the daemon was down")
			err = errors.Join(err, ferr)
			failed++
		case sb.Status == string(api.StatusSucceeded) && exists:
			// Stopped sandboxes keep their files to be started again.
			if state == sandbox.StateRunning || state == sandbox.StatePaused {
				err = m.rt.Stop(ctx, sb.ID, stopTimeout)
			}
			adopted++
		case exists: // failed records keep no runtime state past a restart
			err = m.rt.Delete(ctx, sb.ID)
			cleaned++
		}
		if err != nil {
			// One sandbox that cannot be cleaned must not keep the
			// daemon from serving the others; the sweeper retries.
			m.log.Error("recover sandbox", "sandbox", sb.ID, "err", err)
			errs++
		}
	}
	for _, st := range live {
		if !known[st.ID] {
			if err := m.rt.Delete(ctx, st.ID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
				m.log.Error("recover: delete orphan sandbox", "sandbox", st.ID, "err", err)
				errs++
				continue
			}
			cleaned++
		}
	}
	m.log.Info("recovered sandboxes", "adopted", adopted, "cleaned", cleaned, "failed", failed, "errors", errs)
	m.sweepSnapshots(ctx)
	return nil
}

// Run expires sandboxes whose TTL has passed and notices sandboxes whose
// agent has died, until ctx is done.
func (m *Manager) Run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.sweep(ctx)
		}
	}
}

// sweep reconciles the records with one List of the runtime: it finishes
// failed deletions, expires sandboxes past their TTL, settles pending
// sandboxes whose maker is gone (reclaim), fails running sandboxes whose
// runtime side has died, and ends template sandboxes whose main process
// has exited.
func (m *Manager) sweep(ctx context.Context) {
	if m.full.paused(m.now()) {
		return
	}
	// Records first: a sandbox that starts running after the List below
	// would look dead to a List taken before its record.
	records, err := m.store.ListSandboxes(ctx)
	if err != nil {
		m.log.Warn("sweep sandboxes", "err", err)
		return
	}
	live, err := m.rt.List(ctx)
	if err != nil {
		m.log.Warn("sweep sandboxes: list runtime", "err", err)
		return
	}
	states := make(map[string]sandbox.State, len(live))
	for _, st := range live {
		states[st.ID] = st.State
	}
	now := m.now()
	status := make(map[string]string, len(records))
	for _, sb := range records {
		status[sb.ID] = sb.Status
	}
	for _, sb := range records {
		if m.full.paused(now) { // a write failed for want of room
			return
		}
		if sb.Status == string(api.StatusTerminating) {
			m.retryRemove(ctx, sb.ID)
			continue
		}
		if ownerEnded(sb, status) {
			if err := m.Delete(ctx, sb.ID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
				m.sweepFailed("delete a sandbox whose owner ended", sb.ID, err)
			}
			continue
		}
		if sb.ExpiresAt != nil && now.After(*sb.ExpiresAt) {
			m.expire(ctx, sb.ID)
			continue
		}
		if sb.Status == string(api.StatusPending) {
			m.reclaim(ctx, sb.ID)
			continue
		}
		if !alive(sb) {
			continue
		}
		switch states[sb.ID] {
		case sandbox.StateRunning:
			if sb.Template != "" && sb.Status == string(api.StatusRunning) {
				m.checkMain(ctx, sb.ID)
			}
			continue
		case sandbox.StatePaused:
			continue
		}
		_, _ = m.CheckDead(ctx, sb.ID)
	}
}

// settleUnmade settles pending sandbox sb, which its maker left (its
// daemon restarted, or stopped: why says which), as its runtime side is
// (state; exists says whether it has one): a stopped sandbox being
// started again is stopped again with its files (kept), one being
// created is failed and its runtime side deleted.
func (m *Manager) settleUnmade(ctx context.Context, sb *store.Sandbox, state sandbox.State, exists bool, why string) (kept bool, err error) {
	if sb.Reason == reasonStartRequested && exists {
		if state == sandbox.StateRunning || state == sandbox.StatePaused {
			err = m.rt.Stop(ctx, sb.ID, stopTimeout)
		}
		_, serr := m.setStatus(ctx, sb.ID, api.StatusSucceeded, why+" while the sandbox was being started again")
		return true, errors.Join(err, serr)
	}
	if exists {
		err = m.rt.Delete(ctx, sb.ID)
	}
	_, ferr := m.fail(ctx, sb.ID, why+" while the sandbox was being created")
	return false, errors.Join(err, ferr)
}

// reclaim settles pending sandbox id if its maker is gone (settleUnmade):
// no one claims its making (makers). Its maker claimed it before the
// record was pending and holds the claim until it is not, so a sandbox
// being made is never reclaimed; the record is read again under the
// claim and the sandbox's lock, as it may have been made since the
// sweep's read.
func (m *Manager) reclaim(ctx context.Context, id string) {
	made, err := m.makers.TryLock(ctx, id)
	if err != nil || made == nil {
		if err != nil {
			m.log.Warn("sweep: claim a pending sandbox", "sandbox", id, "err", err)
		}
		return // being made, or unknown: the next sweep looks again
	}
	defer made()
	unlock := m.lock(id)
	defer unlock()
	sb, err := m.store.GetSandbox(ctx, id)
	if err != nil || sb.Status != string(api.StatusPending) {
		return
	}
	st, err := m.rt.Status(ctx, id)
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		m.log.Warn("sweep: sandbox status", "sandbox", id, "err", err)
		return
	}
	if sb.Pool != "" { // no one's: its pool is refilled afresh
		err = m.remove(ctx, id)
	} else {
		_, err = m.settleUnmade(ctx, sb, st.State, err == nil, "its daemon stopped")
	}
	if err != nil {
		m.sweepFailed("settle a sandbox its daemon left pending", id, err)
	}
}

// ownerEnded reports whether sb is owned by a sandbox that has ended:
// gone (a crash between its deletion and its owned ones'), failed, or
// being deleted.
func ownerEnded(sb *store.Sandbox, status map[string]string) bool {
	if sb.Owner == "" {
		return false
	}
	st, ok := status[sb.Owner]
	return !ok || st == string(api.StatusFailed) || st == string(api.StatusTerminating)
}

// retryRemove finishes a deletion that failed earlier, unless a Delete in
// flight finished it meanwhile.
func (m *Manager) retryRemove(ctx context.Context, id string) {
	unlock := m.lock(id)
	defer unlock()
	if sb, err := m.store.GetSandbox(ctx, id); err != nil || sb.Status != string(api.StatusTerminating) {
		return // the Delete in flight finished it
	}
	if err := m.remove(ctx, id); err != nil {
		m.sweepFailed("retry sandbox deletion", id, err)
	}
}

func (m *Manager) expire(ctx context.Context, id string) {
	unlock := m.lock(id)
	defer unlock()
	if _, err := m.setStatus(ctx, id, api.StatusTerminating, "ttl expired"); err != nil {
		if !errors.Is(err, errdefs.ErrNotFound) { // not deleted meanwhile
			m.sweepFailed("expire sandbox", id, err)
		}
		return
	}
	if err := m.remove(ctx, id); err != nil {
		m.sweepFailed("expire sandbox", id, err)
	}
}

// alive reports whether sb's record says its processes exist: it is
// running or paused.
func alive(sb *store.Sandbox) bool {
	return sb.Status == string(api.StatusRunning) || sb.Status == string(api.StatusPaused)
}

// CheckDead looks at running (or paused) sandbox id's runtime side now, as
// the sweep does every second, and fails the sandbox if it has died (see
// markDead); it returns the record as it then is. A sandbox that is
// neither, or whose runtime side cannot be asked, is returned as it is.
func (m *Manager) CheckDead(ctx context.Context, id string) (*store.Sandbox, error) {
	unlock := m.lock(id)
	defer unlock()
	sb, err := m.Get(ctx, id)
	if err != nil || !alive(sb) {
		return sb, err
	}
	if dead := m.markDead(ctx, sb); dead != nil {
		return dead, nil
	}
	return sb, nil
}

// markDead fails running or paused sandbox sb, whose runtime side the
// sweep's List reported gone or stopped, and releases what the runtime
// still holds for it: all of it, or, for an owner that collects from its dead
// sandboxes (Config.KeepDeadFiles), all but its files. The sandbox may
// have been stopped and started again since the List, so the caller
// holds its lock and read its record after taking it, and its runtime
// state is looked at again here. It returns the failed record, or nil
// when the sandbox lives or its state is unknown.
func (m *Manager) markDead(ctx context.Context, sb *store.Sandbox) *store.Sandbox {
	id := sb.ID
	st, err := m.rt.Status(ctx, id)
	reason := "sandbox exited"
	switch {
	case err == nil && (st.State == sandbox.StateRunning || st.State == sandbox.StatePaused):
		return nil
	case err == nil && st.Reason != "":
		reason += ": " + st.Reason // evicted, OOM-killed, node lost
	case errors.Is(err, errdefs.ErrNotFound):
		reason = fmt.Sprintf("sandbox lost: %v", err)
	case err != nil:
		m.log.Warn("sweep: sandbox status", "sandbox", id, "err", err)
		return nil // unknown: the next sweep looks again
	}
	if err == nil && m.keepsFiles(sb) {
		// Its owner collects from it: what runs goes, the files stay.
		if err := m.rt.Stop(ctx, id, 0); err != nil {
			m.log.Warn("stop dead sandbox", "sandbox", id, "err", err)
		} else {
			m.event(ctx, id, sb.Status, "its files are kept for "+sb.ManagedBy+" to collect")
		}
	} else if err := m.rt.Delete(ctx, id); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		m.log.Warn("release dead sandbox", "sandbox", id, "err", err)
	}
	failed, err := m.fail(ctx, id, reason)
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		m.sweepFailed("record a dead sandbox failed", id, err)
	}
	return failed
}

// storeFull holds the sweep back while the store cannot be written for
// want of room (errdefs.NoSpace: SQLite's SQLITE_FULL, ENOSPC,
// PostgreSQL's 53100). Its writes (TTL expiries, dead sandboxes failed,
// abandoned ones settled, deletions finished) would otherwise fail every
// second, one per sandbox, each logged as that sandbox's own failure; a
// deletion that would free space needs the store written first (its
// record before its runtime side), so nothing but freed space ends it.
// After such a failure the sweep pauses for fullBackoff and then tries
// again; the failures are said once per fullWarnEvery, naming the full
// disk. The zero value is ready; it is safe for concurrent use.
type storeFull struct {
	mu     sync.Mutex
	until  time.Time // the sweep pauses until then
	warned time.Time // the last warning
	failed int       // writes failed for want of room since it
}

const (
	fullBackoff   = 10 * time.Second
	fullWarnEvery = time.Minute
)

// paused reports whether the sweep pauses at now.
func (f *storeFull) paused(now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return now.Before(f.until)
}

// fail pauses the sweep from now, and returns the failures to warn of
// (this one and those not said yet) when a warning is due, else 0.
func (f *storeFull) fail(now time.Time) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.until = now.Add(fullBackoff)
	f.failed++
	if !f.warned.IsZero() && now.Sub(f.warned) < fullWarnEvery {
		return 0
	}
	n := f.failed
	f.warned, f.failed = now, 0
	return n
}

// sweepFailed logs err, the failure of a write of the sweep's (what, about
// sandbox id): a write refused for want of room pauses the sweep
// (storeFull) and is said as that.
func (m *Manager) sweepFailed(what, id string, err error) {
	if !errdefs.IsNoSpace(err) {
		m.log.Warn("sweep: "+what, "sandbox", id, "err", err)
		return
	}
	if n := m.full.fail(m.now()); n > 0 {
		m.log.Warn("the store cannot be written: the file system of its database (the data dir's, for SQLite) is full; TTL expiries, dead and abandoned sandboxes wait, the sweep tries again every "+fullBackoff.String()+" until space is freed (delete sandboxes, or free space there)",
			"failed_writes", n, "last", what, "sandbox", id, "err", err)
	}
}
