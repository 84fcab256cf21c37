package service

import (
	"context"
	"strings"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/contexts"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/keyedlock"
	"github.com/agent2env/agent2env/internal/store"
)

// Contexts is the code-interpreter context service: contexts.Service, which
// speaks api already, with the scope the API's two forms share. Every
// method takes the sandbox the context must be in: "" for any (seed 001's
// /contexts), or a sandbox id (/sandboxes/{id}/contexts), where a context
// of another sandbox is not found, as is an unknown sandbox. It is safe
// for concurrent use.
type Contexts struct {
	svc      *contexts.Service
	defaults keyedlock.Shared // one per sandbox, language and name (Default)
}

// MaxCodeBytes bounds the code of one execution, for the surfaces'
// request limits.
const MaxCodeBytes = contexts.MaxCodeBytes

// Sink receives an execution's output as it is produced (see
// contexts.Sink); Stream's run function reports to one.
type Sink = contexts.Sink

// Language returns the canonical name of a language or of its alias
// ("py", "node", "sh"); an unknown one is ErrInvalidArgument
// (INVALID_LANGUAGE).
func Language(name string) (string, error) { return contexts.Language(name) }

// ContextsOption configures Contexts.
type ContextsOption func(*Contexts)

// WithSharedDefaults makes the first uses of a default context through
// several daemons of one store make one context too: remote locks them
// among the daemons.
func WithSharedDefaults(remote keyedlock.Remote) ContextsOption {
	return func(c *Contexts) { c.defaults.Remote = remote }
}

// NewContexts returns the context service of svc.
func NewContexts(svc *contexts.Service, opts ...ContextsOption) *Contexts {
	c := &Contexts{svc: svc}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Create makes a context, in sandboxID when it is set (req.SandboxID may
// repeat it, not contradict it), and a sandbox for it when neither names
// one.
func (c *Contexts) Create(ctx context.Context, sandboxID string, req api.CreateContextRequest) (*api.Context, error) {
	if sandboxID != "" {
		if req.SandboxID != "" && req.SandboxID != sandboxID {
			return nil, errdefs.Invalid("sandbox_id %q differs from the sandbox in the path %q", req.SandboxID, sandboxID)
		}
		req.SandboxID = sandboxID
	}
	return c.svc.Create(ctx, req)
}

// List returns every context in sandboxID of the session sessionName,
// oldest first; "" selects any.
func (c *Contexts) List(ctx context.Context, sandboxID, sessionName string) (*api.ContextList, error) {
	return c.ListPage(ctx, sandboxID, sessionName, nil, "", api.OrderAsc)
}

// ListPage is List's page that limit (nil: every context), cursor ("":
// the first page) and order ("": api.OrderAsc) ask for, with the cursor
// of the next page. Values Page does not take, or a cursor this server
// did not give, are ErrInvalidArgument naming their parameter.
func (c *Contexts) ListPage(ctx context.Context, sandboxID, sessionName string, limit *int, cursor string, order api.Order) (*api.ContextList, error) {
	p, err := Page(limit, cursor, order)
	if err != nil {
		return nil, err
	}
	items, next, err := c.svc.List(ctx, store.ContextFilter{SandboxID: sandboxID, SessionName: sessionName}, p)
	if err != nil {
		return nil, err
	}
	return &api.ContextList{Items: items, Contexts: items, Total: len(items), NextCursor: next}, nil
}

// Get returns context id; an unknown one is ErrNotFound
// (CONTEXT_NOT_FOUND).
func (c *Contexts) Get(ctx context.Context, sandboxID, id string) (*api.Context, error) {
	if sandboxID != "" {
		return c.svc.GetIn(ctx, sandboxID, id)
	}
	return c.svc.Get(ctx, id)
}

// Delete ends context id, and its sandbox when the context service made
// it and no other context uses it.
func (c *Contexts) Delete(ctx context.Context, sandboxID, id string) (*api.DeleteContextResponse, error) {
	var err error
	if sandboxID != "" {
		err = c.svc.DeleteIn(ctx, sandboxID, id)
	} else {
		err = c.svc.Delete(ctx, id)
	}
	if err != nil {
		return nil, err
	}
	return &api.DeleteContextResponse{ContextID: id, Status: "deleted", Message: "context deleted"}, nil
}

// Execute runs code in context id and returns its collected output, which
// counts against the daemon's output budget until the execution's Release.
// Code that fails is a response with its Error, not an error.
func (c *Contexts) Execute(ctx context.Context, sandboxID, id string, req api.ExecuteRequest) (*contexts.Execution, error) {
	if sandboxID != "" {
		return c.svc.ExecuteIn(ctx, sandboxID, id, req)
	}
	return c.svc.Execute(ctx, id, req)
}

// ExecuteTo is Execute in any sandbox that also passes the output on to
// sink as it comes (see contexts.Service.ExecuteTo), for a caller that
// streams and answers the whole output at the end.
func (c *Contexts) ExecuteTo(ctx context.Context, id string, req api.ExecuteRequest, sink Sink) (*contexts.Execution, error) {
	return c.svc.ExecuteTo(ctx, id, req, sink)
}

// Stream checks that context id exists and req is valid, and returns the
// function that runs the code, passing its output to the sink as it comes
// (see contexts.Service.Stream).
func (c *Contexts) Stream(ctx context.Context, sandboxID, id string, req api.ExecuteRequest) (func(context.Context, Sink) (*api.ExecuteResponse, error), error) {
	return c.svc.Stream(ctx, sandboxID, id, req)
}

// StreamChecked is Stream in sandbox sandboxID for a caller that has just
// checked that the sandbox runs, as Sandboxes.Authorize does: the
// execution reads the context, not the sandbox again (see
// contexts.Service.StreamChecked).
func (c *Contexts) StreamChecked(ctx context.Context, sandboxID, id string, req api.ExecuteRequest) (func(context.Context, Sink) (*api.ExecuteResponse, error), error) {
	return c.svc.StreamChecked(ctx, sandboxID, id, req)
}

// StderrWithError returns stderr with e's traceback (its name and value
// when it has none) at its end, unless it is there already: where
// clients of seed 001's API, and of the MCP server built on it (seed 004),
// read why code failed. e nil returns stderr.
func StderrWithError(stderr string, e *api.ExecutionError) string {
	if e == nil {
		return stderr
	}
	tb := e.Traceback
	if tb == "" {
		tb = e.Name + ": " + e.Value
	}
	if strings.Contains(stderr, tb) {
		return stderr
	}
	if stderr != "" && !strings.HasSuffix(stderr, "\n") {
		stderr += "\n"
	}
	return stderr + tb + "\n"
}
