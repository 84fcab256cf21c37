package service

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/store"
)

// MaxLogBytes bounds the console output Logs returns.
const MaxLogBytes = 1 << 20

// Sandboxes is the sandbox service over a manager: create, list, control
// and delete sandboxes, run commands and move files in them, and check
// the port gateway's access tokens. It is safe for concurrent use.
type Sandboxes struct {
	m *manager.Manager
	// publicURL is where clients reach the daemon, without a trailing
	// slash; empty: sandboxes have no accessUrl.
	publicURL string
	usage     sandbox.UsageReader // nil: the runtime measures nothing
	rt        sandbox.Runtime     // nil: no capabilities claimed
	tickets   terminalTickets
	// contexts are the context records snapshots carry; nil: none.
	contexts store.Contexts
}

// SandboxesOption configures a Sandboxes.
type SandboxesOption func(*Sandboxes)

// WithUsage makes CPUTime read the runtime's measures; without it a
// sandbox's CPU time is unknown.
func WithUsage(u sandbox.UsageReader) SandboxesOption { return func(s *Sandboxes) { s.usage = u } }

// WithContextRecords makes snapshots record their sandbox's
// code-interpreter contexts, and the sandboxes made from them have the
// same contexts under new ids; without it they have none.
func WithContextRecords(st store.Contexts) SandboxesOption {
	return func(s *Sandboxes) { s.contexts = st }
}

// NewSandboxes returns the sandbox service of m. publicURL is the base URL
// clients reach the daemon at (e.g. http://sandbox.example.com:8080), from
// which each sandbox's accessUrl is made; empty leaves accessUrl out.
func NewSandboxes(m *manager.Manager, publicURL string, opts ...SandboxesOption) *Sandboxes {
	s := &Sandboxes{m: m, publicURL: strings.TrimRight(publicURL, "/"), tickets: newTerminalTickets()}
	for _, o := range opts {
		o(s)
	}
	return s
}

// view is a sandbox as the API shows it: with its access token, and the
// URL of its ports when the daemon's public URL is known.
func (s *Sandboxes) view(sb *store.Sandbox) *api.Sandbox {
	expires := api.Never
	if sb.ExpiresAt != nil {
		expires = *sb.ExpiresAt
	}
	out := &api.Sandbox{
		ID: sb.ID, Image: sb.Image, CPU: sb.CPU, Memory: sb.Memory, TTL: sb.TTL, Env: sb.Env,
		Status: api.SandboxStatus(sb.Status), Template: sb.Template, TemplateVersion: sb.TemplateVersion,
		CreatedAt: sb.CreatedAt, UpdatedAt: sb.UpdatedAt, ExpiresAt: expires, Reason: sb.Reason,
		Metadata: sb.Metadata, Network: manager.Network(sb),
	}
	if sb.AccessToken != "" {
		out.AccessToken = sb.AccessToken
		if s.publicURL != "" {
			out.AccessURL = AccessURL(s.publicURL, sb.ID)
		}
	}
	return out
}

// viewOf returns the view of sb, or err.
func (s *Sandboxes) viewOf(sb *store.Sandbox, err error) (*api.Sandbox, error) {
	if err != nil {
		return nil, err
	}
	return s.view(sb), nil
}

// Create makes a sandbox from an image or a template (see
// manager.Manager.Create). Overrides apply to templates only: with an
// image, CPU, memory, TTL and env are given at the top level. When ctx
// ends before a sandbox that runs or is pending can be returned (a client
// that closed its connection mid-create), the caller cannot learn its id:
// it is deleted, and ctx's error returned, as CreateAndWait does. One
// that failed is kept for its reason, as every failed create's (a
// daemon's shutdown fails those it ends).
func (s *Sandboxes) Create(ctx context.Context, req api.CreateSandboxRequest) (*api.Sandbox, error) {
	if req.FromSnapshot != "" {
		return s.restore(ctx, req)
	}
	mreq, err := createRequest(req)
	if err != nil {
		return nil, err
	}
	sb, err := s.m.Create(ctx, mreq)
	if err != nil {
		return nil, err
	}
	if sb.Status == string(api.StatusFailed) {
		return s.view(sb), nil
	}
	return s.answerable(ctx, s.view(sb))
}

