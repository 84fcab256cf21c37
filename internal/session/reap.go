package session

import (
	"context"
	"errors"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

// Reaped counts what one Reap removed.
type Reaped struct {
	// Idle sessions passed their idle deadline with nothing running;
	// Expired ones their maximum lifetime.
	Idle, Expired int
	// IdleContexts are contexts in no session idle past their timeout.
	IdleContexts int
	// Paused are sessions whose sandbox was paused, idle past
	// Config.PauseAfter.
	Paused int
	// Orphans are sandboxes a service made that nothing refers to; Failed
	// are failed ones past the retention; Leftovers runtime state no
	// record knows.
	Orphans, Failed, Leftovers int
}

// Run reaps every ReapInterval until ctx is done.
func (s *Service) Run(ctx context.Context) {
	t := time.NewTicker(s.cfg.ReapInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := s.Reap(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("reap sessions", "err", err)
			}
		}
	}
}

// Reap removes what is due: sessions idle past their deadline (never one
// with a request running in it) or past their maximum lifetime (even
// then); pauses the sandboxes of sessions idle past Config.PauseAfter; contexts in no session idle past theirs (contexts.ReapIdle),
// then orphans: sandboxes a service made that no session or
// context refers to, older than the grace period; failed ones past the
// retention; and runtime state no record knows.
func (s *Service) Reap(ctx context.Context) (Reaped, error) {
	var r Reaped
	now := s.now().UTC()
	due, err := s.store.ListSessions(ctx, store.SessionFilter{AllTenants: true, DueBy: now})
	if err != nil {
		return r, err
	}
	for _, sess := range due {
		switch s.reapSession(ctx, sess.Key, now) {
		case "idle":
			r.Idle++
		case "expired":
			r.Expired++
		}
	}
	var pauseErr error
	if s.cfg.PauseAfter > 0 {
		r.Paused, pauseErr = s.pauseIdle(ctx, now)
	}
	if r.IdleContexts, err = s.ctxs.ReapIdle(ctx); err != nil {
		return r, err
	}
	reapable, err := s.store.ReapableSandboxes(ctx, now.Add(-s.cfg.OrphanGrace), now.Add(-s.cfg.FailedRetention))
	if err != nil {
		return r, err
	}
	errs := []error{pauseErr}
	for _, sb := range reapable {
		reason := "orphan: no session or context refers to it"
		if sb.Status == string(api.StatusFailed) {
			if sb.UpdatedAt.After(now.Add(-s.cfg.FailedRetention)) {
				continue // an orphan, but kept a while for its history
			}
			reason = "failed, past the retention"
			r.Failed++
		} else {
			r.Orphans++
		}
		if err := s.sbx.Delete(ctx, sb.ID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			errs = append(errs, err)
			continue
		}
		s.log.Info("sandbox reaped", "sandbox", sb.ID, "managed_by", sb.ManagedBy, "reason", reason)
	}
	n, err := s.sbx.ReapLeftovers(ctx)
	r.Leftovers = n
	if err != nil {
		errs = append(errs, err)
	}
	if r != (Reaped{}) {
		s.log.Info("reaped", "idle_sessions", r.Idle, "expired_sessions", r.Expired, "paused_sessions", r.Paused, "orphans", r.Orphans,
			"failed", r.Failed, "leftovers", r.Leftovers)
	}
	return r, errors.Join(errs...)
}

// pauseIdle pauses the sandboxes of the sessions idle for PauseAfter by
// now, with nothing running in them, that they own (a session bound to a
// sandbox it did not make leaves it as it is), and returns how many.
func (s *Service) pauseIdle(ctx context.Context, now time.Time) (int, error) {
	all, err := s.store.ListSessions(ctx, store.SessionFilter{AllTenants: true})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, sess := range all {
		if sess.OwnsSandbox && !now.Before(sess.LastUsedAt.Add(s.cfg.PauseAfter)) && s.pauseSession(ctx, sess.Key, now) {
			n++
		}
	}
	return n, nil
}

// pauseSession pauses the sandbox of session key if it is still idle past
// PauseAfter and running, and reports whether it did.
func (s *Service) pauseSession(ctx context.Context, key string, now time.Time) bool {
	unlock, err := s.locks.LockContext(ctx, key)
	if err != nil {
		s.log.Warn("lock an idle session to pause it", "session", key, "err", err)
		return false
	}
	defer unlock()
	sess, err := s.store.GetSession(ctx, key)
	if err != nil || now.Before(sess.LastUsedAt.Add(s.cfg.PauseAfter)) || s.busy(key) > 0 {
		return false
	}
	sb, err := s.sbx.Get(ctx, sess.SandboxID)
	if err != nil || sb.Status != string(api.StatusRunning) {
		return false
	}
	if _, err := s.sbx.Pause(ctx, sb.ID); err != nil {
		s.log.Warn("pause an idle session", "session", sess.ID, "sandbox", sb.ID, "err", err)
		return false
	}
	s.log.Info("session paused", "session", sess.ID, "tenant", sess.Tenant, "sandbox", sb.ID,
		"idle", now.Sub(sess.LastUsedAt).Round(time.Second))
	return true
}

// reapSession removes session key if it is still due, and says why.
func (s *Service) reapSession(ctx context.Context, key string, now time.Time) string {
	unlock, err := s.locks.LockContext(ctx, key)
	if err != nil {
		s.log.Warn("lock a session to reap it", "session", key, "err", err)
		return ""
	}
	defer unlock()
	sess, err := s.store.GetSession(ctx, key)
	if err != nil {
		return ""
	}
	switch {
	case sess.EndsAt != nil && !now.Before(*sess.EndsAt):
		s.remove(ctx, sess, "past its maximum lifetime")
		return "expired"
	case !now.Before(sess.ExpiresAt) && s.busy(key) == 0:
		s.remove(ctx, sess, "idle past its deadline")
		return "idle"
	}
	return ""
}
