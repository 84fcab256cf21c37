-- How many of a sandbox's oldest events were dropped to keep its history
-- to store.MaxEvents (1000); no row: none. The histories longer than
-- that, which grew without bound before, are cut to it here. Twin of the
-- sqlite store's 0019.
CREATE TABLE event_drops (
	sandbox_id text COLLATE "C" PRIMARY KEY REFERENCES sandboxes (id) ON DELETE CASCADE,
	dropped bigint NOT NULL
);
INSERT INTO event_drops (sandbox_id, dropped)
	SELECT sandbox_id, count(*) - 1000 FROM events GROUP BY sandbox_id HAVING count(*) > 1000;
DELETE FROM events WHERE seq IN (
	SELECT seq FROM (
		SELECT seq, row_number() OVER (PARTITION BY sandbox_id ORDER BY seq DESC) AS newer FROM events
	) AS numbered WHERE newer > 1000);
