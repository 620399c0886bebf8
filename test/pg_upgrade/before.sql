-- State made under PostgreSQL 15 with the current fencing, to survive
-- pg_upgrade to PostgreSQL 17 (test/pg_upgrade/run): protected tables (a
-- plain one compacted, one in strict mode with a collated composite key, one
-- truncated, a partitioned one with a detached partition, one unprotected
-- after deletes), deleted-key marks, TRUNCATE and compact() floors, resource
-- floors, leases (live and released), fences and the registry.  A copy of
-- every state table is kept in schema "before" (relations as oid: pg_upgrade
-- keeps pg_class and pg_type oids; collations as text: it does not keep their oids) for
-- test/pg_upgrade/after.sql to compare with.
SET search_path = public;
CREATE EXTENSION fencing;

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

-- Never protected: nothing about it may appear in the registry.
CREATE TABLE plain (id int PRIMARY KEY);

-- Leases with clock tokens: one live, one released, one compacted away; fences.
CREATE TABLE facts (name text PRIMARY KEY, value bigint);
INSERT INTO facts SELECT 'live', fencing.acquire('order:1', 'worker-a', '1 hour');
INSERT INTO facts SELECT 'released', fencing.acquire('order:2', 'worker-b', '1 hour');
SELECT fencing.release('order:2', 'worker-b', value) FROM facts WHERE name = 'released';
INSERT INTO facts SELECT 'old', fencing.acquire('old:1', 'worker-z', '1 hour');
SELECT fencing.release('old:1', 'worker-z', value) FROM facts WHERE name = 'old';
SELECT fencing.fence('order:3', 42) AS previous_mark;
SELECT fencing.fence('old:2', 17) AS previous_mark;
-- Resource floors: the idle lease and the fence under 'old:' go.
SELECT fencing.compact_resources(value + 1, 'old:') AS compacted_resources FROM facts WHERE name = 'old';

-- What the upgrade must keep.
INSERT INTO facts SELECT 'high_water_mark', fencing.high_water_mark();
INSERT INTO facts SELECT 'server_version', current_setting('server_version_num')::bigint;
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
UNION ALL SELECT 'bookings', to_jsonb(b) FROM bookings b
UNION ALL SELECT 'batches', to_jsonb(b) FROM batches b
UNION ALL SELECT 'events', to_jsonb(e) || jsonb_build_object('part', e.tableoid::regclass::text) FROM events e
UNION ALL SELECT 'events_us', to_jsonb(e) FROM events_us e
UNION ALL SELECT 'legacy', to_jsonb(l) FROM legacy l;
SELECT (SELECT count(*) FROM before.registry) AS registered,
       (SELECT count(*) FROM before.protected_tables) AS protected,
       (SELECT count(*) FROM before.deleted_keys) AS marks, (SELECT count(*) FROM before.floors) AS floors,
       (SELECT count(*) FROM before.resources) AS leases, (SELECT count(*) FROM before.fences) AS fences,
       (SELECT count(*) FROM before.resource_floors) AS resource_floors,
       (SELECT count(*) FROM before.token_timelines) AS timelines;
