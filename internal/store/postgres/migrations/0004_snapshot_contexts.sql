-- The contexts a snapshot's sandbox had when it was saved (JSON, the
-- service's; store.Snapshot.Contexts). Twin of the sqlite store's 0017.
ALTER TABLE snapshots ADD COLUMN contexts bytea NOT NULL DEFAULT '';
