package store

import (
	"cmp"
	"context"
	"slices"
	"time"
)

// Run is the record of one task run (package run): what ran, where it is,
// and how it ended. Result is the runner's own record of timings, tokens
// and artifacts (JSON); the store keeps it opaque.
type Run struct {
	ID      string
	BatchID string
	// Task is the task's name; Spec the task as it ran (JSON, overrides
	// applied).
	Task   string
	Spec   []byte
	Agent  string
	Model  string
	Repeat int
	Status string
	Phase  string
	Reason string
	// ExitCode is the agent's; nil until it exited.
	ExitCode *int
	// SandboxID is the sandbox the run made; empty before it has one.
	SandboxID string
	CreatedAt time.Time
	UpdatedAt time.Time
	StartedAt *time.Time
	EndedAt   *time.Time
	Result    []byte
	// Tenant is the tenant of the API key that submitted the run (see
	// auth.Tenant; "" without keys): only its requests see the run.
	Tenant string
	// ClaimedBy names the daemon carrying the run out, and LeaseUntil
	// is when its claim lapses unless renewed (RenewRunLeases): an active
	// run whose claim lapsed, or that has none, is free for any daemon to
	// claim (ClaimRuns). Both stay as they were when the run ends.
	ClaimedBy  string
	LeaseUntil *time.Time
}

// RunClaim is what ClaimRuns claims, and for whom.
type RunClaim struct {
	// Owner is the daemon claiming; Until is when its claims lapse.
	Owner string
	Until time.Time
	// Now is the time a claim must have lapsed before to be taken over;
	// zero takes over no claim, only runs never claimed (and, with Mine,
	// Owner's).
	Now time.Time
	// Mine claims also the active runs Owner holds, lapsed or not: a
	// daemon that restarted under the same name takes its runs back.
	Mine bool
	// Limit bounds how many runs are claimed; 0: all there are.
	Limit int
}

// RunFilter selects runs; the zero value selects all.
type RunFilter struct {
	// BatchID selects one submission's runs.
	BatchID string
	// Active selects the runs not ended (queued or running).
	Active bool
	// Statuses, when not empty, selects the runs in one of them.
	Statuses []string
	// Agents and Models, when not empty, select the runs of one of those
	// agents, and of one of those models.
	Agents, Models []string
	// ByTenant selects the runs of Tenant only ("" is a tenant: the runs
	// submitted without API keys); without it every tenant's.
	ByTenant bool
	Tenant   string
	// EndedBefore, when not zero, selects the runs that ended before it
	// (a record without its end time: last updated before it).
	EndedBefore time.Time
}

// Runs keeps run records.
type Runs interface {
	// CreateRun stores r: ErrAlreadyExists if its id exists.
	CreateRun(ctx context.Context, r *Run) error
	GetRun(ctx context.Context, id string) (*Run, error)
	// ListRunPage returns the page p of the runs f selects, oldest first
	// (ties by id) or newest first (p.Desc), and the cursor of the next
	// page.
	ListRunPage(ctx context.Context, f RunFilter, p Page) (items []*Run, next string, err error)
	// UpdateRun applies fn to the stored record atomically and stores the
	// result; fn's error aborts the update and is returned.
	UpdateRun(ctx context.Context, id string, fn func(*Run) error) (*Run, error)
	DeleteRun(ctx context.Context, id string) error
	// ClaimRuns claims for c.Owner, until c.Until, the active (queued or
	// running) runs whose claim lapsed before c.Now or that have none,
	// and with c.Mine those c.Owner holds; up to c.Limit, oldest first.
	// It returns them as claimed, oldest first. A run another caller
	// is claiming at the same moment is skipped, not waited for: two
	// callers, in any process, never claim the same run.
	ClaimRuns(ctx context.Context, c RunClaim) ([]*Run, error)
	// RenewRunLeases moves to until the lease of every active run owner
	// holds, and returns how many there are.
	RenewRunLeases(ctx context.Context, owner string, until time.Time) (int, error)
}

// SortRuns sorts rs oldest first, ties by id: the order of listings and
// claims.
func SortRuns(rs []*Run) {
	slices.SortFunc(rs, func(a, b *Run) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
}
