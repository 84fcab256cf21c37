-- Leases on keys (KeyLeases): a lock among the daemons of the store that
-- holds no connection, renewed by its holder until it lets go and taken
-- over by another once until has passed (its holder died).
CREATE TABLE key_leases (
	space text COLLATE "C" NOT NULL,
	key text COLLATE "C" NOT NULL,
	holder text NOT NULL,
	until timestamptz NOT NULL,
	PRIMARY KEY (space, key)
);
