package service

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/contexts"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/store"
)

// Snapshot saves sandbox id whole (see manager.Manager.Snapshot): live by
// default, stopped once saved with req.Stop. The snapshot records the
// sandbox's contexts, which the sandboxes made from it get.
func (s *Sandboxes) Snapshot(ctx context.Context, id string, req api.CreateSnapshotRequest) (*api.Snapshot, error) {
	held, err := s.heldContexts(ctx, id)
	if err != nil {
		return nil, err
	}
	snap, err := s.m.Snapshot(ctx, id, manager.SnapshotRequest{Stop: req.Stop, Contexts: held})
	if err != nil {
		return nil, err
	}
	return snapshotView(snap), nil
}

// IsSnapshotID reports whether id has the form of a snapshot's id, for
// the surfaces whose one field names a template or a snapshot (E2B's
// templateID).
func IsSnapshotID(id string) bool { return manager.IsSnapshotID(id) }

// Snapshots lists the snapshots the caller may see, newest first; of
// sandbox sandboxID only, when it is not empty.
func (s *Sandboxes) Snapshots(ctx context.Context, sandboxID string) (*api.SnapshotList, error) {
	return s.SnapshotPage(ctx, sandboxID, nil, "", api.OrderDesc)
}

// SnapshotPage is Snapshots' page that limit (nil: every snapshot),
// cursor ("": the first page) and order ask for, with the cursor of the
// next page. The order "" is api.OrderDesc, newest first, as the list
// always was. Values Page does not take, or a cursor this server did not
// give, are ErrInvalidArgument naming their parameter.
func (s *Sandboxes) SnapshotPage(ctx context.Context, sandboxID string, limit *int, cursor string, order api.Order) (*api.SnapshotList, error) {
	p, err := Page(limit, cursor, cmp.Or(order, api.OrderDesc))
	if err != nil {
		return nil, err
	}
	list, next, err := s.m.ListSnapshotPage(ctx, sandboxID, p)
	if err != nil {
		return nil, err
	}
	out := &api.SnapshotList{Items: make([]api.Snapshot, 0, len(list)), NextCursor: next}
	for _, snap := range list {
		out.Items = append(out.Items, *snapshotView(snap))
	}
	return out, nil
}

// GetSnapshot returns snapshot id.
func (s *Sandboxes) GetSnapshot(ctx context.Context, id string) (*api.Snapshot, error) {
	snap, err := s.m.GetSnapshot(ctx, id)
	if err != nil {
		return nil, err
	}
	return snapshotView(snap), nil
}

// SnapshotsOfImage returns the ids of the snapshots, of every tenant,
// whose restores need image ref's layers (WithPins).
func (s *Sandboxes) SnapshotsOfImage(ctx context.Context, ref string) ([]string, error) {
	return s.m.SnapshotsOfImage(ctx, ref)
}

// DeleteSnapshot removes snapshot id and its files.
func (s *Sandboxes) DeleteSnapshot(ctx context.Context, id string) error {
	return s.m.DeleteSnapshot(ctx, id)
}

// restore makes the sandbox req asks for from its snapshot (FromSnapshot):
// the request may give its TTL and metadata, nothing else. The sandbox has
// the snapshot's contexts under new ids, which it returns (Contexts).
func (s *Sandboxes) restore(ctx context.Context, req api.CreateSandboxRequest) (*api.Sandbox, error) {
	if req.Image != "" || req.Template != "" || req.CPU != "" || req.Memory != "" || len(req.Env) > 0 ||
		req.Overrides != nil || req.Network != nil || req.TemplateVersion != 0 {
		return nil, errdefs.Invalid("from_snapshot: a sandbox made from a snapshot has the snapshot's image, resources, environment and network; give only ttl and metadata")
	}
	out, err := s.forkSnapshot(ctx, req.FromSnapshot, api.ForkRequest{Count: 1, TTL: req.TTL, Metadata: req.Metadata})
	if err != nil {
		return nil, err
	}
	sb := out.Sandboxes[0].Sandbox
	if len(out.Sandboxes[0].Contexts) > 0 {
		sb.Contexts = out.Sandboxes[0].Contexts
	}
	return &sb, nil
}

