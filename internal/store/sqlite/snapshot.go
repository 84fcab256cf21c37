package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

var snapshots = newTable(table[store.Snapshot]{
	kind: "snapshot", name: "snapshots",
	columns: `id, sandbox_id, image, template, template_version, env, cpu, memory, runtime, status, error, stopped, size_bytes, tenant, spec, contexts, created_at`,
	scan:    scanSnapshot,
	values: func(s *store.Snapshot) ([]any, error) {
		env, err := json.Marshal(s.Env)
		if err != nil {
			return nil, fmt.Errorf("encode env: %w", err)
		}
		return []any{s.ID, s.SandboxID, s.Image, s.Template, s.TemplateVersion, string(env), s.CPU, s.Memory, s.Runtime, s.Status, s.Error,
			s.Stopped, s.SizeBytes, s.Tenant, string(s.Spec), string(s.Contexts), toUnix(s.CreatedAt)}, nil
	},
	setID: func(s *store.Snapshot, id string) { s.ID = id },
})

func scanSnapshot(row scanner) (*store.Snapshot, error) {
	var (
		s       store.Snapshot
		env     string
		spec    string
		ctxs    string
		created int64
	)
	if err := row.Scan(&s.ID, &s.SandboxID, &s.Image, &s.Template, &s.TemplateVersion, &env, &s.CPU, &s.Memory, &s.Runtime, &s.Status, &s.Error,
		&s.Stopped, &s.SizeBytes, &s.Tenant, &spec, &ctxs, &created); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(env), &s.Env); err != nil {
		return nil, fmt.Errorf("decode env of snapshot %s: %w", s.ID, err)
	}
	if spec != "" {
		s.Spec = []byte(spec)
	}
	if ctxs != "" {
		s.Contexts = []byte(ctxs)
	}
	s.CreatedAt = fromUnix(created)
	return &s, nil
}

// CreateSnapshot stores snap; a taken id is ErrConflict.
func (s *Store) CreateSnapshot(ctx context.Context, snap *store.Snapshot) error {
	snap.CreatedAt = snap.CreatedAt.Truncate(time.Microsecond) // what a read returns
	err := snapshots.insert(ctx, s.w, snap)
	switch {
	case err == nil:
		return nil
	case isUnique(err):
		return errdefs.Conflict("snapshot %s already exists", snap.ID)
	}
	return fmt.Errorf("insert snapshot %s: %w", snap.ID, err)
}

// GetSnapshot returns the snapshot id; ErrNotFound if there is none.
func (s *Store) GetSnapshot(ctx context.Context, id string) (*store.Snapshot, error) {
	return snapshots.get(ctx, s.r, id)
}

// ListSnapshots returns the snapshots f selects, newest first.
func (s *Store) ListSnapshots(ctx context.Context, f store.SnapshotFilter) ([]*store.Snapshot, error) {
	out, _, err := s.ListSnapshotPage(ctx, f, store.Page{Desc: true})
	return out, err
}

// ListSnapshotPage returns the page p of the snapshots f selects, oldest
// first or newest first (p.Desc), and the cursor of the next page.
func (s *Store) ListSnapshotPage(ctx context.Context, f store.SnapshotFilter, p store.Page) ([]*store.Snapshot, string, error) {
	pcond, order, pargs, err := pageClause(p)
	if err != nil {
		return nil, "", err
	}
	q := `SELECT ` + snapshots.columns + ` FROM snapshots WHERE 1=1`
	var args []any
	if f.SandboxID != "" {
		q += ` AND sandbox_id = ?`
		args = append(args, f.SandboxID)
	}
	if f.Tenant != "" {
		q += ` AND tenant = ?`
		args = append(args, f.Tenant)
	}
	out, err := list(ctx, s.r, scanSnapshot, q+pcond+order, append(args, pargs...)...)
	if err != nil {
		return nil, "", fmt.Errorf("list snapshots: %w", err)
	}
	out, next := cutPage(out, p, func(sn *store.Snapshot) (time.Time, string) { return sn.CreatedAt, sn.ID })
	return out, next, nil
}

// UpdateSnapshot applies fn to the snapshot id and stores the result, in
// one write transaction; fn's error aborts it and is returned as is.
func (s *Store) UpdateSnapshot(ctx context.Context, id string, fn func(*store.Snapshot) error) (*store.Snapshot, error) {
	return snapshots.update(ctx, s.w, id, fn)
}

// DeleteSnapshot deletes the snapshot id; ErrNotFound if there is none.
func (s *Store) DeleteSnapshot(ctx context.Context, id string) error {
	return snapshots.remove(ctx, s.w, id)
}
