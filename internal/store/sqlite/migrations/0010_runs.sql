-- 10: task runs (package run). A run outlives its sandbox (the runner
-- deletes the sandbox once the artifacts are out), so sandbox_id is a
-- plain column, not a reference. result is the runner's JSON.
CREATE TABLE runs (
	id TEXT PRIMARY KEY,
	batch_id TEXT NOT NULL,
	task TEXT NOT NULL,
	spec TEXT NOT NULL DEFAULT '',
	agent TEXT NOT NULL,
	model TEXT NOT NULL DEFAULT '',
	repeat INTEGER NOT NULL DEFAULT 0,
	status TEXT NOT NULL,
	phase TEXT NOT NULL DEFAULT '',
	reason TEXT NOT NULL DEFAULT '',
	exit_code INTEGER,
	sandbox_id TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	started_at INTEGER,
	ended_at INTEGER,
	result TEXT NOT NULL DEFAULT ''
);
CREATE INDEX runs_created ON runs(created_at, id);
CREATE INDEX runs_batch ON runs(batch_id, created_at, id);
CREATE INDEX runs_status ON runs(status);
CREATE INDEX runs_sandbox ON runs(sandbox_id);
