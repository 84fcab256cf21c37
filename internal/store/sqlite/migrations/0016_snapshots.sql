-- 16: snapshots of sandboxes (store.Snapshot), which outlive the sandbox
-- they were taken of: no reference to sandboxes. created_at is unix
-- microseconds.
CREATE TABLE snapshots (
	id TEXT PRIMARY KEY,
	sandbox_id TEXT NOT NULL,
	image TEXT NOT NULL,
	template TEXT NOT NULL DEFAULT '',
	cpu TEXT NOT NULL DEFAULT '',
	memory TEXT NOT NULL DEFAULT '',
	runtime TEXT NOT NULL DEFAULT '',
	status TEXT NOT NULL,
	error TEXT NOT NULL DEFAULT '',
	stopped INTEGER NOT NULL DEFAULT 0,
	size_bytes INTEGER NOT NULL DEFAULT 0,
	tenant TEXT NOT NULL DEFAULT '',
	spec TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL
);
CREATE INDEX snapshots_sandbox ON snapshots(sandbox_id);
CREATE INDEX snapshots_tenant ON snapshots(tenant, created_at);
