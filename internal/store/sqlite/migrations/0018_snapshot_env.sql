-- 18: the template version and environment of a snapshot's sandbox
-- (store.Snapshot.TemplateVersion, Env: JSON, null for none), which the
-- sandboxes made from it show.
ALTER TABLE snapshots ADD COLUMN template_version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE snapshots ADD COLUMN env TEXT NOT NULL DEFAULT 'null';
