-- Which daemon carries each run out, and until when its claim holds
-- unless renewed (store.Run.ClaimedBy, LeaseUntil): daemons sharing the
-- store never run the same run (ClaimRuns takes rows FOR UPDATE SKIP
-- LOCKED), and a dead daemon's runs are claimed by another once their
-- lease lapsed. Twin of the sqlite store's 0015.
ALTER TABLE runs ADD COLUMN claimed_by text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN lease_until timestamptz;
CREATE INDEX runs_claim ON runs (status, lease_until);
