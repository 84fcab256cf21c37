package store

import "time"

// LLMKey is a per-run key of the LLM proxy. Only the SHA-256 of its
// secret is kept (Hash, hex). Limits of zero are the daemon's defaults.
type LLMKey struct {
	ID                string
	Hash              string
	Name              string
	Sandbox           string
	Run               string
	BudgetTokens      int64
	RequestsPerMinute int
	TokensPerMinute   int
	// UsedTokens is what the key's calls have used, as last flushed.
	UsedTokens int64
	CreatedAt  time.Time
	ExpiresAt  time.Time
	RevokedAt  *time.Time
	// Tenant is the tenant (auth.Tenant) of the API key that made the key,
	// "" without keys; the calls made with the key are its.
	Tenant string
}