// CreateAndWait creates a sandbox as Create does and waits, up to wait, for
// it to run, for the surfaces whose clients expect a create to answer with
// a sandbox that runs. One that fails to start is deleted, so nothing is
// left half-made, and refused with its failure classified (ErrStartFailed,
// ErrImageUnavailable). One still pending when wait is up is returned as
// it is: the caller decides. One made from a snapshot (FromSnapshot) runs
// when it is made. When ctx ends before the sandbox can be returned, the
// caller cannot learn its id: it is deleted, and ctx's error returned.
func (s *Sandboxes) CreateAndWait(ctx context.Context, req api.CreateSandboxRequest, wait time.Duration) (*api.Sandbox, error) {
	if req.FromSnapshot != "" {
		sb, err := s.restore(ctx, req)
		if err != nil {
			return nil, err
		}
		return s.answerable(ctx, sb)
	}
	mreq, err := createRequest(req)
	if err != nil {
		return nil, err
	}
	sb, err := s.m.Create(ctx, mreq)
	if err != nil {
		return nil, err
	}
	if wait > 0 {
		wctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		if sb, err = s.m.Settle(wctx, sb); err != nil {
			return nil, err
		}
	}
	if sb.Status == string(api.StatusFailed) {
		_ = s.m.Delete(context.WithoutCancel(ctx), sb.ID)
		return nil, manager.StartFailure(sb)
	}
	return s.answerable(ctx, s.view(sb))
}

// answerable returns sb, made for a caller of ctx, unless ctx has ended:
// then no one will learn of it, and it is deleted.
func (s *Sandboxes) answerable(ctx context.Context, sb *api.Sandbox) (*api.Sandbox, error) {
	if err := ctx.Err(); err != nil {
		id := sb.ID
		if derr := s.m.Delete(context.WithoutCancel(ctx), id); derr != nil {
			return nil, fmt.Errorf("create sandbox %s: %w; and delete it: %v", id, err, derr)
		}
		return nil, fmt.Errorf("create sandbox %s: %w", id, err)
	}
	return sb, nil
}

// The classes of CreateAndWait's error for a sandbox that failed to
// start: every one is ErrStartFailed, and one whose image could not be
// found or prepared is also ErrImageUnavailable (and ErrInvalidArgument).
var (
	ErrStartFailed      = manager.ErrStartFailed
	ErrImageUnavailable = manager.ErrImageUnavailable
)

// CheckCPU refuses, with ErrInvalidArgument, a CPU limit a create would
// refuse (one that does not parse, or below the 10m a runtime can
// enforce): for a surface that names the field it came in.
func CheckCPU(cpu string) error {
	_, err := manager.ParseCPU(cpu)
	return err
}

// createRequest is req as the manager takes it.
func createRequest(req api.CreateSandboxRequest) (manager.CreateRequest, error) {
	mreq := manager.CreateRequest{
		Image: req.Image, CPU: req.CPU, Memory: req.Memory, TTL: req.TTL, Env: req.Env,
		Template: req.Template, TemplateVersion: req.TemplateVersion, Metadata: req.Metadata,
		Network: req.Network,
	}
	if req.TemplateVersion != 0 && req.Template == "" {
		return manager.CreateRequest{}, errdefs.Invalid("templateVersion %d applies to templates; give template with it", req.TemplateVersion)
	}
	if o := req.Overrides; o != nil {
		if req.Template == "" {
			return manager.CreateRequest{}, errdefs.Invalid("overrides apply to templates; with image, give cpu, memory, ttl and env directly")
		}
		if req.CPU != "" || req.Memory != "" || req.TTL != nil || len(req.Env) > 0 {
			// The overrides would replace them all, dropping what the
			// top level asked for.
			return manager.CreateRequest{}, errdefs.Invalid("give cpu, memory, ttl and env in overrides or at the top level, not both")
		}
		mreq.CPU, mreq.Memory, mreq.TTL, mreq.Env = o.CPU, o.Memory, o.TTL, o.Env
	}
	return mreq, nil
}

