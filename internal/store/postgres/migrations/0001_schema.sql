-- 1: the records of the SQLite store's schema version 14, in PostgreSQL's
-- terms, with the same tables, columns and indexes. Times are timestamptz
-- (PostgreSQL keeps microseconds, as the SQLite store does); durations are
-- bigint microseconds; JSON the store looks into (metadata, tags) and small
-- maps are jsonb; what the store keeps opaque (specs, results, locations)
-- is bytea. Ids, keys, names and tenants collate "C" (byte order), so that
-- lists order ties, and cursors compare, as the SQLite store's do whatever
-- the database's locale.

CREATE TABLE sandboxes (
	id text COLLATE "C" PRIMARY KEY,
	image text NOT NULL,
	template text NOT NULL DEFAULT '',
	template_version integer NOT NULL DEFAULT 0,
	cpu text NOT NULL,
	memory text NOT NULL,
	ttl integer NOT NULL,
	env jsonb NOT NULL DEFAULT '{}',
	status text NOT NULL,
	reason text NOT NULL DEFAULT '',
	runtime text NOT NULL,
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL,
	expires_at timestamptz,
	access_token text NOT NULL DEFAULT '',
	spec bytea NOT NULL DEFAULT '',
	pool text NOT NULL DEFAULT '',
	managed_by text NOT NULL DEFAULT '',
	owner text COLLATE "C" NOT NULL DEFAULT '',
	tenant text COLLATE "C" NOT NULL DEFAULT '',
	metadata jsonb NOT NULL DEFAULT '{}'
);
-- Lists in creation order (all, or the clients' without the warm pools'),
-- counts by status, the reaper's managed sandboxes, a sandbox's owned ones,
-- a tenant's, and the metadata filter (jsonb containment, @>).
CREATE INDEX sandboxes_created ON sandboxes (created_at, id);
CREATE INDEX sandboxes_pool_created ON sandboxes (pool, created_at, id);
CREATE INDEX sandboxes_status ON sandboxes (status, pool);
CREATE INDEX sandboxes_managed ON sandboxes (managed_by, created_at);
CREATE INDEX sandboxes_owner ON sandboxes (owner) WHERE owner <> '';
CREATE INDEX sandboxes_tenant ON sandboxes (tenant);
CREATE INDEX sandboxes_metadata ON sandboxes USING gin (metadata jsonb_path_ops);

CREATE TABLE events (
	seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	sandbox_id text COLLATE "C" NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
	at timestamptz NOT NULL,
	status text NOT NULL,
	message text NOT NULL
);
CREATE INDEX events_sandbox ON events (sandbox_id, seq);

-- Templates and their versions; spec is the JSON of api.TemplateSpec.
CREATE TABLE templates (
	id text COLLATE "C" PRIMARY KEY,
	name text COLLATE "C" NOT NULL CONSTRAINT templates_name_unique UNIQUE,
	display_name text COLLATE "C" NOT NULL DEFAULT '',
	description text COLLATE "C" NOT NULL DEFAULT '',
	tags jsonb NOT NULL DEFAULT '[]',
	author text NOT NULL DEFAULT '',
	is_public boolean NOT NULL DEFAULT true,
	latest_version integer NOT NULL,
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL
);
CREATE TABLE template_versions (
	id text COLLATE "C" PRIMARY KEY,
	template_id text COLLATE "C" NOT NULL REFERENCES templates (id) ON DELETE CASCADE,
	version integer NOT NULL,
	spec jsonb NOT NULL,
	changelog text NOT NULL DEFAULT '',
	created_by text NOT NULL DEFAULT '',
	created_at timestamptz NOT NULL,
	UNIQUE (template_id, version)
);

CREATE TABLE prepull_tasks (
	id text COLLATE "C" PRIMARY KEY,
	image text NOT NULL,
	template text NOT NULL DEFAULT '',
	status text NOT NULL,
	ready integer NOT NULL DEFAULT 0,
	total integer NOT NULL DEFAULT 0,
	error text NOT NULL DEFAULT '',
	started_at timestamptz NOT NULL,
	completed_at timestamptz
);
CREATE INDEX prepull_image ON prepull_tasks (image, status);

