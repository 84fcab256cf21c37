-- The records of the LLM proxy's ended exchanges (store.LLMBodies), as
-- the archive's log keeps them (zstd above 1 KiB), so that every daemon
-- of the store reads every exchange and none is lost with its daemon.
-- Only this store has them: a SQLite store is one daemon's, whose log
-- files are the records. EXTERNAL: TOAST keeps them out of line without
-- compressing what is compressed already.
CREATE TABLE llm_bodies (
	id text COLLATE "C" PRIMARY KEY,
	created_at timestamptz NOT NULL,
	stored_at timestamptz NOT NULL DEFAULT now(),
	size bigint NOT NULL,
	records bytea NOT NULL
);
ALTER TABLE llm_bodies ALTER COLUMN records SET STORAGE EXTERNAL;
CREATE INDEX llm_bodies_created ON llm_bodies (created_at);
CREATE INDEX llm_bodies_stored ON llm_bodies (stored_at);