// ListOptions selects a page of sandboxes.
type ListOptions struct {
	// Limit is the most sandboxes a page holds, from 1 to
	// api.MaxPageSize; nil: the whole list.
	Limit *int
	// Cursor is the NextCursor of the previous page; "": the first.
	Cursor string
	// Order is the list's order: "" or api.OrderAsc oldest first,
	// api.OrderDesc newest first.
	Order api.Order
	// Statuses, when not empty, lists the sandboxes in one of them.
	Statuses []api.SandboxStatus
	// Metadata lists the sandboxes whose metadata holds each of its keys
	// with its value.
	Metadata map[string]string
}

// filter is the store's filter of opts.
func (opts *ListOptions) filter() store.SandboxFilter {
	f := store.SandboxFilter{Metadata: opts.Metadata}
	for _, st := range opts.Statuses {
		f.Statuses = append(f.Statuses, string(st))
	}
	return f
}

// List returns a page of the sandboxes clients made (not those waiting in
// a warm pool) that opts selects, oldest first unless opts.Order says
// otherwise. A cursor that is not one is ErrInvalidArgument.
func (s *Sandboxes) List(ctx context.Context, opts ListOptions) (*api.SandboxList, error) {
	p, err := Page(opts.Limit, opts.Cursor, opts.Order)
	if err != nil {
		return nil, err
	}
	page, next, err := s.m.ListFiltered(ctx, opts.filter(), p)
	if err != nil {
		return nil, err
	}
	out := &api.SandboxList{Items: make([]api.Sandbox, 0, len(page)), NextCursor: next}
	for _, sb := range page {
		out.Items = append(out.Items, *s.view(sb))
	}
	return out, nil
}

// Count counts the sandboxes List would list with opts' filters (its
// page and cursor aside).
func (s *Sandboxes) Count(ctx context.Context, opts ListOptions) (int, error) {
	return s.m.Count(ctx, opts.filter())
}

// PatchMetadata applies a merge patch to sandbox id's metadata at once (a
// value sets its key, nil deletes it, keys left out are kept) and returns
// the sandbox. The result is held to the manager's bounds
// (ErrInvalidArgument).
func (s *Sandboxes) PatchMetadata(ctx context.Context, id string, patch map[string]*string) (*api.Sandbox, error) {
	return s.viewOf(s.m.PatchMetadata(ctx, id, patch))
}

// Renew makes sandbox id expire at at, which must be in the future; it may
// come sooner than the sandbox's expiry so far, and gives one that never
// expired an expiry. It returns the sandbox.
func (s *Sandboxes) Renew(ctx context.Context, id string, at time.Time) (*api.Sandbox, error) {
	return s.viewOf(s.m.SetExpiry(ctx, id, at))
}

// Get returns sandbox id; an unknown one is ErrNotFound
// (SANDBOX_NOT_FOUND).
func (s *Sandboxes) Get(ctx context.Context, id string) (*api.Sandbox, error) {
	return s.viewOf(s.m.Get(ctx, id))
}

// Delete removes sandbox id and everything it holds.
func (s *Sandboxes) Delete(ctx context.Context, id string) error { return s.m.Delete(ctx, id) }

// Stop ends every process of running sandbox id and keeps its files.
func (s *Sandboxes) Stop(ctx context.Context, id string) (*api.Sandbox, error) {
	return s.viewOf(s.m.Stop(ctx, id))
}

// Start starts stopped sandbox id again; it is returned pending.
func (s *Sandboxes) Start(ctx context.Context, id string) (*api.Sandbox, error) {
	return s.viewOf(s.m.Start(ctx, id))
}

// Restart stops and starts sandbox id; it is returned pending.
func (s *Sandboxes) Restart(ctx context.Context, id string) (*api.Sandbox, error) {
	return s.viewOf(s.m.Restart(ctx, id))
}

// Pause freezes running sandbox id's processes in memory and returns it
// paused.
func (s *Sandboxes) Pause(ctx context.Context, id string) (*api.Sandbox, error) {
	return s.viewOf(s.m.Pause(ctx, id))
}

// Resume lets paused sandbox id's processes run again and returns it
// running.
func (s *Sandboxes) Resume(ctx context.Context, id string) (*api.Sandbox, error) {
	return s.viewOf(s.m.Resume(ctx, id))
}

// Logs returns the last MaxLogBytes of sandbox id's console output and
// its lifecycle events.
func (s *Sandboxes) Logs(ctx context.Context, id string) (*api.LogsResponse, error) {
	return s.m.Logs(ctx, id, MaxLogBytes)
}
