package session

import (
	"context"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/contexts"
	"github.com/agent2env/agent2env/internal/store"
)

// The contexts service places contexts with a session name through these
// methods (contexts.Sessions).
var _ contexts.Sessions = (*Service)(nil)

// Attach opens the session a context create names, making it when it does
// not exist (contexts.Sessions).
func (s *Service) Attach(ctx context.Context, req api.CreateContextRequest, lang string) (*contexts.Attachment, error) {
	l, err := s.open(ctx, openRequest{id: req.SessionName, flavor: req.Flavor, language: lang, template: req.Template,
		sandboxID: req.SandboxID})
	if err != nil {
		return nil, err
	}
	at := l.attachment()
	at.Done = func(ok bool) { l.release(ctx, ok, activity{}) }
	return at, nil
}

// attachment hands the lease's sandbox, and its warm kernel, to a context
// create: the kernel is the create's to adopt or stop from then on.
func (l *lease) attachment() *contexts.Attachment {
	at := &contexts.Attachment{Sandbox: l.sandbox, SessionKey: l.sess.Key, Warm: l.warm, Done: func(bool) {}}
	l.warm = contexts.Warm{}
	return at
}

// Use marks session key busy with an execution (contexts.Sessions): the
// session is not reaped (nor paused) until done is called, and then its
// idle clock starts again. A session paused after idle is resumed.
func (s *Service) Use(ctx context.Context, key string) func(d time.Duration, failed bool) {
	if key == "" {
		return func(d time.Duration, failed bool) { s.execs.observe(d, failed) }
	}
	// Not while the reaper decides on it: a lock that fails (the store
	// out of reach) leaves the reaper to see the session busy here only.
	unlock, err := s.locks.LockContext(ctx, key)
	if err != nil {
		s.log.Warn("lock a session for an execution", "session", key, "err", err)
		unlock = func() {}
	}
	s.enter(key)
	if s.cfg.PauseAfter > 0 {
		// The context's execution reaches the sandbox directly: a pause
		// after idle is undone here. A failure shows in the execution.
		if sess, err := s.store.GetSession(ctx, key); err == nil {
			if _, err := s.wake(ctx, sess); err != nil {
				s.log.Warn("resume a paused session", "session", sess.ID, "err", err)
			}
		}
	}
	unlock()
	return func(d time.Duration, failed bool) {
		s.execs.observe(d, failed)
		a := activity{executions: 1, elapsed: d}
		if failed {
			a.errors = 1
		}
		s.exit(ctx, key, a)
	}
}

// Left ends session key when its last context was deleted and nothing
// runs in it (contexts.Sessions): as with contexts in no session, deleting
// the last context of a session frees its sandbox.
func (s *Service) Left(ctx context.Context, key string) {
	unlock, err := s.locks.LockContext(ctx, key)
	if err != nil { // the reaper ends it once idle
		s.log.Warn("lock a session its last context left", "session", key, "err", err)
		return
	}
	defer unlock()
	if s.busy(key) > 0 {
		return
	}
	n, err := s.store.CountContexts(ctx, store.ContextFilter{SessionKey: key})
	if err != nil || n > 0 {
		return
	}
	sess, err := s.store.GetSession(ctx, key)
	if err != nil {
		return
	}
	s.remove(ctx, sess, "its last context was deleted")
}
