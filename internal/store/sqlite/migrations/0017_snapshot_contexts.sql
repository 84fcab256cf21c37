-- 17: the contexts a snapshot's sandbox had when it was saved (JSON, the
-- service's; store.Snapshot.Contexts), which sandboxes made from it get
-- under new ids.
ALTER TABLE snapshots ADD COLUMN contexts TEXT NOT NULL DEFAULT '';
