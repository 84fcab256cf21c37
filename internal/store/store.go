// Package store defines the daemon's persistent state: the records it keeps
// and the Store interface every backend implements (sqlite embedded by
// default, postgres for a database several daemons may share). Backends
// live in subpackages and must pass the conformance suite in package
// storetest.
//
// The records are sandboxes, templates and their versions, prepull tasks,
// code-interpreter contexts, sessions, task runs, and the LLM archive's
// index and per-run keys; a record that refers to a sandbox goes with it
// (cascade). Lists that clients page through are ordered by creation time
// then id, oldest first or (Page.Desc) newest first, and a Page's cursor
// (Cursor) is the place of the last item returned, so pages neither skip
// nor repeat items while records come and go. Counts (SandboxCounts, CreateSandboxLimited's) are the backend's,
// taken without reading the records.
package store

import (
	"context"
	"time"
)

// Sandbox is the record of one sandbox.
type Sandbox struct {
	ID              string
	Image           string
	Template        string
	TemplateVersion int
	// CPU and Memory are as requested (Kubernetes quantities).
	CPU    string
	Memory string
	// TTL in seconds; 0 means the sandbox never expires.
	TTL       int
	Env       map[string]string
	Status    string
	Reason    string
	Runtime   string
	CreatedAt time.Time
	UpdatedAt time.Time
	// ExpiresAt is nil when TTL is 0.
	ExpiresAt *time.Time
	// AccessToken grants access to the sandbox's ports through the gateway.
	AccessToken string
	// Spec is the manager's own record of how the sandbox was made (JSON),
	// so that it can be started again; the store keeps it opaque.
	Spec []byte
	// Pool names the warm pool the sandbox waits in, until a request
	// claims it; empty for every sandbox a client asked for.
	Pool string
	// ManagedBy names the service that made the sandbox for its own
	// records ("contexts", "sessions"), which must refer to it: one that
	// none does is an orphan. Empty for sandboxes clients asked for.
	ManagedBy string
	// Owner is the id of the sandbox whose code asked for this one through
	// the daemon's services (a session or context it made over MCP): it is
	// counted against that sandbox's limits and goes with it. Empty for
	// every other sandbox.
	Owner string
	// Tenant is the tenant (auth.Tenant) of the API key that asked for the
	// sandbox, its owner's for an owned one; "" without keys.
	Tenant string
	// Metadata is its client's labels (the OpenSandbox API's metadata);
	// nil or empty when it has none.
	Metadata map[string]string
}

// Event is one entry of a sandbox's history: a status change with its
// reason, or a notable occurrence.
type Event struct {
	SandboxID string
	At        time.Time
	Status    string
	Message   string
}

// Store keeps the daemon's records. Implementations are safe for
// concurrent use. Errors are errdefs classes: ErrNotFound for unknown ids,
// ErrAlreadyExists for duplicate ones.
type Store interface {
	Sandboxes
	Templates
	Prepulls
	Contexts
	Sessions
	LLMExchanges
	Runs
	Snapshots
	Close() error
}

// SandboxFilter selects sandboxes; the zero value selects all.
type SandboxFilter struct {
	// ExcludePooled leaves out the sandboxes waiting in warm pools.
	ExcludePooled bool
	// Pool, when set, selects the sandboxes waiting in that warm pool.
	Pool string
	// Owner, when set, selects the sandboxes that sandbox owns.
	Owner string
	// Statuses, when not empty, selects the sandboxes in one of them.
	Statuses []string
	// Metadata selects the sandboxes whose metadata holds every one of
	// its keys with its value.
	Metadata map[string]string
}

// SandboxCounts is how many sandboxes there are, counted by the store
// without reading them.
type SandboxCounts struct {
	// ByStatus counts the sandboxes clients asked for (not those waiting
	// in warm pools) by status; a status no sandbox has is absent.
	ByStatus map[string]int
	// Pooled counts the sandboxes waiting in warm pools.
	Pooled int
}

// SandboxLimits is what admission counts of a sandbox: its status and
// the cpu and memory it was made with, as its record has them.
type SandboxLimits struct {
	ID, Status, CPU, Memory string
}

// ReadSandboxLimits reads the rows of a query of id, status, cpu and memory,
// in that order, from either backend's driver.
func ReadSandboxLimits(rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}) ([]SandboxLimits, error) {
	var out []SandboxLimits
	for rows.Next() {
		var l SandboxLimits
		if err := rows.Scan(&l.ID, &l.Status, &l.CPU, &l.Memory); err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// Sandboxes keeps sandbox records and their event history. Each write of
// a record takes the events that record it (evs), appended to its history
// in the same transaction, whatever their own SandboxID: the change and
// its events are stored together or not at all, in one round trip to the
// database.
type Sandboxes interface {
	CreateSandbox(ctx context.Context, sb *Sandbox, evs ...Event) error
	// CreateSandboxLimited stores sb unless limit sandboxes (warm pools'
	// included) already exist: then it returns a *LimitError. Counting
	// and storing are one atomic step, so concurrent calls never exceed
	// limit. A limit <= 0 is no limit.
	CreateSandboxLimited(ctx context.Context, sb *Sandbox, limit int, evs ...Event) error
	GetSandbox(ctx context.Context, id string) (*Sandbox, error)
	// ListSandboxes returns every sandbox, oldest first.
	ListSandboxes(ctx context.Context) ([]*Sandbox, error)
	// ListSandboxPage returns the page p of the sandboxes f selects,
	// oldest first (ties by id) or newest first (p.Desc), and the cursor
	// of the next page ("" after the last).
	ListSandboxPage(ctx context.Context, f SandboxFilter, p Page) (items []*Sandbox, next string, err error)
	// CountSandboxes counts the sandboxes f selects.
	CountSandboxes(ctx context.Context, f SandboxFilter) (int, error)
	// CountSandboxesByStatus counts the sandboxes by status.
	CountSandboxesByStatus(ctx context.Context) (SandboxCounts, error)
	// ListSandboxLimits returns the status and limits of every sandbox,
	// warm pools' included, in no order, without reading the rest of the
	// records: admission reads it on every create.
	ListSandboxLimits(ctx context.Context) ([]SandboxLimits, error)
	// UpdateSandbox applies fn to the stored record atomically and stores
	// the result; fn's error aborts the update, evs included, and is
	// returned.
	UpdateSandbox(ctx context.Context, id string, fn func(*Sandbox) error, evs ...Event) (*Sandbox, error)
	// DeleteSandbox removes the record and its events.
	DeleteSandbox(ctx context.Context, id string) error

	// AddEvent appends ev, an occurrence that changes no record, to its
	// sandbox's history.
	AddEvent(ctx context.Context, ev Event) error
	// Events returns a sandbox's events, oldest first: its newest
	// MaxEvents, and how many older ones were dropped to keep that bound.
	Events(ctx context.Context, sandboxID string) (evs []Event, dropped int, err error)
}
