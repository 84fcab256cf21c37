-- 15: which daemon carries each run out, and until when its claim holds
-- unless renewed (store.Run.ClaimedBy, LeaseUntil): several daemons on
-- one PostgreSQL store never run the same run, and a dead daemon's runs
-- are claimed by another once their lease lapsed. Runs from before have
-- no claim: the first daemon to look claims them. lease_until is unix
-- microseconds.
ALTER TABLE runs ADD COLUMN claimed_by TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN lease_until INTEGER;
CREATE INDEX runs_claim ON runs(status, lease_until);