-- Code-interpreter contexts; a context in a session names it by
-- session_key.
CREATE TABLE contexts (
	id text COLLATE "C" PRIMARY KEY,
	sandbox_id text COLLATE "C" NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
	language text NOT NULL,
	type text NOT NULL,
	session_name text NOT NULL DEFAULT '',
	working_dir text NOT NULL DEFAULT '',
	env jsonb NOT NULL DEFAULT '{}',
	owns_sandbox boolean NOT NULL DEFAULT false,
	created_at timestamptz NOT NULL,
	last_used_at timestamptz NOT NULL,
	execution_count integer NOT NULL DEFAULT 0,
	session_key text COLLATE "C" NOT NULL DEFAULT '',
	name text NOT NULL DEFAULT '',
	description text NOT NULL DEFAULT '',
	tenant text COLLATE "C" NOT NULL DEFAULT ''
);
CREATE INDEX contexts_sandbox ON contexts (sandbox_id);
CREATE INDEX contexts_session ON contexts (session_name);
CREATE INDEX contexts_created ON contexts (created_at, id);
CREATE INDEX contexts_session_key ON contexts (session_key);
CREATE INDEX contexts_tenant ON contexts (tenant, created_at, id);

-- Sessions; idle_timeout and execution_time are microseconds.
CREATE TABLE sessions (
	key text COLLATE "C" PRIMARY KEY,
	id text NOT NULL,
	tenant text COLLATE "C" NOT NULL DEFAULT '',
	sandbox_id text COLLATE "C" NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
	owns_sandbox boolean NOT NULL DEFAULT false,
	flavor text NOT NULL DEFAULT '',
	cpu text NOT NULL DEFAULT '',
	memory text NOT NULL DEFAULT '',
	template text NOT NULL DEFAULT '',
	image text NOT NULL DEFAULT '',
	idle_timeout bigint NOT NULL DEFAULT 0,
	created_at timestamptz NOT NULL,
	last_used_at timestamptz NOT NULL,
	expires_at timestamptz NOT NULL,
	ends_at timestamptz,
	execution_count integer NOT NULL DEFAULT 0,
	error_count integer NOT NULL DEFAULT 0,
	execution_time bigint NOT NULL DEFAULT 0
);
CREATE INDEX sessions_tenant ON sessions (tenant, created_at, key);
CREATE INDEX sessions_sandbox ON sessions (sandbox_id);
CREATE INDEX sessions_expires ON sessions (expires_at);
CREATE INDEX sessions_ends ON sessions (ends_at) WHERE ends_at IS NOT NULL;

