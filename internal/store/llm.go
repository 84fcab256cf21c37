package store

import (
	"context"
	"time"
)

// The states of an LLM exchange.
const (
	// LLMInProgress: the exchange began and has not ended (yet).
	LLMInProgress = "in_progress"
	// LLMComplete: the exchange ended with the client still there.
	LLMComplete = "complete"
	// LLMClientGone: the client left before the end; the record holds
	// everything up to then.
	LLMClientGone = "client_gone"
	// LLMInterrupted: the daemon stopped (or was killed) before the
	// exchange ended; found so when the archive was next opened.
	LLMInterrupted = "interrupted"
)

// LLMExchange is the index record of one exchange through the LLM proxy:
// its metadata, and where the archive keeps its bytes.
type LLMExchange struct {
	ID string
	// SandboxID, RunID and KeyID say who called; empty when unknown.
	SandboxID string
	RunID     string
	KeyID     string
	// Tenant is the tenant (auth.Tenant) the exchange belongs to: that of
	// the API key or per-run key it was made with, or of the task run
	// whose sandbox made it; "" for the calls of other sandboxes, and for
	// every call while the daemon has no API keys.
	Tenant string
	// Inbound is the client's wire format; Method and Path (with query)
	// the request's.
	Inbound string
	Method  string
	Path    string
	// Model is what the client asked for; Provider and UpstreamModel who
	// answered, after fallbacks.
	Model         string
	Provider      string
	UpstreamModel string
	Stream        bool
	Passthrough   bool
	// Status is the HTTP status the client got (0: none).
	Status          int
	State           string
	Error           string
	InputTokens     int
	OutputTokens    int
	CachedTokens    int
	ReasoningTokens int
	Attempts        int
	// FirstByte is the time to the first byte sent to the client.
	FirstByte time.Duration
	Duration  time.Duration
	CreatedAt time.Time
	// RequestBytes and ResponseBytes are the client's request and
	// response body sizes; StoredBytes what the archive wrote for the
	// exchange (compressed).
	RequestBytes  int64
	ResponseBytes int64
	StoredBytes   int64
	// Segment is the archive segment of the exchange's first record;
	// Locations, opaque to the store, where all of them are.
	Segment   int64
	Locations []byte
	// MsgCount and MsgHash describe the messages of the request;
	// PrefixHashes (not stored) are the hashes of its shorter prefixes,
	// longest first, by which Put finds the conversation it continues.
	MsgCount     int
	MsgHash      string
	PrefixHashes []string
	// Conversation is the id of the conversation's first exchange.
	Conversation string
	// Ended, set by the store, orders the exchanges by when they were
	// stored ended: 0 while in progress, then greater than that of every
	// exchange stored ended before; it does not change after.
	Ended int64
}

// LLMExchangeFilter selects exchanges; the zero value selects all.
type LLMExchangeFilter struct {
	SandboxID    string
	RunID        string
	Model        string
	Conversation string
	State        string
	// StatusMin and StatusMax bound the status (inclusive) when not zero.
	StatusMin, StatusMax int
	// Since and Until bound the creation time: Since <= t < Until.
	Since, Until time.Time
	// ByTenant selects the exchanges of Tenant and those of no tenant
	// (the calls of a sandbox that is no task run's, which every key reaches
	// as it reaches sandboxes).
	ByTenant bool
	Tenant   string
}

// LLMExchanges keeps the index of the LLM proxy's archive.
type LLMExchanges interface {
	// PutLLMExchanges stores xs (replacing records of the same ids) and
	// the archive's mark, in one transaction. An exchange with MsgHash
	// and no Conversation joins the conversation of the newest stored
	// exchange of the same sandbox and run whose MsgHash is one of its
	// PrefixHashes (the longest that matches), or starts its own.
	PutLLMExchanges(ctx context.Context, xs []*LLMExchange, mark string) error
	// LLMArchiveMark is the mark last put ("" at first).
	LLMArchiveMark(ctx context.Context) (string, error)
	GetLLMExchange(ctx context.Context, id string) (*LLMExchange, error)
	// ListLLMExchangePage returns the page p of the exchanges f selects,
	// oldest first (ties by id) or newest first (p.Desc), and the next
	// page's cursor.
	ListLLMExchangePage(ctx context.Context, f LLMExchangeFilter, p Page) (items []*LLMExchange, next string, err error)
	// ListEndedLLMExchanges returns, in the order they ended, up to limit
	// of the exchanges f selects whose Ended is greater than after.
	ListEndedLLMExchanges(ctx context.Context, f LLMExchangeFilter, after int64, limit int) ([]*LLMExchange, error)
	// LLMEndedMark returns the Ended of the exchange f selects that ended
	// skip exchanges (of those f selects) before the last one; 0 when f
	// selects no more than skip.
	LLMEndedMark(ctx context.Context, f LLMExchangeFilter, skip int) (int64, error)
	// LLMTokens returns the input and output tokens of the exchanges f
	// selects, summed: what a sandbox or run has used, whatever the
	// daemon remembers.
	LLMTokens(ctx context.Context, f LLMExchangeFilter) (int64, error)
	// DeleteLLMExchanges deletes the exchanges whose Segment is below
	// segment and returns how many.
	DeleteLLMExchanges(ctx context.Context, segment int64) (int, error)
}

// LLMBodies keeps the records of the LLM proxy's ended exchanges where
// every daemon of a shared store reads them: a store several daemons
// share (PostgreSQL) implements it; one daemon's store (SQLite) does not,
// its archive's log files being the records.
type LLMBodies interface {
	// PutLLMBody stores the records of exchange id, created at created
	// (replacing those stored before).
	PutLLMBody(ctx context.Context, id string, created time.Time, records []byte) error
	// LLMBody returns the records of exchange id; ErrNotFound if there
	// are none.
	LLMBody(ctx context.Context, id string) ([]byte, error)
	// UnindexedLLMBodies returns, by id, up to limit records stored more
	// than age ago whose exchange the index lacks or has in progress:
	// their daemon stopped after they were stored, before it indexed
	// their end.
	UnindexedLLMBodies(ctx context.Context, age time.Duration, limit int) (map[string][]byte, error)
	// DeleteLLMArchived deletes the exchanges (index and records) created
	// before before, then the oldest while the records stored total more
	// than maxSize (0: no bound), and returns how many.
	DeleteLLMArchived(ctx context.Context, before time.Time, maxSize int64) (int, error)
}

// LLMUsageCount is what the LLM proxy's callers of one scope ("key/…",
// "sandbox/…", "run/…") used in one second (Unix), or added to it.
type LLMUsageCount struct {
	Scope    string
	Sec      int64
	Requests int64
	Tokens   int64
}

// LLMUsage is the LLM proxy's usage per scope shared by the daemons of a
// store (PostgreSQL), so that rate limits and budgets hold across them:
// each daemon adds what its callers used, and reads back the sums.
type LLMUsage interface {
	// AddLLMUsage adds counts to the stored ones of their scope and
	// second, and their tokens to their scope's total.
	AddLLMUsage(ctx context.Context, counts []LLMUsageCount) error
	// LLMUsageOf returns, of each of scopes, the stored counts of the
	// seconds after since, and its total tokens.
	LLMUsageOf(ctx context.Context, scopes []string, since int64) (counts []LLMUsageCount, totals map[string]int64, err error)
}
