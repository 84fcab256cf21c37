-- 13: the tenant (auth.Tenant) of the API key that submitted each run,
-- '' without keys (and for the runs submitted before): a run is seen,
-- cancelled and deleted, and named by a per-run LLM key, only by its
-- tenant's requests; the daemon's own lookups (the runner, the LLM
-- proxy's run of a sandbox) see every run.
ALTER TABLE runs ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
CREATE INDEX runs_tenant ON runs(tenant, created_at, id);
