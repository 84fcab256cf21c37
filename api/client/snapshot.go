package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/agent2env/agent2env/api"
)

// SnapshotService holds the snapshot endpoints: sandboxes saved with their
// memory, and sandboxes made from them. Use it as Client.Snapshots().
type SnapshotService struct {
	c *Client
}

// Snapshots returns the snapshot endpoints.
func (c *Client) Snapshots() *SnapshotService { return &SnapshotService{c: c} }

// snapshotPath returns the escaped API path of snapshot id.
func snapshotPath(id string) (string, error) {
	if id == "" {
		return "", invalidf("snapshot id is empty")
	}
	return "/snapshots/" + url.PathEscape(id), nil
}

// Create saves running (or paused) sandbox id whole: its processes with
// their memory, its files and its spec. Live (stop false) the sandbox is
// frozen only while saved; with stop it is stopped once saved. A sandbox
// that is not running gives ErrConflict; a daemon whose runtime cannot
// ErrNotImplemented.
func (s *SnapshotService) Create(ctx context.Context, sandboxID string, stop bool) (*api.Snapshot, error) {
	p, err := sandboxPath(sandboxID, "/snapshots")
	var snap api.Snapshot
	if err == nil {
		err = s.c.doJSON(ctx, http.MethodPost, p, api.CreateSnapshotRequest{Stop: stop}, &snap)
	}
	if err != nil {
		return nil, wrapf(err, "snapshot sandbox %s", sandboxID)
	}
	return &snap, nil
}

// List returns the snapshots, newest first; of sandbox sandboxID only
// when it is not empty. ListPage reads them a page at a time.
func (s *SnapshotService) List(ctx context.Context, sandboxID string) ([]api.Snapshot, error) {
	l, err := s.ListPage(ctx, ListSnapshotsOptions{SandboxID: sandboxID})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// ListSnapshotsOptions selects snapshots. The zero value selects every
// snapshot, newest first.
type ListSnapshotsOptions struct {
	// SandboxID keeps the snapshots of this sandbox.
	SandboxID string
	// Limit and Cursor ask for one page (Limit 0: every snapshot); the
	// next page's cursor is the list's NextCursor.
	Limit  int
	Cursor string
	// Order is the list's order: "" (the daemon's default for snapshots,
	// newest first), api.OrderAsc oldest first or api.OrderDesc newest
	// first.
	Order api.Order
}

// ListPage returns the snapshots opts selects, newest first unless
// opts.Order says otherwise: one page when opts.Limit is set.
func (s *SnapshotService) ListPage(ctx context.Context, opts ListSnapshotsOptions) (*api.SnapshotList, error) {
	q := pageQuery(opts.Limit, opts.Cursor, opts.Order)
	if opts.SandboxID != "" {
		q.Set("sandbox_id", opts.SandboxID)
	}
	var l api.SnapshotList
	if err := s.c.doJSONQuery(ctx, http.MethodGet, "/snapshots", q, nil, &l); err != nil {
		return nil, wrapf(err, "list snapshots")
	}
	return &l, nil
}

// Get returns snapshot id.
func (s *SnapshotService) Get(ctx context.Context, id string) (*api.Snapshot, error) {
	p, err := snapshotPath(id)
	var snap api.Snapshot
	if err == nil {
		err = s.c.doJSON(ctx, http.MethodGet, p, nil, &snap)
	}
	if err != nil {
		return nil, wrapf(err, "get snapshot %s", id)
	}
	return &snap, nil
}

// Delete removes snapshot id and its files; sandboxes made from it stay.
func (s *SnapshotService) Delete(ctx context.Context, id string) error {
	p, err := snapshotPath(id)
	if err == nil {
		err = s.c.doJSON(ctx, http.MethodDelete, p, nil, nil)
	}
	if err != nil {
		return wrapf(err, "delete snapshot %s", id)
	}
	return nil
}

// Restore makes a new sandbox from snapshot id, running, with ttl (nil:
// the daemon's default) and metadata; the rest is the snapshot's. Its
// Contexts maps each of the snapshot's contexts to its id in the new
// sandbox.
func (s *SnapshotService) Restore(ctx context.Context, id string, ttl *int, metadata map[string]string) (*api.Sandbox, error) {
	if id == "" {
		return nil, invalidf("restore: snapshot id is empty")
	}
	return s.c.Sandbox.Create(ctx, api.CreateSandboxRequest{FromSnapshot: id, TTL: ttl, Metadata: metadata})
}

// ForkSandbox takes a live snapshot of sandbox id, which runs on, and
// makes req.Count sandboxes from it in parallel, running, each with the
// sandbox's contexts under new ids (ForkedSandbox.Contexts). The snapshot
// is kept (ForkResponse.SnapshotID). A count out of range is
// ErrInvalidArgument; a fork past the daemon's capacity makes none.
func (s *SnapshotService) ForkSandbox(ctx context.Context, id string, req api.ForkRequest) (*api.ForkResponse, error) {
	p, err := sandboxPath(id, "/fork")
	var out api.ForkResponse
	if err == nil {
		err = s.c.doJSON(ctx, http.MethodPost, p, req, &out)
	}
	if err != nil {
		return nil, wrapf(err, "fork sandbox %s", id)
	}
	return &out, nil
}

// Fork makes req.Count sandboxes from snapshot id in parallel, as
// ForkSandbox does.
func (s *SnapshotService) Fork(ctx context.Context, id string, req api.ForkRequest) (*api.ForkResponse, error) {
	p, err := snapshotPath(id)
	var out api.ForkResponse
	if err == nil {
		err = s.c.doJSON(ctx, http.MethodPost, p+"/fork", req, &out)
	}
	if err != nil {
		return nil, wrapf(err, "fork snapshot %s", id)
	}
	return &out, nil
}
