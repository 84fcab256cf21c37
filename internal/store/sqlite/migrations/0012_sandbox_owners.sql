-- 12: who made each sandbox. owner is the id of the sandbox whose code
-- asked for it through the daemon's own services (a session or context
-- made over its MCP server), '' for every other; the manager counts a
-- sandbox's owned ones against its limits and deletes them with it.
-- tenant is the tenant (auth.Tenant) of the API key that asked, inherited
-- from the owner for owned ones ('' without keys): the key that made a
-- sandbox lists what its code made (tenant 'sandbox:<id>').
ALTER TABLE sandboxes ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE sandboxes ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
CREATE INDEX sandboxes_owner ON sandboxes(owner) WHERE owner != '';
CREATE INDEX sandboxes_tenant ON sandboxes(tenant);
