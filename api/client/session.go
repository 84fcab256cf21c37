package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/agent2env/agent2env/api"
)

// SessionService holds the session endpoints (/api/v1/sessions): code and
// commands run in sessions the daemon makes on first use and removes once
// idle. Get it with Client.Sessions.
//
//	res, err := c.Sessions().ExecuteCode(ctx, api.SessionExecuteRequest{Code: "x = 1"})
//	res, err = c.Sessions().ExecuteCode(ctx, api.SessionExecuteRequest{Code: "x + 1", SessionID: res.SessionID})
type SessionService struct {
	c *Client
}

// Sessions returns the session endpoints.
func (c *Client) Sessions() *SessionService { return &SessionService{c: c} }

// sessionPath returns the escaped API path of session id plus suffix.
func sessionPath(id, suffix string) (string, error) {
	if id == "" {
		return "", invalidf("session id is empty")
	}
	return "/sessions/" + url.PathEscape(id) + suffix, nil
}

// ExecuteCode runs code in the session req.SessionID names, making it when
// it does not exist (a new id when empty). A failed execution is no error:
// the response says Success false, and why.
func (s *SessionService) ExecuteCode(ctx context.Context, req api.SessionExecuteRequest) (*api.SessionExecuteResponse, error) {
	var out api.SessionExecuteResponse
	if err := s.c.doJSON(ctx, http.MethodPost, "/sessions/execute", req, &out); err != nil {
		return nil, wrapf(err, "execute code in a session")
	}
	return &out, nil
}

// ExecuteCommand runs a command in the session req.SessionID names, making
// it when it does not exist. Stdout and Stderr hold the command's output
// byte for byte, as SandboxService.Execute's do.
func (s *SessionService) ExecuteCommand(ctx context.Context, req api.SessionCommandRequest) (*api.SessionCommandResponse, error) {
	req.OutputEncoding = outputEncoding(req.OutputEncoding)
	var out api.SessionCommandResponse
	if err := s.c.doJSON(ctx, http.MethodPost, "/sessions/command", req, &out); err != nil {
		return nil, wrapf(err, "execute a command in a session")
	}
	if err := decodeOutput(&out.ExecResponse); err != nil {
		return nil, wrapf(err, "execute a command in a session")
	}
	return &out, nil
}

// Get returns a session; an unknown one is ErrNotFound.
func (s *SessionService) Get(ctx context.Context, id string) (*api.Session, error) {
	p, err := sessionPath(id, "")
	if err != nil {
		return nil, err
	}
	var out api.Session
	if err := s.c.doJSON(ctx, http.MethodGet, p, nil, &out); err != nil {
		return nil, wrapf(err, "get session %s", id)
	}
	return &out, nil
}

// List returns the sessions of the client's key, oldest first.
func (s *SessionService) List(ctx context.Context) ([]api.Session, error) {
	l, err := s.ListPage(ctx, ListSessionsOptions{})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// ListSessionsOptions asks for a page of sessions (agent2env additions to
// the list). The zero value asks for every session, oldest first.
type ListSessionsOptions struct {
	// Limit and Cursor ask for one page (Limit 0: every session); the
	// next page's cursor is the list's NextCursor.
	Limit  int
	Cursor string
	// Order is the list's order: "" (the daemon's default) or
	// api.OrderAsc oldest first, api.OrderDesc newest first.
	Order api.Order
}

// ListPage returns the sessions of the client's key, oldest first unless
// opts.Order says otherwise: one page when opts.Limit is set.
func (s *SessionService) ListPage(ctx context.Context, opts ListSessionsOptions) (*api.SessionList, error) {
	var out api.SessionList
	if err := s.c.doJSONQuery(ctx, http.MethodGet, "/sessions", pageQuery(opts.Limit, opts.Cursor, opts.Order), nil, &out); err != nil {
		return nil, wrapf(err, "list sessions")
	}
	return &out, nil
}

// Delete removes a session with its sandbox.
func (s *SessionService) Delete(ctx context.Context, id string) error {
	p, err := sessionPath(id, "")
	if err != nil {
		return err
	}
	if err := s.c.doJSON(ctx, http.MethodDelete, p, nil, nil); err != nil {
		return wrapf(err, "delete session %s", id)
	}
	return nil
}

// KeepAlive moves a session's idle deadline to now plus its idle timeout,
// which req may change first.
func (s *SessionService) KeepAlive(ctx context.Context, id string, req api.KeepAliveRequest) (*api.Session, error) {
	p, err := sessionPath(id, "/keepalive")
	if err != nil {
		return nil, err
	}
	var out api.Session
	if err := s.c.doJSON(ctx, http.MethodPost, p, req, &out); err != nil {
		return nil, wrapf(err, "keep session %s alive", id)
	}
	return &out, nil
}

// Stats returns the daemon's statistics.
func (c *Client) Stats(ctx context.Context) (*api.Stats, error) {
	var out api.Stats
	if err := c.doJSON(ctx, http.MethodGet, "/stats", nil, &out); err != nil {
		return nil, wrapf(err, "get stats")
	}
	return &out, nil
}
