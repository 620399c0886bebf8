-- After ALTER EXTENSION fencing UPDATE from 0.2.0 (state of
-- test/upgrade/before_0.2.0.sql): every mark, floor, lease, fence, resource
-- floor and the token sequences kept; the registry built from 0.2.0's guards
-- with the key identity protect() records; the rules still enforced.
\set VERBOSITY terse
ALTER EXTENSION fencing UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'fencing';
-- The registry as the update made it, for the end.
CREATE TEMP TABLE registered AS SELECT * FROM fencing.registry;

-- State kept, row for row, before anything writes.
SELECT 'deleted_keys' AS state, count(*) AS lost FROM (
	SELECT relid, key, token, deleted_at FROM before.deleted_keys
	EXCEPT SELECT relid::oid, key, token, deleted_at FROM fencing.deleted_keys) s
UNION ALL SELECT 'deleted_keys added', count(*) FROM (
	SELECT relid::oid, key, token, deleted_at FROM fencing.deleted_keys
	EXCEPT SELECT relid, key, token, deleted_at FROM before.deleted_keys) s
UNION ALL SELECT 'floors', count(*) FROM (
	SELECT * FROM before.floors EXCEPT SELECT relid::oid, token, compacted, raised_at FROM fencing.floors) s
UNION ALL SELECT 'floors added', count(*) FROM (
	SELECT relid::oid, token, compacted, raised_at FROM fencing.floors EXCEPT SELECT * FROM before.floors) s
UNION ALL SELECT 'resources', count(*) FROM (
	SELECT * FROM before.resources EXCEPT SELECT resource, holder, token, granted_at, expires_at, released FROM fencing.resources) s
UNION ALL SELECT 'resources added', count(*) FROM (
	SELECT resource, holder, token, granted_at, expires_at, released FROM fencing.resources EXCEPT SELECT * FROM before.resources) s
UNION ALL SELECT 'fences', count(*) FROM (
	SELECT * FROM before.fences EXCEPT SELECT * FROM fencing.fences) s
UNION ALL SELECT 'fences added', count(*) FROM (
	SELECT * FROM fencing.fences EXCEPT SELECT * FROM before.fences) s
UNION ALL SELECT 'resource_floors', count(*) FROM (
	SELECT * FROM before.resource_floors EXCEPT SELECT * FROM fencing.resource_floors) s
UNION ALL SELECT 'resource_floors added', count(*) FROM (
	SELECT * FROM fencing.resource_floors EXCEPT SELECT * FROM before.resource_floors) s
UNION ALL SELECT 'token_timelines', count(*) FROM (
	SELECT * FROM before.token_timelines
	EXCEPT SELECT system_identifier, timeline, first_token, started_at FROM fencing.token_timelines) s
UNION ALL SELECT 'token_timelines added', count(*) FROM (
	SELECT system_identifier, timeline, first_token, started_at FROM fencing.token_timelines
	EXCEPT SELECT * FROM before.token_timelines) s
UNION ALL SELECT 'token_timelines without generation timeline + 1 (base 1)', count(*)
	FROM fencing.token_timelines WHERE generation IS DISTINCT FROM timeline + 1
UNION ALL SELECT 'sequences', count(*) FROM (
	SELECT * FROM before.sequences
	EXCEPT (SELECT 'token_seq', last_value, is_called FROM fencing.token_seq
	        UNION ALL SELECT 'token_history', last_value, is_called FROM fencing.token_history)) s;
-- What was kept, by table.
SELECT relid::regclass, count(*) AS marks, min(token), max(token)
FROM fencing.deleted_keys GROUP BY relid ORDER BY relid::text;
SELECT relid::regclass, token, compacted FROM fencing.floors ORDER BY relid::text;
SELECT prefix, token = (SELECT value + 1 FROM facts WHERE name = 'old') AS above_the_old_lease
FROM fencing.resource_floors ORDER BY prefix;
SELECT resource, holder, released FROM fencing.resources ORDER BY resource;
SELECT resource, token FROM fencing.fences ORDER BY resource;
SELECT fencing.high_water_mark() = value AS same_high_water_mark FROM facts WHERE name = 'high_water_mark';