// Fork takes a live snapshot of sandbox id, which runs on, and makes
// req.Count sandboxes from it in parallel, each with the sandbox's
// contexts under new ids (see manager.Manager.ForkSandbox).
func (s *Sandboxes) Fork(ctx context.Context, id string, req api.ForkRequest) (*api.ForkResponse, error) {
	if err := checkFork(req); err != nil {
		return nil, err
	}
	held, err := s.heldContexts(ctx, id)
	if err != nil {
		return nil, err
	}
	reqs, maps, err := forkRequests(req, held)
	if err != nil {
		return nil, err
	}
	snap, sbs, err := s.m.ForkSandbox(ctx, id, held, reqs)
	if err != nil {
		return nil, err
	}
	out, err := s.forked(ctx, snap, held, sbs, maps)
	if err != nil {
		// The fork failed: the snapshot it took, which its caller never
		// learns of, goes with its copies.
		return nil, errors.Join(err, s.m.DeleteSnapshot(context.WithoutCancel(ctx), snap.ID))
	}
	return out, nil
}

// ForkSnapshot makes req.Count sandboxes from snapshot id in parallel
// (see manager.Manager.Fork), each with the snapshot's contexts under new
// ids.
func (s *Sandboxes) ForkSnapshot(ctx context.Context, id string, req api.ForkRequest) (*api.ForkResponse, error) {
	if err := checkFork(req); err != nil {
		return nil, err
	}
	return s.forkSnapshot(ctx, id, req)
}

func (s *Sandboxes) forkSnapshot(ctx context.Context, id string, req api.ForkRequest) (*api.ForkResponse, error) {
	snap, err := s.m.GetSnapshot(ctx, id)
	if err != nil {
		return nil, err
	}
	reqs, maps, err := forkRequests(req, snap.Contexts)
	if err != nil {
		return nil, err
	}
	sbs, err := s.m.Fork(ctx, id, reqs)
	if err != nil {
		return nil, err
	}
	return s.forked(ctx, snap, snap.Contexts, sbs, maps)
}

func checkFork(req api.ForkRequest) error {
	if req.Count < 1 || req.Count > api.MaxForkCount {
		return errdefs.Invalid("count must be 1 to %d, not %d", api.MaxForkCount, req.Count)
	}
	return nil
}

