package store

import (
	"context"
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
}

// RunFilter selects runs; the zero value selects all.
type RunFilter struct {
	// BatchID selects one submission's runs.
	BatchID string
	// Active selects the runs not ended (queued or running).
	Active bool
	// ByTenant selects the runs of Tenant only ("" is a tenant: the runs
	// submitted without API keys); without it every tenant's.
	ByTenant bool
	Tenant   string
}

// Runs keeps run records.
type Runs interface {
	// CreateRun stores r: ErrAlreadyExists if its id exists.
	CreateRun(ctx context.Context, r *Run) error
	GetRun(ctx context.Context, id string) (*Run, error)
	// ListRunPage returns the page p of the runs f selects, oldest first
	// (ties by id), and the cursor of the next page.
	ListRunPage(ctx context.Context, f RunFilter, p Page) (items []*Run, next string, err error)
	// UpdateRun applies fn to the stored record atomically and stores the
	// result; fn's error aborts the update and is returned.
	UpdateRun(ctx context.Context, id string, fn func(*Run) error) (*Run, error)
	DeleteRun(ctx context.Context, id string) error
}
