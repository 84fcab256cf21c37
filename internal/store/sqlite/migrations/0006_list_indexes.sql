-- 6: indexes for lists in creation order (all sandboxes, or those not in
-- a warm pool) and for counting sandboxes by status without reading them.
CREATE INDEX sandboxes_created ON sandboxes(created_at, id);
CREATE INDEX sandboxes_pool_created ON sandboxes(pool, created_at, id);
CREATE INDEX sandboxes_status ON sandboxes(status, pool);
CREATE INDEX contexts_created ON contexts(created_at, id);
