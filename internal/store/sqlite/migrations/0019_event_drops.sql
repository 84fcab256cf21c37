-- 19: how many of a sandbox's oldest events were dropped to keep its
-- history to store.MaxEvents (1000); no row: none. The histories longer
-- than that, which grew without bound before, are cut to it here.
CREATE TABLE event_drops (
	sandbox_id TEXT PRIMARY KEY REFERENCES sandboxes(id) ON DELETE CASCADE,
	dropped INTEGER NOT NULL
);
INSERT INTO event_drops (sandbox_id, dropped)
	SELECT sandbox_id, COUNT(*) - 1000 FROM events GROUP BY sandbox_id HAVING COUNT(*) > 1000;
DELETE FROM events WHERE seq IN (
	SELECT seq FROM (
		SELECT seq, ROW_NUMBER() OVER (PARTITION BY sandbox_id ORDER BY seq DESC) AS newer FROM events
	) WHERE newer > 1000);
