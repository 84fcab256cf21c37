-- 4: a sandbox's access token for the port gateway (returned on every
-- read, as LiteBoxd does) and what it was started with.
ALTER TABLE sandboxes ADD COLUMN access_token TEXT NOT NULL DEFAULT '';
ALTER TABLE sandboxes ADD COLUMN spec TEXT NOT NULL DEFAULT '';
