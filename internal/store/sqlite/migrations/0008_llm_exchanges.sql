-- 8: the index of the LLM proxy's archive: one row per exchange (its bytes
-- are in the archive's segment files, at locations), and the archive's
-- mark (how far into its log the index is).
CREATE TABLE llm_exchanges (
	id TEXT PRIMARY KEY,
	sandbox_id TEXT NOT NULL DEFAULT '',
	run_id TEXT NOT NULL DEFAULT '',
	key_id TEXT NOT NULL DEFAULT '',
	inbound TEXT NOT NULL DEFAULT '',
	method TEXT NOT NULL DEFAULT '',
	path TEXT NOT NULL DEFAULT '',
	model TEXT NOT NULL DEFAULT '',
	provider TEXT NOT NULL DEFAULT '',
	upstream_model TEXT NOT NULL DEFAULT '',
	stream INTEGER NOT NULL DEFAULT 0,
	passthrough INTEGER NOT NULL DEFAULT 0,
	status INTEGER NOT NULL DEFAULT 0,
	state TEXT NOT NULL,
	error TEXT NOT NULL DEFAULT '',
	input_tokens INTEGER NOT NULL DEFAULT 0,
	output_tokens INTEGER NOT NULL DEFAULT 0,
	cached_tokens INTEGER NOT NULL DEFAULT 0,
	reasoning_tokens INTEGER NOT NULL DEFAULT 0,
	attempts INTEGER NOT NULL DEFAULT 0,
	first_byte INTEGER NOT NULL DEFAULT 0,
	duration INTEGER NOT NULL DEFAULT 0,
	created_at INTEGER NOT NULL,
	request_bytes INTEGER NOT NULL DEFAULT 0,
	response_bytes INTEGER NOT NULL DEFAULT 0,
	stored_bytes INTEGER NOT NULL DEFAULT 0,
	segment INTEGER NOT NULL,
	locations BLOB,
	msg_count INTEGER NOT NULL DEFAULT 0,
	msg_hash TEXT NOT NULL DEFAULT '',
	conversation TEXT NOT NULL DEFAULT ''
);
CREATE INDEX llm_exchanges_created ON llm_exchanges(created_at, id);
CREATE INDEX llm_exchanges_sandbox ON llm_exchanges(sandbox_id, created_at, id);
CREATE INDEX llm_exchanges_run ON llm_exchanges(run_id, created_at, id) WHERE run_id != '';
CREATE INDEX llm_exchanges_hash ON llm_exchanges(sandbox_id, run_id, msg_hash) WHERE msg_hash != '';
CREATE INDEX llm_exchanges_segment ON llm_exchanges(segment);
CREATE INDEX llm_exchanges_state ON llm_exchanges(state, created_at, id);
CREATE TABLE llm_archive (
	id INTEGER PRIMARY KEY CHECK (id = 1),
	mark TEXT NOT NULL
);
