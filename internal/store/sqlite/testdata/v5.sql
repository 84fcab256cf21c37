-- The schema of agent2env databases at version 5, exactly as the daemon
-- created it before migrations moved into migrations/*.sql (each statement
-- as that code ran it), with records of every kind. The migration test
-- loads this and opens it with the current code: nothing may be lost.
-- Never edit this file; add a new fixture for a new baseline.
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
CREATE TABLE templates (
		id TEXT PRIMARY KEY,
		name TEXT NOT NULL UNIQUE,
		display_name TEXT NOT NULL DEFAULT '',
		description TEXT NOT NULL DEFAULT '',
		tags TEXT NOT NULL DEFAULT '[]',
		author TEXT NOT NULL DEFAULT '',
		is_public INTEGER NOT NULL DEFAULT 1,
		latest_version INTEGER NOT NULL,
		created_at INTEGER NOT NULL,
		updated_at INTEGER NOT NULL
	);
	CREATE TABLE template_versions (
		id TEXT PRIMARY KEY,
		template_id TEXT NOT NULL REFERENCES templates(id) ON DELETE CASCADE,
		version INTEGER NOT NULL,
		spec TEXT NOT NULL,
		changelog TEXT NOT NULL DEFAULT '',
		created_by TEXT NOT NULL DEFAULT '',
		created_at INTEGER NOT NULL,
		UNIQUE (template_id, version)
	);
CREATE TABLE prepull_tasks (
		id TEXT PRIMARY KEY,
		image TEXT NOT NULL,
		template TEXT NOT NULL DEFAULT '',
		status TEXT NOT NULL,
		ready INTEGER NOT NULL DEFAULT 0,
		total INTEGER NOT NULL DEFAULT 0,
		error TEXT NOT NULL DEFAULT '',
		started_at INTEGER NOT NULL,
		completed_at INTEGER
	);
	CREATE INDEX prepull_image ON prepull_tasks(image, status);
ALTER TABLE sandboxes ADD COLUMN access_token TEXT NOT NULL DEFAULT '';
	ALTER TABLE sandboxes ADD COLUMN spec TEXT NOT NULL DEFAULT '';
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
PRAGMA user_version = 5;

INSERT INTO sandboxes (id, image, template, template_version, cpu, memory, ttl, env, status, reason, runtime, created_at, updated_at, expires_at, access_token, spec, pool) VALUES
	('sbold1', 'agent2env/python', '', 0, '1', '1Gi', 3600, '{"A":"1"}', 'running', 'agent ready', 'oci', 1700000000000000, 1700000001000000, 1700003600000000, 'tok1', '', ''),
	('sbold2', 'agent2env/node', 'web', 2, '500m', '512Mi', 0, '{}', 'failed', 'start sandbox: boom', 'oci', 1700000002000000, 1700000003000000, NULL, 'tok2', '{"startup":{}}', ''),
	('sbpool', 'agent2env/python', '', 0, '1', '1Gi', 0, 'null', 'running', '', 'oci', 1700000004000000, 1700000004000000, NULL, 'tok3', '', 'python');
INSERT INTO events (sandbox_id, at, status, message) VALUES
	('sbold1', 1700000000000000, 'pending', 'created from image agent2env/python'),
	('sbold1', 1700000001000000, 'running', 'agent ready');
INSERT INTO templates (id, name, display_name, description, tags, author, is_public, latest_version, created_at, updated_at) VALUES
	('tpl-1', 'web', 'Web', 'a web template', '["node"]', 'me', 1, 2, 1700000000000000, 1700000001000000);
INSERT INTO template_versions (id, template_id, version, spec, changelog, created_by, created_at) VALUES
	('tv-1', 'tpl-1', 1, '{"image":"agent2env/node"}', 'first', 'me', 1700000000000000),
	('tv-2', 'tpl-1', 2, '{"image":"agent2env/node","ttl":60}', 'second', 'me', 1700000001000000);
INSERT INTO prepull_tasks (id, image, template, status, ready, total, error, started_at, completed_at) VALUES
	('pp-00000001', 'python:3.12', '', 'completed', 3, 3, '', 1700000000000000, 1700000005000000);
INSERT INTO contexts (id, sandbox_id, language, type, session_name, working_dir, env, owns_sandbox, created_at, last_used_at, execution_count) VALUES
	('ctx-old', 'sbold1', 'python', 'jupyter', 'sess', '/home/user', '{}', 1, 1700000001000000, 1700000002000000, 4);
