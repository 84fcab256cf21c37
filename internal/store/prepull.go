package store

import (
	"context"
	"time"
)

// Prepull is the record of one image prepull task.
type Prepull struct {
	// ID is "pp-" and 8 hex digits.
	ID string
	// Image is the reference as the client gave it (trimmed), not
	// normalized: LiteBoxd clients match tasks to images by that string.
	Image string
	// Template is the template the task was started for, or "".
	Template string
	// Status is one of the api.Prepull* statuses.
	Status string
	// Ready and Total are the task's progress (api.PrepullProgress).
	Ready, Total int
	// Error says why a failed task failed.
	Error     string
	StartedAt time.Time
	// CompletedAt is set once the task is completed or failed.
	CompletedAt *time.Time
}

// PrepullFilter selects prepull tasks; each field that is set must match
// exactly.
type PrepullFilter struct {
	Image  string
	Status string
}

// Prepulls keeps image prepull tasks.
type Prepulls interface {
	// CreatePrepull stores a new task; ErrAlreadyExists if its ID is taken.
	CreatePrepull(ctx context.Context, p *Prepull) error
	GetPrepull(ctx context.Context, id string) (*Prepull, error)
	// ListPrepulls returns the tasks f selects, newest StartedAt first.
	ListPrepulls(ctx context.Context, f PrepullFilter) ([]*Prepull, error)
	// UpdatePrepull applies fn to the stored task atomically and stores
	// the result; fn's error aborts the update and is returned.
	UpdatePrepull(ctx context.Context, id string, fn func(*Prepull) error) (*Prepull, error)
	DeletePrepull(ctx context.Context, id string) error
}
