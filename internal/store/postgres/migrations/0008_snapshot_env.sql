-- The template version and environment of a snapshot's sandbox
-- (store.Snapshot.TemplateVersion, Env). Twin of the sqlite store's 0018.
ALTER TABLE snapshots ADD COLUMN template_version integer NOT NULL DEFAULT 0;
ALTER TABLE snapshots ADD COLUMN env jsonb NOT NULL DEFAULT 'null';
