package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/store"
)

// get returns ctx's tenant's session id, or SESSION_NOT_FOUND.
func (s *Service) get(ctx context.Context, id string) (*store.Session, error) {
	if err := CheckID(id); err != nil {
		return nil, err
	}
	sess, err := s.store.GetSession(ctx, store.SessionKey(auth.TenantOf(ctx), id))
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, notFound(id)
	}
	return sess, err
}

// Get returns a session of ctx's tenant.
func (s *Service) Get(ctx context.Context, id string) (*api.Session, error) {
	sess, err := s.get(ctx, id)
	if err != nil {
		return nil, s.unreached(ctx, id, err)
	}
	return s.toAPI(ctx, sess)
}

// List returns the sessions of ctx's tenant, and those the code of the
// tenant's sandboxes made (api.Session.MadeBySandbox), oldest first.
func (s *Service) List(ctx context.Context) ([]api.Session, error) {
	out, _, err := s.ListPage(ctx, store.Page{})
	return out, err
}

// ListPage is List's page p (newest first with p.Desc), with the cursor
// of the next page ("" after the last).
func (s *Service) ListPage(ctx context.Context, p store.Page) ([]api.Session, string, error) {
	all, next, err := s.store.ListSessionPage(ctx, store.SessionFilter{Tenant: auth.TenantOf(ctx), WithOwned: true}, p)
	if err != nil {
		return nil, "", err
	}
	out := make([]api.Session, 0, len(all))
	for _, sess := range all {
		a, err := s.toAPI(ctx, sess)
		if err != nil {
			return nil, "", err
		}
		out = append(out, *a)
	}
	return out, next, nil
}

// Delete removes a session of ctx's tenant, with its sandbox: what runs in
// it ends.
func (s *Service) Delete(ctx context.Context, id string) error {
	if err := CheckID(id); err != nil {
		return err
	}
	key := store.SessionKey(auth.TenantOf(ctx), id)
	unlock, err := s.locks.LockContext(ctx, key)
	if err != nil {
		return fmt.Errorf("wait for session %s: %w", id, err)
	}
	defer unlock()
	sess, err := s.get(ctx, id)
	if err != nil {
		return s.unreached(ctx, id, err)
	}
	s.remove(context.WithoutCancel(ctx), sess, "deleted by request")
	return nil
}

// unreached is err, ctx's tenant's not-found of session id, saying whose
// the session is when one the tenant lists has that id: made by the code
// of its sandboxes or the agents of its runs, it is theirs, and only they
// reach it by id (the tenant's own session of that id would be another);
// it ends with them.
func (s *Service) unreached(ctx context.Context, id string, err error) error {
	if !errors.Is(err, errdefs.ErrNotFound) {
		return err
	}
	own := auth.TenantOf(ctx)
	all, lerr := s.store.ListSessions(ctx, store.SessionFilter{Tenant: own, WithOwned: true})
	if lerr != nil {
		return err
	}
	var makers []string
	for _, o := range all {
		if o.ID == id && o.Tenant != own {
			makers = append(makers, auth.Maker(o.Tenant))
		}
	}
	if len(makers) == 0 {
		return err
	}
	return errdefs.WithCode(errdefs.NotFound("session %s is not yours but made by %s, which alone reaches it by id; "+
		"it ends with its maker", id, strings.Join(makers, " and ")), api.CodeSessionNotFound)
}

// KeepAlive moves a session's idle deadline to now plus its idle timeout,
// which req may change first.
func (s *Service) KeepAlive(ctx context.Context, id string, req api.KeepAliveRequest) (*api.Session, error) {
	if math.IsNaN(req.IdleTimeout) || req.IdleTimeout < 0 || req.IdleTimeout > s.cfg.MaxIdleTimeout.Seconds() {
		return nil, errdefs.Invalid("idle_timeout must be between 0 and %v seconds", s.cfg.MaxIdleTimeout.Seconds())
	}
	if _, err := s.get(ctx, id); err != nil {
		return nil, err
	}
	now := s.now().UTC()
	sess, err := s.store.UpdateSession(ctx, store.SessionKey(auth.TenantOf(ctx), id), func(sess *store.Session) error {
		if req.IdleTimeout > 0 {
			sess.IdleTimeout = time.Duration(req.IdleTimeout * float64(time.Second))
		}
		sess.ExpiresAt = now.Add(sess.IdleTimeout)
		return nil
	})
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, err
	}
	s.log.Info("session kept alive", "session", id, "expires_at", sess.ExpiresAt)
	return s.toAPI(ctx, sess)
}

