-- State made with fencing 0.3.0, to survive ALTER EXTENSION fencing UPDATE
-- to the current release: the registry (protected tables, a table
-- unprotected after deletes, one unprotected whose key changed type since,
-- strict mode, a custom token column, a composite key with a collation, a
-- partitioned tree with a detached partition, a table of an ordinary role),
-- marks, TRUNCATE, compact() and compact_in_batches() floors, resource floors
-- (compact_resources() and compact_resources_in_batches()), leases (live,
-- released, expired), fences, token_timelines with their generations.  A
-- copy of every state table is kept in schema "before" for
-- test/upgrade/after_0.3.0.sql to compare with.
CREATE EXTENSION fencing VERSION '0.3.0';

-- Monotonic, int key after a dropped column: rows, deleted keys, a compact() floor.
CREATE TABLE jobs (gone int, id int PRIMARY KEY, state text);
ALTER TABLE jobs DROP COLUMN gone;
SELECT fencing.protect('jobs');
INSERT INTO jobs SELECT g, 'queued', 5 FROM generate_series(1, 6) g;
BEGIN; SET LOCAL fencing.token = 7; DELETE FROM jobs WHERE id IN (1, 2); COMMIT;
BEGIN; SET LOCAL fencing.token = 12; DELETE FROM jobs WHERE id = 6; COMMIT;
UPDATE jobs SET state = 'running', last_fencing_token = 9 WHERE id = 4;
-- Marks below 8 go (keys 1 and 2), the floor is 8: no write below 8 at all.
SELECT fencing.compact('jobs', 8) AS compacted_marks;

-- compact_in_batches(): 30 keys deleted at 20 + id % 3 (20, 21, 22); the
-- floor 22 in batches of 7 takes the marks of 20 and 21, those of 22 stay.
CREATE TABLE tasks (id int PRIMARY KEY, v int);
SELECT fencing.protect('tasks');
INSERT INTO tasks SELECT g, 0, 10 FROM generate_series(1, 40) g;
BEGIN; SET LOCAL fencing.token = 20; DELETE FROM tasks WHERE id <= 30 AND id % 3 = 0; COMMIT;
BEGIN; SET LOCAL fencing.token = 21; DELETE FROM tasks WHERE id <= 30 AND id % 3 = 1; COMMIT;
BEGIN; SET LOCAL fencing.token = 22; DELETE FROM tasks WHERE id <= 30 AND id % 3 = 2; COMMIT;
CALL fencing.compact_in_batches('tasks', 22, 7);

-- Strict mode, a token column of its own, a composite key not in column
-- order, with a collation.
CREATE TABLE bookings (room text COLLATE "C", day date, amount numeric, note text,
                       PRIMARY KEY (day, room, amount));
SELECT fencing.protect('bookings', 'fence_token', 'strict');
INSERT INTO bookings (room, day, amount, note, fence_token) VALUES
	('A"1', '2026-12-24', 1.50, 'eve', 3),
	('B', '2026-12-25', 2, 'day', 3);
BEGIN; SET LOCAL fencing.token = 9; DELETE FROM bookings WHERE room = 'A"1'; COMMIT;

-- TRUNCATE leaves a floor.
CREATE TABLE batches (id bigint PRIMARY KEY, payload jsonb);
SELECT fencing.protect('batches');
INSERT INTO batches VALUES (1, '{}', 10), (2, '{}', 11);
BEGIN; SET LOCAL fencing.token = 20; TRUNCATE batches; COMMIT;
INSERT INTO batches VALUES (3, '{"after": "truncate"}', 21);

-- Partitioned, protected at the top: marks under the partitions and the
-- table; one partition detached with its marks (the table keeps them, and a
-- floor of 13 from the rows it took away), one truncated on its own (15), a
-- key deleted above the floor (16).
CREATE TABLE events (region text, id int, body text, PRIMARY KEY (region, id)) PARTITION BY LIST (region);
CREATE TABLE events_eu PARTITION OF events FOR VALUES IN ('eu');
CREATE TABLE events_us PARTITION OF events FOR VALUES IN ('us');
CREATE TABLE events_ap PARTITION OF events FOR VALUES IN ('ap');
SELECT fencing.protect('events');
INSERT INTO events VALUES ('eu', 1, 'a', 4), ('eu', 2, 'b', 4), ('us', 1, 'c', 4), ('us', 2, 'd', 13),
                          ('ap', 1, 'e', 4);