-- The index of the LLM proxy's archive (the bytes are in its segment
-- files, at locations; first_byte and duration are microseconds), and the
-- archive's mark. ended orders the exchanges by when they were stored
-- ended: 0 while in progress.
CREATE TABLE llm_exchanges (
	id text COLLATE "C" PRIMARY KEY,
	sandbox_id text COLLATE "C" NOT NULL DEFAULT '',
	run_id text COLLATE "C" NOT NULL DEFAULT '',
	key_id text NOT NULL DEFAULT '',
	inbound text NOT NULL DEFAULT '',
	method text NOT NULL DEFAULT '',
	path text NOT NULL DEFAULT '',
	model text NOT NULL DEFAULT '',
	provider text NOT NULL DEFAULT '',
	upstream_model text NOT NULL DEFAULT '',
	stream boolean NOT NULL DEFAULT false,
	passthrough boolean NOT NULL DEFAULT false,
	status integer NOT NULL DEFAULT 0,
	state text NOT NULL,
	error text NOT NULL DEFAULT '',
	input_tokens integer NOT NULL DEFAULT 0,
	output_tokens integer NOT NULL DEFAULT 0,
	cached_tokens integer NOT NULL DEFAULT 0,
	reasoning_tokens integer NOT NULL DEFAULT 0,
	attempts integer NOT NULL DEFAULT 0,
	first_byte bigint NOT NULL DEFAULT 0,
	duration bigint NOT NULL DEFAULT 0,
	created_at timestamptz NOT NULL,
	request_bytes bigint NOT NULL DEFAULT 0,
	response_bytes bigint NOT NULL DEFAULT 0,
	stored_bytes bigint NOT NULL DEFAULT 0,
	segment bigint NOT NULL,
	locations bytea,
	msg_count integer NOT NULL DEFAULT 0,
	msg_hash text NOT NULL DEFAULT '',
	conversation text COLLATE "C" NOT NULL DEFAULT '',
	tenant text COLLATE "C" NOT NULL DEFAULT '',
	ended bigint NOT NULL DEFAULT 0
);
CREATE INDEX llm_exchanges_created ON llm_exchanges (created_at, id);
CREATE INDEX llm_exchanges_sandbox ON llm_exchanges (sandbox_id, created_at, id);
CREATE INDEX llm_exchanges_run ON llm_exchanges (run_id, created_at, id) WHERE run_id <> '';
CREATE INDEX llm_exchanges_hash ON llm_exchanges (sandbox_id, run_id, msg_hash) WHERE msg_hash <> '';
CREATE INDEX llm_exchanges_segment ON llm_exchanges (segment);
CREATE INDEX llm_exchanges_state ON llm_exchanges (state, created_at, id);
CREATE INDEX llm_exchanges_ended ON llm_exchanges (ended) WHERE ended > 0;
CREATE INDEX llm_exchanges_tenant ON llm_exchanges (tenant, created_at, id);
CREATE TABLE llm_archive (
	id integer PRIMARY KEY CHECK (id = 1),
	mark text NOT NULL
);

-- Per-run keys of the LLM proxy: hash is the SHA-256 (hex) of the secret,
-- which is never stored.
CREATE TABLE llm_keys (
	id text COLLATE "C" PRIMARY KEY,
	hash text NOT NULL UNIQUE,
	name text NOT NULL DEFAULT '',
	sandbox text NOT NULL DEFAULT '',
	run text NOT NULL DEFAULT '',
	budget_tokens bigint NOT NULL DEFAULT 0,
	requests_per_minute integer NOT NULL DEFAULT 0,
	tokens_per_minute integer NOT NULL DEFAULT 0,
	used_tokens bigint NOT NULL DEFAULT 0,
	created_at timestamptz NOT NULL,
	expires_at timestamptz NOT NULL,
	revoked_at timestamptz,
	tenant text COLLATE "C" NOT NULL DEFAULT ''
);
CREATE INDEX llm_keys_created ON llm_keys (created_at);

-- Task runs. A run outlives its sandbox, so sandbox_id is a plain column;
-- spec and result are the runner's JSON, kept opaque.
CREATE TABLE runs (
	id text COLLATE "C" PRIMARY KEY,
	batch_id text COLLATE "C" NOT NULL,
	task text NOT NULL,
	spec bytea NOT NULL DEFAULT '',
	agent text NOT NULL,
	model text NOT NULL DEFAULT '',
	repeat integer NOT NULL DEFAULT 0,
	status text NOT NULL,
	phase text NOT NULL DEFAULT '',
	reason text NOT NULL DEFAULT '',
	exit_code integer,
	sandbox_id text COLLATE "C" NOT NULL DEFAULT '',
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL,
	started_at timestamptz,
	ended_at timestamptz,
	result bytea NOT NULL DEFAULT '',
	tenant text COLLATE "C" NOT NULL DEFAULT ''
);
CREATE INDEX runs_created ON runs (created_at, id);
CREATE INDEX runs_batch ON runs (batch_id, created_at, id);
CREATE INDEX runs_status ON runs (status);
CREATE INDEX runs_sandbox ON runs (sandbox_id);
CREATE INDEX runs_tenant ON runs (tenant, created_at, id);