// toAPI describes a session, with the languages of its kernels.
func (s *Service) toAPI(ctx context.Context, sess *store.Session) (*api.Session, error) {
	cs, err := s.store.ListContexts(ctx, store.ContextFilter{SessionKey: sess.Key})
	if err != nil {
		return nil, err
	}
	langs := []string{}
	for _, c := range cs {
		if !contains(langs, c.Language) {
			langs = append(langs, c.Language)
		}
	}
	sort.Strings(langs)
	return &api.Session{
		SessionID: sess.ID, Flavor: sess.Flavor, CPU: sess.CPU, Memory: sess.Memory, SandboxID: sess.SandboxID,
		Languages: langs, CreatedAt: sess.CreatedAt, LastUsedAt: sess.LastUsedAt, ExpiresAt: sess.ExpiresAt,
		EndsAt: sess.EndsAt, IdleTimeout: sess.IdleTimeout.Seconds(), Busy: s.busy(sess.Key),
		ExecutionCount: sess.ExecutionCount, ErrorCount: sess.ErrorCount, ExecutionTime: sess.ExecutionTime.Seconds(),
		MadeBySandbox: auth.TenantSandbox(sess.Tenant), MadeByRun: auth.TenantRun(sess.Tenant),
	}, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Target names where a file operation happens: a session of ctx's tenant
// or a sandbox. A write makes the session when it does not exist; a read
// or a list needs one that exists.
type Target struct {
	SessionID string
	SandboxID string
}

// access is what a file operation does to its target.
type access bool

const (
	reading access = false // finds a session, never makes one
	writing access = true  // makes the session when it does not exist
)

// at runs fn on the sandbox of t: for a session, with a lease on it.
func (s *Service) at(ctx context.Context, t Target, a access, fn func(sandboxID string) error) (*api.SessionInfo, error) {
	switch {
	case t.SessionID != "" && t.SandboxID != "":
		return nil, errdefs.Invalid("give a session id or a sandbox id, not both")
	case t.SandboxID != "":
		return nil, fn(t.SandboxID)
	case t.SessionID == "":
		return nil, errdefs.Invalid("a session id or a sandbox id is required")
	}
	l, err := s.open(ctx, openRequest{id: t.SessionID, existing: a == reading})
	if err != nil {
		return nil, err
	}
	err = fn(l.sandbox.ID)
	l.release(ctx, err == nil, activity{})
	info := l.info()
	return &info, err
}

// WriteFile writes r to the file at p in t's sandbox (relative paths are
// in /workspace), making its directories.
func (s *Service) WriteFile(ctx context.Context, t Target, p string, r io.Reader) (*api.FileInfo, *api.SessionInfo, error) {
	p, err := manager.CleanPath(p) // before a session is made for it
	if err != nil {
		return nil, nil, err
	}
	var fi agent.FileInfo
	info, err := s.at(ctx, t, writing, func(id string) error {
		var err error
		fi, err = s.sbx.Upload(ctx, id, p, 0o644, r)
		return err
	})
	if err != nil {
		return nil, info, err
	}
	out := fileInfo(fi)
	return &out, info, nil
}

// ReadFile returns the file at p in t's sandbox, refusing one larger than
// limit bytes. An unknown session is SESSION_NOT_FOUND: a read makes none.
func (s *Service) ReadFile(ctx context.Context, t Target, p string, limit int64) ([]byte, *api.SessionInfo, error) {
	p, err := manager.CleanPath(p) // before the session is opened
	if err != nil {
		return nil, nil, err
	}
	var data []byte
	info, err := s.at(ctx, t, reading, func(id string) error {
		rc, _, err := s.sbx.Download(ctx, id, p)
		if err != nil {
			return err
		}
		defer rc.Close()
		data, err = io.ReadAll(io.LimitReader(rc, limit+1))
		if err == nil && int64(len(data)) > limit {
			err = errdefs.Invalid("file %s is larger than the %d bytes a read returns", p, limit)
		}
		return err
	})
	return data, info, err
}

// ListFiles lists the directory at p in t's sandbox. An unknown session is
// SESSION_NOT_FOUND: a list makes none.
func (s *Service) ListFiles(ctx context.Context, t Target, p string) ([]api.FileInfo, *api.SessionInfo, error) {
	clean, err := manager.CleanPath(p) // before the session is opened
	if err != nil {
		return nil, nil, err
	}
	out := []api.FileInfo{}
	info, err := s.at(ctx, t, reading, func(id string) error {
		ac, err := s.sbx.Agent(ctx, id)
		if err != nil {
			return err
		}
		fis, err := ac.List(ctx, clean)
		if errors.Is(err, errdefs.ErrNotFound) {
			return errdefs.WithCode(fmt.Errorf("list %s: %w", clean, err), api.CodeFileNotFound)
		}
		if err != nil {
			return fmt.Errorf("list %s in sandbox %s: %w", clean, id, err)
		}
		for _, fi := range fis {
			out = append(out, fileInfo(fi))
		}
		return nil
	})
	return out, info, err
}

// SessionSandbox returns the sandbox of a session of ctx's tenant that
// exists, without making it: an MCP resource read names one.
func (s *Service) SessionSandbox(ctx context.Context, id string) (string, error) {
	sess, err := s.get(ctx, id)
	if err != nil {
		return "", err
	}
	return sess.SandboxID, nil
}

func fileInfo(fi agent.FileInfo) api.FileInfo {
	return api.FileInfo{Name: fi.Name, Path: fi.Path, Size: fi.Size, Mode: fmt.Sprintf("%04o", fi.Mode.Perm()),
		ModTime: fi.ModTime, IsDir: fi.IsDir}
}
