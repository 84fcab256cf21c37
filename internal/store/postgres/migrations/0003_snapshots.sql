-- Snapshots of sandboxes (store.Snapshot), which outlive the sandbox they
-- were taken of: no reference to sandboxes. Twin of the sqlite store's
-- 0016.
CREATE TABLE snapshots (
	id text COLLATE "C" PRIMARY KEY,
	sandbox_id text COLLATE "C" NOT NULL,
	image text NOT NULL,
	template text NOT NULL DEFAULT '',
	cpu text NOT NULL DEFAULT '',
	memory text NOT NULL DEFAULT '',
	runtime text NOT NULL DEFAULT '',
	status text NOT NULL,
	error text NOT NULL DEFAULT '',
	stopped boolean NOT NULL DEFAULT false,
	size_bytes bigint NOT NULL DEFAULT 0,
	tenant text COLLATE "C" NOT NULL DEFAULT '',
	spec bytea NOT NULL DEFAULT '',
	created_at timestamptz NOT NULL
);
CREATE INDEX snapshots_sandbox ON snapshots (sandbox_id);
CREATE INDEX snapshots_tenant ON snapshots (tenant, created_at);
