package api

import "time"

// Snapshots (agent2env addition): a running or paused sandbox saved whole,
// its processes with their memory, its writable files and its spec, from
// which new sandboxes are made (CreateSandboxRequest.FromSnapshot). A
// snapshot outlives the sandbox it was taken of and a daemon restart.

// SnapshotStatus is where a snapshot is in its life.
type SnapshotStatus string

// SnapshotReady: saved; sandboxes can be made from it. (A snapshot is
// recorded once saved: a failed save leaves no record.)
const SnapshotReady SnapshotStatus = "ready"

// CreateSnapshotRequest is the body of POST /sandboxes/{id}/snapshots.
type CreateSnapshotRequest struct {
	// Stop stops the sandbox once saved, freeing its memory; by default
	// it is frozen only while saved and runs on (live).
	Stop bool `json:"stop,omitempty"`
}

// Snapshot is a saved sandbox.
type Snapshot struct {
	ID string `json:"id"`
	// SandboxID is the sandbox it was taken of, which may be gone.
	SandboxID string         `json:"sandbox_id"`
	Image     string         `json:"image"`
	Template  string         `json:"template,omitempty"`
	CPU       string         `json:"cpu"`
	Memory    string         `json:"memory"`
	Runtime   string         `json:"runtime"`
	Status    SnapshotStatus `json:"status"`
	// Stopped: the sandbox was stopped once saved.
	Stopped bool `json:"stopped,omitempty"`
	// SizeBytes is what its files take on the daemon's disk.
	SizeBytes int64     `json:"size_bytes"`
	CreatedAt time.Time `json:"created_at"`
}

// SnapshotList is the answer of GET /snapshots, newest first unless
// order=asc asks for oldest first, or one page of it.
type SnapshotList struct {
	Items []Snapshot `json:"items"`
	// NextCursor, given as cursor, asks for the page after this one; it
	// is absent on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// MaxForkCount bounds ForkRequest.Count.
const MaxForkCount = 32

// ForkRequest is the body of POST /sandboxes/{id}/fork (a live snapshot
// of the sandbox, which runs on, then the copies) and POST
// /snapshots/{id}/fork (copies of an existing snapshot).
type ForkRequest struct {
	// Count is how many sandboxes to make, 1 to MaxForkCount.
	Count int `json:"count"`
	// TTL and Metadata are every copy's, as in CreateSandboxRequest.
	TTL      *int              `json:"ttl,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// ForkedSandbox is one sandbox a fork made.
type ForkedSandbox struct {
	Sandbox
	// Contexts maps the id of each code-interpreter context of the
	// snapshot to the id of the same context (its kernel, with its
	// variables) in this sandbox; always present, {} when none (it
	// shadows Sandbox.Contexts, which a fork leaves unset).
	Contexts map[string]string `json:"contexts"`
}

// ForkResponse is the answer of a fork: the snapshot the sandboxes were
// made from (taken by the call for a sandbox's fork, and kept) and the
// sandboxes, running.
type ForkResponse struct {
	SnapshotID string          `json:"snapshot_id"`
	Sandboxes  []ForkedSandbox `json:"sandboxes"`
}
