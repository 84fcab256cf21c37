-- 2: templates and their versions (spec is the JSON of api.TemplateSpec).
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
