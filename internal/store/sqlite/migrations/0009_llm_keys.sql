-- 9: per-run keys of the LLM proxy. The secret is never stored: hash is
-- its SHA-256 (hex). used_tokens is flushed from memory every few seconds.
CREATE TABLE llm_keys (
	id TEXT PRIMARY KEY,
	hash TEXT NOT NULL UNIQUE,
	name TEXT NOT NULL DEFAULT '',
	sandbox TEXT NOT NULL DEFAULT '',
	run TEXT NOT NULL DEFAULT '',
	budget_tokens INTEGER NOT NULL DEFAULT 0,
	requests_per_minute INTEGER NOT NULL DEFAULT 0,
	tokens_per_minute INTEGER NOT NULL DEFAULT 0,
	used_tokens INTEGER NOT NULL DEFAULT 0,
	created_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL,
	revoked_at INTEGER
);
CREATE INDEX llm_keys_created ON llm_keys(created_at);
