-- 5: code-interpreter contexts, and warm-pool membership of sandboxes.
ALTER TABLE sandboxes ADD COLUMN pool TEXT NOT NULL DEFAULT '';
CREATE TABLE contexts (
	id TEXT PRIMARY KEY,
	sandbox_id TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,
	language TEXT NOT NULL,
	type TEXT NOT NULL,
	session_name TEXT NOT NULL DEFAULT '',
	working_dir TEXT NOT NULL DEFAULT '',
	env TEXT NOT NULL DEFAULT '{}',
	owns_sandbox INTEGER NOT NULL DEFAULT 0,
	created_at INTEGER NOT NULL,
	last_used_at INTEGER NOT NULL,
	execution_count INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX contexts_sandbox ON contexts(sandbox_id);
CREATE INDEX contexts_session ON contexts(session_name);