BEGIN; SET LOCAL fencing.token = 6; DELETE FROM events WHERE id = 1 AND region = 'us'; COMMIT;
ALTER TABLE events DETACH PARTITION events_us;
BEGIN; SET LOCAL fencing.token = 15; TRUNCATE events_ap; COMMIT;
BEGIN; SET LOCAL fencing.token = 16; DELETE FROM events WHERE id = 1 AND region = 'eu'; COMMIT;

-- Protected, keys deleted, then unprotected: the marks stay.
CREATE TABLE legacy (code text PRIMARY KEY, v int);
SELECT fencing.protect('legacy');
INSERT INTO legacy VALUES ('x', 1, 5), ('y', 2, 5);
BEGIN; SET LOCAL fencing.token = 8; DELETE FROM legacy WHERE code = 'x'; COMMIT;
SELECT fencing.unprotect('legacy');

-- Protected, a key deleted at 30, unprotected, then its key changes type:
-- the registry keeps the identity the mark was made under, so protecting it
-- again (after the update) must raise its floor above the mark.
CREATE TABLE rekeyed (id int PRIMARY KEY, v int);
SELECT fencing.protect('rekeyed');
INSERT INTO rekeyed VALUES (1, 1, 5), (2, 2, 5);
BEGIN; SET LOCAL fencing.token = 30; DELETE FROM rekeyed WHERE id = 1; COMMIT;
SELECT fencing.unprotect('rekeyed');
ALTER TABLE rekeyed ALTER COLUMN id TYPE bigint;

-- Never protected: nothing about it may appear in the registry.
CREATE TABLE plain (id int PRIMARY KEY);

-- A table of an ordinary role, protected and compacted by it.
DO $$ BEGIN
	IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'fencing_upgrade_owner') THEN
		CREATE ROLE fencing_upgrade_owner;
	END IF;
END $$;
GRANT USAGE ON SCHEMA fencing TO fencing_upgrade_owner;
CREATE SCHEMA owned AUTHORIZATION fencing_upgrade_owner;
SET ROLE fencing_upgrade_owner;
CREATE TABLE owned.items (id int PRIMARY KEY, v int);
SELECT fencing.protect('owned.items');
INSERT INTO owned.items SELECT g, 0, 3 FROM generate_series(1, 4) g;
BEGIN; SET LOCAL fencing.token = 5; DELETE FROM owned.items WHERE id = 1; COMMIT;
BEGIN; SET LOCAL fencing.token = 9; DELETE FROM owned.items WHERE id = 2; COMMIT;
SELECT fencing.compact('owned.items', 6) AS compacted_marks;
RESET ROLE;

