package store

import (
	"context"
	"time"
)

// Session is the record of a session (seed 000): a sandbox that requests
// name by an id of the client's choosing, with its live kernels (contexts
// whose SessionKey is the session's Key), kept while it is used.
type Session struct {
	// Key identifies the record: SessionKey(Tenant, ID).
	Key string
	// ID is the session id clients use.
	ID string
	// Tenant is the API key the session belongs to ("" without keys): a
	// session is reachable only with the key that made it.
	Tenant    string
	SandboxID string
	// OwnsSandbox says the sandbox was made for the session and goes with
	// it.
	OwnsSandbox bool
	Flavor      string
	// CPU and Memory are the sandbox's limits (Kubernetes quantities).
	CPU    string
	Memory string
	// Template or Image is what the sandbox was made from.
	Template string
	Image    string
	// IdleTimeout is how long the session lives unused.
	IdleTimeout time.Duration
	CreatedAt   time.Time
	// LastUsedAt is when the last request in the session finished.
	LastUsedAt time.Time
	// ExpiresAt is the idle deadline: the session ends then unless it is
	// used or kept alive.
	ExpiresAt time.Time
	// EndsAt is the end of the session's maximum lifetime; nil for none.
	EndsAt *time.Time
	// ExecutionCount and ErrorCount count the executions in the session
	// and those that failed; ExecutionTime is their total duration.
	ExecutionCount int
	ErrorCount     int
	ExecutionTime  time.Duration
}

// SessionKey returns the key of tenant's session id. Tenants never contain
// '/', so keys of different tenants never collide.
func SessionKey(tenant, id string) string { return tenant + "/" + id }

// SessionFilter selects sessions; the zero value selects those of tenant "".
type SessionFilter struct {
	// Tenant selects one tenant's sessions, unless AllTenants is set.
	Tenant     string
	AllTenants bool
	// WithOwned adds to Tenant's the sessions made by the code of the
	// sandboxes Tenant made (tenant auth.SandboxTenant of each) and by the
	// agents of the runs Tenant submitted (auth.RunTenant).
	WithOwned bool
	// DueBy, when set, selects the sessions whose idle deadline or
	// maximum lifetime has passed by then.
	DueBy time.Time
}

// Sessions keeps session records. A session's record goes with its
// sandbox's (store cascade).
type Sessions interface {
	// CreateSession stores s: ErrAlreadyExists if its key exists,
	// ErrNotFound if its sandbox does not.
	CreateSession(ctx context.Context, s *Session) error
	GetSession(ctx context.Context, key string) (*Session, error)
	// ListSessions returns the sessions f selects, oldest first.
	ListSessions(ctx context.Context, f SessionFilter) ([]*Session, error)
	// ListSessionPage returns the page p of the sessions f selects,
	// oldest first (ties by key) or newest first (p.Desc), and the cursor
	// of the next page ("" after the last).
	ListSessionPage(ctx context.Context, f SessionFilter, p Page) (items []*Session, next string, err error)
	// CountSessions counts every session.
	CountSessions(ctx context.Context) (int, error)
	UpdateSession(ctx context.Context, key string, fn func(*Session) error) (*Session, error)
	DeleteSession(ctx context.Context, key string) error
	// ReapableSandboxes returns the sandboxes a service made (ManagedBy
	// set) that no warm pool holds and that are not pending, of which
	// either no session, no context and no active run refers to them and they were made
	// before orphanBefore, or they failed before failedBefore; oldest
	// first.
	ReapableSandboxes(ctx context.Context, orphanBefore, failedBefore time.Time) ([]*Sandbox, error)
}