-- The registry: every table 0.2.0 guarded, with its settings, and the
-- tables with marks that were no longer guarded (the detached partition, the
-- unprotected table), unprotected; not the partitions of a protected table
-- (events_eu has marks, events_ap a floor), nor a table never protected.
SELECT relid, token_column, mode, protected, key_columns, key_types, key_collations
FROM fencing.registry ORDER BY relid::text;
SELECT relation::regclass, token_column, mode FROM before.protected_tables
EXCEPT SELECT relation, token_column, mode FROM fencing.protected_tables;
SELECT relation, token_column, mode FROM fencing.protected_tables ORDER BY relation::text;

-- jobs (monotonic, compacted at 8): stale writes and re-inserts refused,
-- unfenced writes refused, new writes accepted, fenced_update works.
INSERT INTO jobs VALUES (6, 'zombie', 11);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO jobs VALUES (1, 'zombie', 7);
\echo :LAST_ERROR_SQLSTATE
UPDATE jobs SET state = 'late', last_fencing_token = 7 WHERE id = 3;
\echo :LAST_ERROR_SQLSTATE
UPDATE jobs SET state = 'late', last_fencing_token = 8 WHERE id = 4;
\echo :LAST_ERROR_SQLSTATE
UPDATE jobs SET state = 'x' WHERE id = 3;
\echo :LAST_ERROR_SQLSTATE
DELETE FROM jobs WHERE id = 3;
\echo :LAST_ERROR_SQLSTATE
INSERT INTO jobs VALUES (6, 'requeued', 12), (1, 'requeued', 8);
UPDATE jobs SET state = 'running', last_fencing_token = 10 WHERE id = 3;
SELECT fencing.fenced_update('jobs', '{"id": 5}', 10, '{"state": "done"}') AS fenced_update;
SELECT fencing.fenced_update('jobs', '{"id": 5}', 9, '{"state": "stale"}') AS fenced_update;
SELECT * FROM jobs ORDER BY id;

-- bookings (strict, token column fence_token, key with a collation).
INSERT INTO bookings (room, day, amount, note, fence_token) VALUES ('A"1', '2026-12-24', 1.5, 'zombie', 9);
\echo :LAST_ERROR_SQLSTATE
UPDATE bookings SET note = 'late', fence_token = 3 WHERE room = 'B';
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bookings (room, day, amount, note, fence_token) VALUES ('A"1', '2026-12-24', 1.5, 'again', 10);
UPDATE bookings SET note = 'moved', fence_token = 4 WHERE room = 'B';
SELECT * FROM bookings ORDER BY room;

-- batches (TRUNCATE floor 20).
INSERT INTO batches VALUES (1, '{}', 19);
\echo :LAST_ERROR_SQLSTATE
TRUNCATE batches;
\echo :LAST_ERROR_SQLSTATE
INSERT INTO batches VALUES (1, '{}', 20);

-- events: the marks of the partitions (eu 1 at 16), the detached one's kept
-- by the table (us 1 at 6) under its floor from the rows it took away (13),
-- the truncated partition's floor (15); a partition made after the update
-- is guarded.
INSERT INTO events VALUES ('eu', 1, 'zombie', 15);
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE events_us2 PARTITION OF events FOR VALUES IN ('us');
INSERT INTO events VALUES ('us', 1, 'zombie', 12);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO events VALUES ('us', 3, 'zombie', 12);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO events VALUES ('ap', 1, 'zombie', 14);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO events VALUES ('us', 4, 'unfenced');
\echo :LAST_ERROR_SQLSTATE
UPDATE events SET body = 'late', last_fencing_token = 3 WHERE region = 'eu' AND id = 2;
\echo :LAST_ERROR_SQLSTATE
INSERT INTO events VALUES ('eu', 1, 'again', 16), ('us', 1, 'again', 13), ('ap', 1, 'again', 15);
UPDATE events SET body = 'on time', last_fencing_token = 4 WHERE region = 'eu' AND id = 2;
SELECT tableoid::regclass, * FROM events ORDER BY region, id;
-- The detached partition is not guarded: any write goes.
INSERT INTO events_us VALUES ('us', 5, 'unguarded', 0);
DELETE FROM events_us WHERE id = 2;
SELECT * FROM events_us ORDER BY id;

