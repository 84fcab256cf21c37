package postgres

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
			s.Stopped, s.SizeBytes, s.Tenant, bytesOrEmpty(s.Spec), bytesOrEmpty(s.Contexts), s.CreatedAt}, nil
	},
	setKey: func(s *store.Snapshot, id string) { s.ID = id },
})

func scanSnapshot(row scanner) (*store.Snapshot, error) {
	var (
		s   store.Snapshot
		env []byte
	)
	if err := row.Scan(&s.ID, &s.SandboxID, &s.Image, &s.Template, &s.TemplateVersion, &env, &s.CPU, &s.Memory, &s.Runtime, &s.Status, &s.Error,
		&s.Stopped, &s.SizeBytes, &s.Tenant, &s.Spec, &s.Contexts, &s.CreatedAt); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(env, &s.Env); err != nil {
		return nil, fmt.Errorf("decode env of snapshot %s: %w", s.ID, err)
	}
	s.Spec, s.Contexts, s.CreatedAt = nilIfEmpty(s.Spec), nilIfEmpty(s.Contexts), s.CreatedAt.UTC()
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
	return snapshots.get(ctx, s.r, id, "")
}

// ListSnapshots returns the snapshots f selects, newest first.
func (s *Store) ListSnapshots(ctx context.Context, f store.SnapshotFilter) ([]*store.Snapshot, error) {
	out, _, err := s.ListSnapshotPage(ctx, f, store.Page{Desc: true})
	return out, err
}

// ListSnapshotPage returns the page p of the snapshots f selects, oldest
// first or newest first (p.Desc), and the cursor of the next page.
func (s *Store) ListSnapshotPage(ctx context.Context, f store.SnapshotFilter, p store.Page) ([]*store.Snapshot, string, error) {
	var a args
	pcond, order, err := pageClause(p, &a)
	if err != nil {
		return nil, "", err
	}
	cond := ""
	if f.SandboxID != "" {
		cond += ` AND sandbox_id = ` + a.add(f.SandboxID)
	}
	if f.Tenant != "" {
		cond += ` AND tenant = ` + a.add(f.Tenant)
	}
	out, err := list(ctx, s.r, scanSnapshot,
		`SELECT `+snapshots.columns+` FROM snapshots WHERE true`+cond+pcond+order, a...)
	if err != nil {
		return nil, "", fmt.Errorf("list snapshots: %w", err)
	}
	out, next := cutPage(out, p, func(sn *store.Snapshot) (time.Time, string) { return sn.CreatedAt, sn.ID })
	return out, next, nil
}

// UpdateSnapshot applies fn to the snapshot id and stores the result, with
// the row locked from the read to the write; fn's error aborts it and is returned as is.
func (s *Store) UpdateSnapshot(ctx context.Context, id string, fn func(*store.Snapshot) error) (*store.Snapshot, error) {
	return snapshots.update(ctx, s.w, id, fn)
}

// DeleteSnapshot deletes the snapshot id; ErrNotFound if there is none.
func (s *Store) DeleteSnapshot(ctx context.Context, id string) error {
	return snapshots.remove(ctx, s.w, id)
}
