package store

import (
	"context"
	"time"
)

// Context is the record of a code-interpreter context: a kernel in a
// sandbox's agent, whose id is the context id.
type Context struct {
	ID          string
	SandboxID   string
	Language    string
	Type        string
	SessionName string
	// SessionKey is the key of the session record the context is in
	// (store.SessionKey), empty when it is in none.
	SessionKey string
	// Tenant is the API key that made the context (see auth.Tenant).
	Tenant string
	// Name and Description are the client's labels (seed 004).
	Name        string
	Description string
	WorkingDir  string
	Env         map[string]string
	// OwnsSandbox says the sandbox was made for this context, and goes
	// with the last context in it.
	OwnsSandbox    bool
	CreatedAt      time.Time
	LastUsedAt     time.Time
	ExecutionCount int
}

// ContextFilter selects contexts; empty fields match all.
type ContextFilter struct {
	SessionName string
	SessionKey  string
	SandboxID   string
	Language    string
	// ByTenant selects the contexts of Tenant only.
	ByTenant bool
	Tenant   string
	// WithOwned adds to Tenant's the contexts made by the code of the
	// sandboxes Tenant made (tenant auth.SandboxTenant of each) and by the
	// agents of the runs Tenant submitted (auth.RunTenant).
	WithOwned bool
	// IdleSince, when set, selects the contexts in no session last used
	// before it.
	IdleSince time.Time
}

// Contexts keeps context records. A context's record goes with its
// sandbox's.
type Contexts interface {
	// CreateContext stores c; ErrNotFound if its sandbox does not exist.
	CreateContext(ctx context.Context, c *Context) error
	GetContext(ctx context.Context, id string) (*Context, error)
	// ListContexts returns the contexts f selects, oldest first.
	ListContexts(ctx context.Context, f ContextFilter) ([]*Context, error)
	// ListContextPage returns the page p of the contexts f selects, oldest
	// first (ties by id) or newest first (p.Desc), and the cursor of the
	// next page ("" after the last).
	ListContextPage(ctx context.Context, f ContextFilter, p Page) (items []*Context, next string, err error)
	// CountContexts counts the contexts f selects.
	CountContexts(ctx context.Context, f ContextFilter) (int, error)
	UpdateContext(ctx context.Context, id string, fn func(*Context) error) (*Context, error)
	// CountContextExecution adds one to context id's ExecutionCount and
	// sets its LastUsedAt to at, in one statement (every execution does
	// it: one round trip to a server), and returns the new count;
	// ErrNotFound if there is none.
	CountContextExecution(ctx context.Context, id string, at time.Time) (int, error)
	DeleteContext(ctx context.Context, id string) error
}
