-- The LLM proxy's usage per scope (store.LLMUsage), summed over the
-- daemons of the store: per second for the rate limits (kept two
-- minutes), in all for the budgets (kept while used within a day).
CREATE TABLE llm_usage (
	scope text COLLATE "C" NOT NULL,
	sec bigint NOT NULL,
	requests bigint NOT NULL,
	tokens bigint NOT NULL,
	PRIMARY KEY (scope, sec)
);
CREATE INDEX llm_usage_sec ON llm_usage (sec);
CREATE TABLE llm_usage_totals (
	scope text COLLATE "C" PRIMARY KEY,
	tokens bigint NOT NULL,
	used_at timestamptz NOT NULL
);
CREATE INDEX llm_usage_totals_used ON llm_usage_totals (used_at);