-- Leases with 0.3.0's tokens (generation, then milliseconds): one live, one
-- released, one expired, one compacted away; fences.
CREATE TABLE facts (name text PRIMARY KEY, value bigint);
INSERT INTO facts SELECT 'live', fencing.acquire('order:1', 'worker-a', '1 hour');
INSERT INTO facts SELECT 'released', fencing.acquire('order:2', 'worker-b', '1 hour');
SELECT fencing.release('order:2', 'worker-b', value) FROM facts WHERE name = 'released';
INSERT INTO facts SELECT 'expired', fencing.acquire('order:4', 'worker-d', '10 milliseconds');
SELECT pg_sleep(0.05);
SELECT resource, live FROM fencing.leases WHERE resource = 'order:4';
INSERT INTO facts SELECT 'old', fencing.acquire('old:1', 'worker-z', '1 hour');
SELECT fencing.release('old:1', 'worker-z', value) FROM facts WHERE name = 'old';
INSERT INTO facts SELECT 'batch_old', fencing.acquire('batch:1', 'worker-y', '1 hour');
SELECT fencing.release('batch:1', 'worker-y', value) FROM facts WHERE name = 'batch_old';
SELECT fencing.fence('order:3', 42) AS previous_mark;
SELECT fencing.fence('old:2', 17) AS previous_mark;
SELECT fencing.fence('batch:2', 18) AS previous_mark;
SELECT fencing.fence('batch:3', 19) AS previous_mark;
-- Resource floors: the idle leases and the fences under 'old:' and 'batch:' go.
SELECT fencing.compact_resources(value + 1, 'old:') AS compacted_resources FROM facts WHERE name = 'old';
SELECT value + 1 AS batch_floor FROM facts WHERE name = 'batch_old' \gset
CALL fencing.compact_resources_in_batches(:batch_floor, 'batch:', 1);
-- Every token of this generation: the generation recorded for the timeline.
SELECT count(*) AS tokens, count(*) FILTER (WHERE (value >> 42) - 512 = (SELECT max(generation) FROM fencing.token_timelines))
       AS of_the_recorded_generation
FROM facts;

-- What the update must keep.
INSERT INTO facts SELECT 'high_water_mark', fencing.high_water_mark();
CREATE SCHEMA before;
CREATE TABLE before.registry AS
SELECT relid::oid, token_column, mode, protected, key_columns, key_types::oid[] AS key_types,
       key_collations::text[] AS key_collations, key_typmods, recorded_at
FROM fencing.registry r;
CREATE TABLE before.protected_tables AS SELECT relation::oid, token_column, mode FROM fencing.protected_tables;
CREATE TABLE before.deleted_keys AS SELECT relid::oid, key, token, deleted_at FROM fencing.deleted_keys;
CREATE TABLE before.floors AS SELECT relid::oid, token, compacted, raised_at FROM fencing.floors;
CREATE TABLE before.resources AS SELECT * FROM fencing.resources;
CREATE TABLE before.fences AS SELECT * FROM fencing.fences;
CREATE TABLE before.resource_floors AS SELECT * FROM fencing.resource_floors;
CREATE TABLE before.token_timelines AS SELECT * FROM fencing.token_timelines;
CREATE TABLE before.sequences AS
SELECT 'token_seq' AS name, last_value, is_called FROM fencing.token_seq
UNION ALL SELECT 'token_history', last_value, is_called FROM fencing.token_history;
CREATE TABLE before.rows AS
SELECT 'jobs' AS t, to_jsonb(j) AS r FROM jobs j
UNION ALL SELECT 'tasks', to_jsonb(t) FROM tasks t
UNION ALL SELECT 'bookings', to_jsonb(b) FROM bookings b
UNION ALL SELECT 'batches', to_jsonb(b) FROM batches b
UNION ALL SELECT 'events', to_jsonb(e) || jsonb_build_object('part', e.tableoid::regclass::text) FROM events e
UNION ALL SELECT 'events_us', to_jsonb(e) FROM events_us e
UNION ALL SELECT 'legacy', to_jsonb(l) FROM legacy l
UNION ALL SELECT 'rekeyed', to_jsonb(r) FROM rekeyed r
UNION ALL SELECT 'owned.items', to_jsonb(i) FROM owned.items i;
SELECT (SELECT count(*) FROM before.registry) AS registered,
       (SELECT count(*) FROM before.protected_tables) AS protected,
       (SELECT count(*) FROM before.deleted_keys) AS marks, (SELECT count(*) FROM before.floors) AS floors,
       (SELECT count(*) FROM before.resources) AS leases, (SELECT count(*) FROM before.fences) AS fences,
       (SELECT count(*) FROM before.resource_floors) AS resource_floors,
       (SELECT count(*) FROM before.token_timelines) AS timelines;

-- protect() for its grantees only: the update passes the grants to the new
-- protect() (after_0.3.0.sql checks, then restores the default).
REVOKE EXECUTE ON FUNCTION fencing.protect(regclass, name, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fencing.protect(regclass, name, text) TO fencing_upgrade_owner;
