-- The extension's tables and sequences, with their rights and what pg_dump
-- dumps: install script only (an upgrade creates a table its release adds
-- from a file of its own, as registry.sql).

-- High-water marks that outlive rows, written only by the guard with the
-- extension owner's rights.  A key is named by the SHA-256 hash of its
-- columns' binary images (src/catalog/keys.cpp), under the relation that held the
-- row and each of its partition ancestors.  Dumped by pg_dump.
CREATE TABLE fencing.deleted_keys (
	relid regclass NOT NULL,
	key bytea NOT NULL CHECK (pg_catalog.length(key) = 32),
	token bigint NOT NULL CHECK (token > 0),
	deleted_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	PRIMARY KEY (relid, key)
);
SELECT pg_catalog.pg_extension_config_dump('fencing.deleted_keys', '');
REVOKE ALL ON fencing.deleted_keys FROM PUBLIC;
COMMENT ON TABLE fencing.deleted_keys IS
'deleted-key marks: a key deleted under a token cannot be inserted again under an older one';

CREATE TABLE fencing.floors (
	relid regclass PRIMARY KEY,
	token bigint NOT NULL CHECK (token > 0),
	compacted bigint NOT NULL DEFAULT 0 CHECK (compacted <= token),
	raised_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
SELECT pg_catalog.pg_extension_config_dump('fencing.floors', '');
REVOKE ALL ON fencing.floors FROM PUBLIC;
COMMENT ON TABLE fencing.floors IS
'table floors: no new key below token (TRUNCATE, DETACH, compact()), no write at all below compacted (compact())';

-- PostgreSQL as the lock manager: leases and resource fences.

-- A bound at or above every token handed out, for every resource: the tokens
-- themselves (generation, then the clock in milliseconds: src/state/token_issue.cpp) are
-- handed out below it.  A sequence, because it does not roll back with the
-- transaction that set it: a token is never issued twice.  Not dumped: a
-- database restored from a dump starts a new history, and its tokens go above
-- the dumped ones by their generation (fencing.token_timelines).
CREATE SEQUENCE fencing.token_seq;
SELECT pg_catalog.setval('fencing.token_seq',
                         (pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) * 1000000)::bigint);
REVOKE ALL ON SEQUENCE fencing.token_seq FROM PUBLIC;
COMMENT ON SEQUENCE fencing.token_seq IS
'a bound at or above every fencing token handed out, for every resource';

-- One row per resource: its current (or last) lease.
CREATE TABLE fencing.resources (
	resource text PRIMARY KEY CHECK (resource <> ''),
	holder text,
	token bigint,
	granted_at timestamptz,
	expires_at timestamptz,
	released boolean NOT NULL DEFAULT false,
	grace_until timestamptz,
	epoch bigint
);
COMMENT ON COLUMN fencing.resources.grace_until IS
'durable horizon: expiry + fencing.lease_grace at the last flushed grant or renewal; after a restart or promotion a lease not released is held until then';
COMMENT ON COLUMN fencing.resources.epoch IS
'the server epoch (system, timeline, start) of the row''s last flushed grant or renewal';
SELECT pg_catalog.pg_extension_config_dump('fencing.resources', '');
REVOKE ALL ON fencing.resources FROM PUBLIC;
COMMENT ON TABLE fencing.resources IS 'lease state, one row per resource; read it through fencing.leases';

-- One row per fenced resource: its high-water mark.  Apart from the leases, so
-- that a transaction holding a fence does not block renew() and acquire().
CREATE TABLE fencing.fences (
	resource text PRIMARY KEY CHECK (resource <> ''),
	token bigint NOT NULL CHECK (token > 0)
);
SELECT pg_catalog.pg_extension_config_dump('fencing.fences', '');
REVOKE ALL ON fencing.fences FROM PUBLIC;
COMMENT ON TABLE fencing.fences IS 'high-water marks of resources fenced with fencing.fence()';

-- The history tokens were last issued on: a key of (system identifier,
-- timeline).  The first grant on another one - after a promotion, a
-- point-in-time restore, a restore from a dump - sets tokens
-- fencing.failover_margin ahead of the server clock and sets this sequence.
-- A sequence, because setting it is neither rolled back nor hidden from other
-- sessions by an open transaction: one margin per history.  Not dumped: a
-- database restored from a dump is a new history too, even in the same
-- cluster.
CREATE SEQUENCE fencing.token_history;
REVOKE ALL ON SEQUENCE fencing.token_history FROM PUBLIC;
COMMENT ON SEQUENCE fencing.token_history IS
'internal: the (system, timeline) tokens were last issued on, as a key';

-- The (system, timeline) pairs on which tokens were issued, with the first
-- token of each and its generation: the timeline plus a base fixed per
-- system, which a system seen for the first time takes one above every
-- generation recorded here.  Dumped, so that a database restored elsewhere
-- issues tokens of a higher generation than the dumped one's.
CREATE TABLE fencing.token_timelines (
	system_identifier bigint NOT NULL,
	timeline integer NOT NULL,
	first_token bigint NOT NULL,
	started_at timestamptz NOT NULL,
	generation bigint NOT NULL,
	PRIMARY KEY (system_identifier, timeline)
);
SELECT pg_catalog.pg_extension_config_dump('fencing.token_timelines', '');
REVOKE ALL ON fencing.token_timelines FROM PUBLIC;
COMMENT ON TABLE fencing.token_timelines IS
'(system identifier, timeline) pairs that issued tokens, with the first token and the generation of each';

CREATE TABLE fencing.resource_floors (
	prefix text PRIMARY KEY,
	token bigint NOT NULL CHECK (token > 0),
	raised_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
SELECT pg_catalog.pg_extension_config_dump('fencing.resource_floors', '');
REVOKE ALL ON fencing.resource_floors FROM PUBLIC;
COMMENT ON TABLE fencing.resource_floors IS
'floors of resources whose name starts with prefix: fence() refuses and acquire() issues no token below them';