-- legacy (unprotected with its marks): writes go; protected again, its
-- marks hold and its floor does not move (same key identity).
INSERT INTO legacy VALUES ('z', 3);
SELECT fencing.protect('legacy');
INSERT INTO legacy VALUES ('x', 1, 7);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO legacy VALUES ('x', 1, 8);
SELECT relid::regclass, token FROM fencing.floors WHERE relid = 'legacy'::regclass;
-- unprotect and protect work on a table the upgrade registered.
SELECT fencing.unprotect('batches');
SELECT relid, protected FROM fencing.registry WHERE relid = 'batches'::regclass;
INSERT INTO batches VALUES (7, '{}');
SELECT fencing.protect('batches');
INSERT INTO batches VALUES (8, '{}');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO batches VALUES (2, '{}', 19);
\echo :LAST_ERROR_SQLSTATE

-- Leases, fences, resource floors and clock tokens.
SELECT resource, holder, live FROM fencing.leases ORDER BY resource;
SELECT fencing.renew('order:1', 'worker-a', value, '1 hour') AS still_held FROM facts WHERE name = 'live';
SELECT fencing.acquire('order:1', 'worker-c', '1 hour') IS NULL AS still_busy;
SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS clock_now \gset
SELECT fencing.acquire('order:2', 'worker-c', '1 hour') AS newer \gset
SELECT :newer >= :clock_now AS follows_clock,
       :newer > (SELECT last_value FROM before.sequences WHERE name = 'token_seq') AS after_the_sequence;
SELECT name AS above_the_new_token FROM facts WHERE value > :newer;
SELECT count(*) AS timelines FROM fencing.token_timelines;
SELECT fencing.fence('order:3', 41);
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.fence('order:3', 43) AS previous_mark;
SELECT fencing.fence('old:2', 18);
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY sqlstate
SELECT fencing.fence('old:3', value) FROM facts WHERE name = 'old';
\set VERBOSITY terse
SELECT fencing.acquire('old:1', 'worker-y', '1 hour') > value AS above_the_floor FROM facts WHERE name = 'old';
SELECT fencing.compact_resources(value + 2, 'old:') AS compacted_resources FROM facts WHERE name = 'old';
SELECT fencing.high_water_mark() >= :newer AS high_water_mark;

-- The key identity the update recorded is the one protect() records: every
-- registered table protected (again) under the settings it has changes no
-- key identity in the registry and raises no floor.
CREATE TEMP TABLE floors_now AS SELECT relid, token, compacted FROM fencing.floors;
SELECT fencing.protect(relid, token_column, mode) FROM fencing.registry ORDER BY relid::text;
SELECT relid, r.key_columns, r.key_types, r.key_collations FROM registered r
EXCEPT SELECT relid, key_columns, key_types, key_collations FROM fencing.registry;
SELECT relid, key_columns, key_types, key_collations FROM fencing.registry
EXCEPT SELECT relid, r.key_columns, r.key_types, r.key_collations FROM registered r;
SELECT * FROM floors_now EXCEPT SELECT relid, token, compacted FROM fencing.floors;
SELECT relid, protected FROM fencing.registry ORDER BY relid::text;
-- The detached partition is guarded now, with its marks.
INSERT INTO events_us VALUES ('us', 9, 'unfenced');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO events_us VALUES ('us', 1, 'zombie', 5);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO events_us VALUES ('us', 1, 'again', 6);
