-- 14: each sandbox's metadata, a JSON object of strings set by its client
-- (the OpenSandbox API's metadata: set at create, merge-patched, a list
-- filter). '{}' for the sandboxes made before.
ALTER TABLE sandboxes ADD COLUMN metadata TEXT NOT NULL DEFAULT '{}';