// heldContext is what a snapshot records of one of its sandbox's
// contexts (store.Snapshot.Contexts holds a JSON list of them).
type heldContext struct {
	ID          string            `json:"id"`
	Language    string            `json:"language"`
	Type        string            `json:"type"`
	Name        string            `json:"name,omitempty"`
	Description string            `json:"description,omitempty"`
	WorkingDir  string            `json:"working_dir,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	// Tenant is who made it, and so who reaches it (store.Context's
	// Tenant): the copies keep it (heldTenant). Absent in snapshots
	// recorded before it was kept.
	Tenant *string `json:"tenant,omitempty"`
}

// heldTenant is the tenant of held context h in sandbox id, made from a
// snapshot of sandbox source by ctx's tenant: the context's own, as in
// the source (one made without an API key, as E2B's code interpreter
// makes its default context, stays reachable without one), except that
// what the source's code made is the copy's code's; ctx's tenant when
// the snapshot did not record it.
func heldTenant(ctx context.Context, h heldContext, source, id string) string {
	switch {
	case h.Tenant == nil:
		return auth.TenantOf(ctx)
	case *h.Tenant == auth.SandboxTenant(source):
		return auth.SandboxTenant(id)
	}
	return *h.Tenant
}

// heldContexts returns the contexts of sandbox id, as a snapshot records
// them; nil when there are none or no records are kept.
func (s *Sandboxes) heldContexts(ctx context.Context, id string) ([]byte, error) {
	if s.contexts == nil {
		return nil, nil
	}
	cs, err := s.contexts.ListContexts(ctx, store.ContextFilter{SandboxID: id})
	if err != nil || len(cs) == 0 {
		return nil, err
	}
	held := make([]heldContext, 0, len(cs))
	for _, c := range cs {
		held = append(held, heldContext{ID: c.ID, Language: c.Language, Type: c.Type, Name: c.Name,
			Description: c.Description, WorkingDir: c.WorkingDir, Env: c.Env, Tenant: &c.Tenant})
	}
	return json.Marshal(held)
}

func decodeHeld(b []byte) ([]heldContext, error) {
	var held []heldContext
	if len(b) == 0 {
		return nil, nil
	}
	if err := json.Unmarshal(b, &held); err != nil {
		return nil, fmt.Errorf("the snapshot's contexts: %w", err)
	}
	return held, nil
}

// forkRequests returns the manager's request of each copy req asks for,
// and each copy's new id of every held context.
func forkRequests(req api.ForkRequest, heldJSON []byte) ([]manager.RestoreRequest, []map[string]string, error) {
	held, err := decodeHeld(heldJSON)
	if err != nil {
		return nil, nil, err
	}
	reqs := make([]manager.RestoreRequest, req.Count)
	maps := make([]map[string]string, req.Count)
	for i := range reqs {
		maps[i] = make(map[string]string, len(held))
		for _, h := range held {
			maps[i][h.ID] = contexts.NewID()
		}
		reqs[i] = manager.RestoreRequest{TTL: req.TTL, Metadata: req.Metadata, Kernels: maps[i]}
	}
	return reqs, maps, nil
}

// forked records the contexts of the sandboxes a fork made and returns
// the answer; when a record fails, or ctx has ended (the caller is gone
// and would never learn of them), the sandboxes are deleted.
func (s *Sandboxes) forked(ctx context.Context, snap *store.Snapshot, heldJSON []byte, sbs []*store.Sandbox, maps []map[string]string) (*api.ForkResponse, error) {
	held, err := decodeHeld(heldJSON)
	out := &api.ForkResponse{SnapshotID: snap.ID, Sandboxes: make([]api.ForkedSandbox, len(sbs))}
	for i, sb := range sbs {
		if err == nil {
			err = s.recordContexts(ctx, snap.SandboxID, sb.ID, held, maps[i])
		}
		out.Sandboxes[i] = api.ForkedSandbox{Sandbox: *s.view(sb), Contexts: maps[i]}
	}
	what := "record the contexts of sandboxes made from snapshot " + snap.ID
	if err == nil && ctx.Err() != nil {
		err, what = ctx.Err(), "make sandboxes from snapshot "+snap.ID
	}
	if err != nil {
		for _, sb := range sbs {
			err = errors.Join(err, s.m.Delete(context.WithoutCancel(ctx), sb.ID))
		}
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// recordContexts records the held contexts of sandbox source in sandbox
// id under their new ids, each with its tenant (heldTenant).
func (s *Sandboxes) recordContexts(ctx context.Context, source, id string, held []heldContext, ids map[string]string) error {
	now := time.Now().UTC()
	for _, h := range held {
		c := &store.Context{ID: ids[h.ID], SandboxID: id, Language: h.Language, Type: h.Type, Tenant: heldTenant(ctx, h, source, id),
			Name: h.Name, Description: h.Description, WorkingDir: h.WorkingDir, Env: h.Env, CreatedAt: now, LastUsedAt: now}
		if err := s.contexts.CreateContext(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

// snapshotView is snap as the API shows it.
func snapshotView(snap *store.Snapshot) *api.Snapshot {
	return &api.Snapshot{ID: snap.ID, SandboxID: snap.SandboxID, Image: snap.Image, Template: snap.Template,
		CPU: snap.CPU, Memory: snap.Memory, Runtime: snap.Runtime, Status: api.SnapshotStatus(snap.Status),
		Stopped: snap.Stopped, SizeBytes: snap.SizeBytes, CreatedAt: snap.CreatedAt}
}
