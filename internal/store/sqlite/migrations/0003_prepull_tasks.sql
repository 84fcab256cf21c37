-- 3: image prepull tasks.
CREATE TABLE prepull_tasks (
	id TEXT PRIMARY KEY,
	image TEXT NOT NULL,
	template TEXT NOT NULL DEFAULT '',
	status TEXT NOT NULL,
	ready INTEGER NOT NULL DEFAULT 0,
	total INTEGER NOT NULL DEFAULT 0,
	error TEXT NOT NULL DEFAULT '',
	started_at INTEGER NOT NULL,
	completed_at INTEGER
);
CREATE INDEX prepull_image ON prepull_tasks(image, status);
