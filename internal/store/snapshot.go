package store

import (
	"context"
	"time"
)

// Snapshot is the record of one snapshot of a sandbox: its processes with
// their memory, its writable files and its spec, saved by the runtime in a
// directory of the daemon's data dir. It outlives the sandbox it was taken
// of (no cascade).
type Snapshot struct {
	// ID is "snap-" and 12 hex digits.
	ID string
	// SandboxID is the sandbox it was taken of, which may be gone.
	SandboxID string
	Image     string
	Template  string
	// TemplateVersion and Env are the sandbox's, as its view shows them,
	// which sandboxes made from the snapshot show too.
	TemplateVersion int
	Env             map[string]string
	// CPU and Memory are the sandbox's, as requested.
	CPU     string
	Memory  string
	Runtime string
	// Status is one of the api.Snapshot* statuses.
	Status string
	// Error says why a failed snapshot failed.
	Error string
	// Stopped: the sandbox was stopped once saved (api's stop), rather
	// than left running.
	Stopped bool
	// SizeBytes is the size of its files on disk.
	SizeBytes int64
	// Tenant is the tenant of the API key that took it; "" without keys.
	Tenant string
	// Spec is the manager's record of how the sandbox was made (JSON),
	// which sandboxes restored from the snapshot start from; opaque here.
	Spec []byte
	// Contexts are the code-interpreter contexts the sandbox had when
	// saved (JSON, the context service's), which sandboxes made from the
	// snapshot get under new ids; opaque here.
	Contexts  []byte
	CreatedAt time.Time
}

// SnapshotFilter selects snapshots; each field that is set must match.
type SnapshotFilter struct {
	SandboxID string
	Tenant    string
}

// Snapshots keeps snapshot records.
type Snapshots interface {
	// CreateSnapshot stores a new snapshot; ErrAlreadyExists if its ID is
	// taken. It rounds s.CreatedAt down to the microseconds a read
	// returns.
	CreateSnapshot(ctx context.Context, s *Snapshot) error
	GetSnapshot(ctx context.Context, id string) (*Snapshot, error)
	// ListSnapshots returns the snapshots f selects, newest CreatedAt
	// first.
	ListSnapshots(ctx context.Context, f SnapshotFilter) ([]*Snapshot, error)
	// ListSnapshotPage returns the page p of the snapshots f selects,
	// oldest first (ties by id) or newest first (p.Desc), and the cursor
	// of the next page ("" after the last).
	ListSnapshotPage(ctx context.Context, f SnapshotFilter, p Page) (items []*Snapshot, next string, err error)
	// UpdateSnapshot applies fn to the stored snapshot atomically and
	// stores the result; fn's error aborts the update and is returned.
	UpdateSnapshot(ctx context.Context, id string, fn func(*Snapshot) error) (*Snapshot, error)
	DeleteSnapshot(ctx context.Context, id string) error
}
