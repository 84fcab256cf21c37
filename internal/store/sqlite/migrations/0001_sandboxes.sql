-- 1: sandboxes and their events.
CREATE TABLE sandboxes (
	id TEXT PRIMARY KEY,
	image TEXT NOT NULL,
	template TEXT NOT NULL DEFAULT '',
	template_version INTEGER NOT NULL DEFAULT 0,
	cpu TEXT NOT NULL,
	memory TEXT NOT NULL,
	ttl INTEGER NOT NULL,
	env TEXT NOT NULL DEFAULT '{}',
	status TEXT NOT NULL,
	reason TEXT NOT NULL DEFAULT '',
	runtime TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	expires_at INTEGER
);
CREATE TABLE events (
	seq INTEGER PRIMARY KEY AUTOINCREMENT,
	sandbox_id TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,
	at INTEGER NOT NULL,
	status TEXT NOT NULL,
	message TEXT NOT NULL
);
CREATE INDEX events_sandbox ON events(sandbox_id, seq);
