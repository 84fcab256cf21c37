package session

import (
	"context"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/contexts"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/quantity"
	"github.com/agent2env/agent2env/internal/store"
)

// usage is the manager's usage with the sessions counted.
func (s *Service) usage(ctx context.Context) (api.Usage, error) {
	u, err := s.sbx.Usage(ctx)
	if err != nil {
		return u, err
	}
	if n, err := s.store.CountSessions(ctx); err == nil {
		u.Sessions = n
	}
	s.mu.Lock()
	busy := len(s.active)
	s.mu.Unlock()
	u.IdleSessions = max(u.Sessions-busy, 0)
	return u, nil
}

// provision makes the sandbox of a new session. The manager admits it
// (429 RESOURCE_LIMIT past --max-sandboxes, 507 INSUFFICIENT_CAPACITY
// past the host's capacity) before it records anything; its refusal is
// given the sessions' usage and a suggestion for sessions.
func (s *Service) provision(ctx context.Context, sess *store.Session, lang string) (contexts.Warm, error) {
	if lang == "" {
		lang = api.LanguagePython
	}
	mounts, err := s.mounts(sess)
	if err != nil {
		return contexts.Warm{}, err
	}
	req := contexts.SandboxRequest{Language: lang, Template: sess.Template, ManagedBy: ManagedBy, Mounts: mounts}
	if !sameCPU(sess.CPU, s.cfg.PoolCPU) || !sameBytes(sess.Memory, s.cfg.PoolMemory) {
		req.CPU, req.Memory = sess.CPU, sess.Memory
	}
	w, err := s.ctxs.Provision(ctx, req)
	if err != nil && manager.IsResourceError(err) && !manager.IsOwnedLimit(err) { // an owner's limit speaks of its owner
		return contexts.Warm{}, s.resourceError(ctx, sess, err)
	}
	return w, err
}

// resourceError is the manager's refusal to make sess's sandbox, with the
// sessions counted in its usage and a suggestion that speaks of sessions.
func (s *Service) resourceError(ctx context.Context, sess *store.Session, err error) error {
	suggestion := "delete idle sessions (DELETE /api/v1/sessions/{id}) or sandboxes"
	if errdefs.Code(err) == api.CodeLimitExceeded {
		suggestion += ", or raise --max-sandboxes"
	} else if sess.Flavor != api.FlavorSmall {
		suggestion = "use flavor small, or " + suggestion
	}
	u, uerr := s.usage(ctx)
	if uerr != nil {
		u, _ = errdefs.Details(err)["usage"].(api.Usage)
	}
	return manager.ResourceError(err, u, suggestion)
}

func sameCPU(a, b string) bool {
	x, err1 := quantity.ParseCPU(a)
	y, err2 := quantity.ParseCPU(b)
	return err1 == nil && err2 == nil && x == y
}

func sameBytes(a, b string) bool {
	x, err1 := quantity.ParseBytes(a)
	y, err2 := quantity.ParseBytes(b)
	return err1 == nil && err2 == nil && x == y
}
