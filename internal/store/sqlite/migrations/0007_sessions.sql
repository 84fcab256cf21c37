-- 7: sessions (seed 000) as records of their own; a context's session_name
-- is a session. Sandboxes a service made say so (managed_by), so that one
-- no record refers to can be told an orphan. Contexts keep a name and a
-- description (seed 004), and the tenant (API key) that made them.
ALTER TABLE sandboxes ADD COLUMN managed_by TEXT NOT NULL DEFAULT '';
ALTER TABLE contexts ADD COLUMN session_key TEXT NOT NULL DEFAULT '';
ALTER TABLE contexts ADD COLUMN name TEXT NOT NULL DEFAULT '';
ALTER TABLE contexts ADD COLUMN description TEXT NOT NULL DEFAULT '';
ALTER TABLE contexts ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
CREATE TABLE sessions (
	key TEXT PRIMARY KEY,
	id TEXT NOT NULL,
	tenant TEXT NOT NULL DEFAULT '',
	sandbox_id TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,
	owns_sandbox INTEGER NOT NULL DEFAULT 0,
	flavor TEXT NOT NULL DEFAULT '',
	cpu TEXT NOT NULL DEFAULT '',
	memory TEXT NOT NULL DEFAULT '',
	template TEXT NOT NULL DEFAULT '',
	image TEXT NOT NULL DEFAULT '',
	idle_timeout INTEGER NOT NULL DEFAULT 0,
	created_at INTEGER NOT NULL,
	last_used_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL,
	ends_at INTEGER,
	execution_count INTEGER NOT NULL DEFAULT 0,
	error_count INTEGER NOT NULL DEFAULT 0,
	execution_time INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX sessions_tenant ON sessions(tenant, created_at, key);
CREATE INDEX sessions_sandbox ON sessions(sandbox_id);
CREATE INDEX sessions_expires ON sessions(expires_at);
CREATE INDEX contexts_session_key ON contexts(session_key);
CREATE INDEX contexts_tenant ON contexts(tenant, created_at, id);
CREATE INDEX sandboxes_managed ON sandboxes(managed_by, created_at);

-- The sessions contexts named become records (of no tenant: keys did not
-- scope them before), idle for 30 minutes from their last use; the session
-- owns the sandbox its contexts owned.
INSERT INTO sessions (key, id, tenant, sandbox_id, owns_sandbox, cpu, memory, template, image,
	created_at, last_used_at, expires_at, execution_count)
SELECT '/' || c.session_name, c.session_name, '', c.sandbox_id, MAX(c.owns_sandbox), s.cpu, s.memory,
	s.template, s.image, MIN(c.created_at), MAX(c.last_used_at), MAX(c.last_used_at) + 1800000000,
	SUM(c.execution_count)
FROM contexts c JOIN sandboxes s ON s.id = c.sandbox_id
WHERE c.session_name != ''
GROUP BY c.session_name;
UPDATE sandboxes SET managed_by = 'sessions'
	WHERE id IN (SELECT sandbox_id FROM sessions WHERE owns_sandbox = 1);
UPDATE sandboxes SET managed_by = 'contexts'
	WHERE id IN (SELECT sandbox_id FROM contexts WHERE owns_sandbox = 1 AND session_name = '');
UPDATE contexts SET session_key = '/' || session_name, owns_sandbox = 0 WHERE session_name != '';
