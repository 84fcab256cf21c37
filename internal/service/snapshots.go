package service

import (
	"context"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/store"
)

// Snapshot saves sandbox id whole (see manager.Manager.Snapshot): live by
// default, stopped once saved with req.Stop.
func (s *Sandboxes) Snapshot(ctx context.Context, id string, req api.CreateSnapshotRequest) (*api.Snapshot, error) {
	snap, err := s.m.Snapshot(ctx, id, req.Stop)
	if err != nil {
		return nil, err
	}
	return snapshotView(snap), nil
}

// Snapshots lists the snapshots the caller may see, newest first; of
// sandbox sandboxID only, when it is not empty.
func (s *Sandboxes) Snapshots(ctx context.Context, sandboxID string) (*api.SnapshotList, error) {
	list, err := s.m.ListSnapshots(ctx, sandboxID)
	if err != nil {
		return nil, err
	}
	out := &api.SnapshotList{Items: make([]api.Snapshot, 0, len(list))}
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

// DeleteSnapshot removes snapshot id and its files.
func (s *Sandboxes) DeleteSnapshot(ctx context.Context, id string) error {
	return s.m.DeleteSnapshot(ctx, id)
}

// restore makes the sandbox req asks for from its snapshot (FromSnapshot):
// the request may give its TTL and metadata, nothing else.
func (s *Sandboxes) restore(ctx context.Context, req api.CreateSandboxRequest) (*api.Sandbox, error) {
	if req.Image != "" || req.Template != "" || req.CPU != "" || req.Memory != "" || len(req.Env) > 0 ||
		req.Overrides != nil || req.Network != nil || req.TemplateVersion != 0 {
		return nil, errdefs.Invalid("from_snapshot: a sandbox made from a snapshot has the snapshot's image, resources, environment and network; give only ttl and metadata")
	}
	return s.viewOf(s.m.Restore(ctx, req.FromSnapshot, manager.RestoreRequest{TTL: req.TTL, Metadata: req.Metadata}))
}

// snapshotView is snap as the API shows it.
func snapshotView(snap *store.Snapshot) *api.Snapshot {
	return &api.Snapshot{ID: snap.ID, SandboxID: snap.SandboxID, Image: snap.Image, Template: snap.Template,
		CPU: snap.CPU, Memory: snap.Memory, Runtime: snap.Runtime, Status: api.SnapshotStatus(snap.Status),
		Stopped: snap.Stopped, SizeBytes: snap.SizeBytes, CreatedAt: snap.CreatedAt}
}
