package api

import "time"

// Per-run LLM keys: short-lived keys for callers outside sandboxes (a task
// runner's agent on the host, a CI job) to use the daemon's LLM proxy at
// /llm, scoped to a sandbox and run, with a token budget, rate limits and
// an expiry. The secret is shown once, when the key is made; the daemon
// keeps only its hash.
//
//	POST   /llm/keys        LLMKeyRequest → LLMKey (with Key)
//	GET    /llm/keys        → LLMKeyList
//	DELETE /llm/keys/{id}   → 204 (the key is revoked)

// LLMKeyRequest is the body of POST /llm/keys. Zero limits take the
// daemon's defaults for keys (its LLM configuration's limits.key).
type LLMKeyRequest struct {
	Name string `json:"name,omitempty"`
	// Sandbox and Run are the sandbox and run the key's calls are
	// attributed to (and counted against, for their budgets). Each must
	// exist (404 otherwise); a key's sandbox deleted revokes the key.
	Sandbox           string `json:"sandbox,omitempty"`
	Run               string `json:"run,omitempty"`
	BudgetTokens      int64  `json:"budget_tokens,omitempty"`
	RequestsPerMinute int    `json:"requests_per_minute,omitempty"`
	TokensPerMinute   int    `json:"tokens_per_minute,omitempty"`
	// ExpiresIn is the key's lifetime in seconds; default 3600, at most
	// 30 days.
	ExpiresIn int `json:"expires_in,omitempty"`
}

// LLMKey is a per-run LLM key.
type LLMKey struct {
	ID string `json:"id"`
	// Key is the secret, present only in the answer to its creation.
	Key               string     `json:"key,omitempty"`
	Name              string     `json:"name,omitempty"`
	Sandbox           string     `json:"sandbox,omitempty"`
	Run               string     `json:"run,omitempty"`
	BudgetTokens      int64      `json:"budget_tokens,omitempty"`
	RequestsPerMinute int        `json:"requests_per_minute,omitempty"`
	TokensPerMinute   int        `json:"tokens_per_minute,omitempty"`
	UsedTokens        int64      `json:"used_tokens"`
	CreatedAt         time.Time  `json:"created_at"`
	ExpiresAt         time.Time  `json:"expires_at"`
	RevokedAt         *time.Time `json:"revoked_at,omitempty"`
}

// LLMKeyList is the answer to GET /llm/keys, newest first.
type LLMKeyList struct {
	Items []LLMKey `json:"items"`
	// NextCursor, given as cursor, asks for the page after this one; it
	// is absent on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
}
