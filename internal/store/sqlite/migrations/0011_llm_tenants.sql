-- 11: the LLM archive's index and per-run keys by tenant (the API key that
-- made them, see auth.Tenant; '' for none: made without keys, or a
-- sandbox's own calls), and the order exchanges ended in, by which a
-- follower of the archive resumes: ended is 0 while an exchange is in
-- progress, then a number greater than any given before.
ALTER TABLE llm_exchanges ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
ALTER TABLE llm_exchanges ADD COLUMN ended INTEGER NOT NULL DEFAULT 0;
UPDATE llm_exchanges SET ended = rowid WHERE state != 'in_progress';
CREATE INDEX llm_exchanges_ended ON llm_exchanges(ended) WHERE ended > 0;
CREATE INDEX llm_exchanges_tenant ON llm_exchanges(tenant, created_at, id);
ALTER TABLE llm_keys ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
