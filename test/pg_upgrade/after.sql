-- After pg_upgrade from PostgreSQL 15 to 17 (state of
-- test/pg_upgrade/before.sql): every registry row, mark, floor, lease, fence,
-- resource floor and the token sequences kept row for row; the rules still
-- enforced; leases renew; protect() and unprotect() work.
\set VERBOSITY terse
SET search_path = public;
SELECT extversion FROM pg_extension WHERE extname = 'fencing';
SELECT value < 170000 AS made_before_17, current_setting('server_version_num')::int >= 170000 AS now_17
FROM facts WHERE name = 'server_version';

-- State kept, row for row, before anything writes.
SELECT 'registry' AS state, count(*) AS differing FROM (
	(SELECT * FROM before.registry
	 EXCEPT SELECT relid::oid, token_column, mode, protected, key_columns, key_types::oid[],
	               key_collations::text[], key_typmods, recorded_at FROM fencing.registry)
	UNION ALL
	(SELECT relid::oid, token_column, mode, protected, key_columns, key_types::oid[],
	        key_collations::text[], key_typmods, recorded_at FROM fencing.registry
	 EXCEPT SELECT * FROM before.registry)) s
UNION ALL SELECT 'protected_tables', count(*) FROM (
	(SELECT * FROM before.protected_tables EXCEPT SELECT relation::oid, token_column, mode FROM fencing.protected_tables)
	UNION ALL
	(SELECT relation::oid, token_column, mode FROM fencing.protected_tables EXCEPT SELECT * FROM before.protected_tables)) s
UNION ALL SELECT 'deleted_keys', count(*) FROM (
	(SELECT * FROM before.deleted_keys EXCEPT SELECT relid::oid, key, token, deleted_at FROM fencing.deleted_keys)
	UNION ALL
	(SELECT relid::oid, key, token, deleted_at FROM fencing.deleted_keys EXCEPT SELECT * FROM before.deleted_keys)) s
UNION ALL SELECT 'floors', count(*) FROM (
	(SELECT * FROM before.floors EXCEPT SELECT relid::oid, token, compacted, raised_at FROM fencing.floors)
	UNION ALL
	(SELECT relid::oid, token, compacted, raised_at FROM fencing.floors EXCEPT SELECT * FROM before.floors)) s
UNION ALL SELECT 'resources', count(*) FROM (
	(SELECT * FROM before.resources EXCEPT SELECT * FROM fencing.resources)
	UNION ALL (SELECT * FROM fencing.resources EXCEPT SELECT * FROM before.resources)) s
UNION ALL SELECT 'fences', count(*) FROM (
	(SELECT * FROM before.fences EXCEPT SELECT * FROM fencing.fences)
	UNION ALL (SELECT * FROM fencing.fences EXCEPT SELECT * FROM before.fences)) s
UNION ALL SELECT 'resource_floors', count(*) FROM (
	(SELECT * FROM before.resource_floors EXCEPT SELECT * FROM fencing.resource_floors)
	UNION ALL (SELECT * FROM fencing.resource_floors EXCEPT SELECT * FROM before.resource_floors)) s
UNION ALL SELECT 'token_timelines', count(*) FROM (
	(SELECT * FROM before.token_timelines EXCEPT SELECT * FROM fencing.token_timelines)
	UNION ALL (SELECT * FROM fencing.token_timelines EXCEPT SELECT * FROM before.token_timelines)) s
UNION ALL SELECT 'sequences', count(*) FROM (
	SELECT * FROM before.sequences
	EXCEPT (SELECT 'token_seq', last_value, is_called FROM fencing.token_seq
	        UNION ALL SELECT 'token_history', last_value, is_called FROM fencing.token_history)) s
UNION ALL SELECT 'rows', count(*) FROM (
	(SELECT * FROM before.rows
	 EXCEPT (SELECT 'jobs' AS t, to_jsonb(j) AS r FROM jobs j
	         UNION ALL SELECT 'bookings', to_jsonb(b) FROM bookings b
	         UNION ALL SELECT 'batches', to_jsonb(b) FROM batches b
	         UNION ALL SELECT 'events', to_jsonb(e) || jsonb_build_object('part', e.tableoid::regclass::text) FROM events e
	         UNION ALL SELECT 'events_us', to_jsonb(e) FROM events_us e
	         UNION ALL SELECT 'legacy', to_jsonb(l) FROM legacy l))) s;
-- What was kept, by table (names, not oids: stable output; the collations
-- are compared above, their text form is the extension's business).
SELECT relid, token_column, mode, protected, key_columns, key_types,
       cardinality(key_collations) AS collations
FROM fencing.registry ORDER BY relid::text;
SELECT relation, token_column, mode FROM fencing.protected_tables ORDER BY relation::text;
SELECT relid, count(*) AS marks, min(token), max(token) FROM fencing.deleted_keys GROUP BY relid ORDER BY relid::text;
SELECT relid, token, compacted FROM fencing.floors ORDER BY relid::text;
SELECT resource, holder, released FROM fencing.resources ORDER BY resource;
SELECT resource, token FROM fencing.fences ORDER BY resource;
SELECT prefix, token = (SELECT value + 1 FROM facts WHERE name = 'old') AS above_the_old_lease
FROM fencing.resource_floors ORDER BY prefix;
SELECT fencing.high_water_mark() >= value AS high_water_mark_kept FROM facts WHERE name = 'high_water_mark';
-- The guard triggers and the extension's event triggers came through.
SELECT tgrelid::regclass, tgname, tgenabled FROM pg_trigger
WHERE tgfoid = 'fencing.guard'::regproc ORDER BY tgrelid::regclass::text, tgname;
SELECT evtname, evtevent, evtenabled, evtfoid::regprocedure AS function FROM pg_event_trigger ORDER BY evtname;
-- The internal helpers came through in schema fencing_internal, still the
-- extension's, with their rights; schema fencing holds the API alone.
SELECT n.nspname, count(*) AS helpers,
       count(*) FILTER (WHERE has_function_privilege('public', p.oid, 'EXECUTE')) AS public_may_execute,
       bool_and(EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_namespace'::regclass AND d.objid = n.oid
                          AND d.deptype = 'e')) AS extension_member
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname IN ('fencing', 'fencing_internal') AND p.proname LIKE '\_%' GROUP BY 1 ORDER BY 1;

-- jobs (monotonic, compacted at 8, key 6 deleted at 12): stale writes and
-- re-inserts refused, unfenced writes refused, fresh writes accepted.
INSERT INTO jobs VALUES (6, 'zombie', 11);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO jobs VALUES (1, 'zombie', 7);
\echo :LAST_ERROR_SQLSTATE
UPDATE jobs SET state = 'late', last_fencing_token = 7 WHERE id = 3;
\echo :LAST_ERROR_SQLSTATE
UPDATE jobs SET state = 'late', last_fencing_token = 8 WHERE id = 4;
\echo :LAST_ERROR_SQLSTATE
BEGIN; SET LOCAL fencing.token = 8; DELETE FROM jobs WHERE id = 4; COMMIT;
\echo :LAST_ERROR_SQLSTATE
UPDATE jobs SET state = 'x' WHERE id = 3;
\echo :LAST_ERROR_SQLSTATE
DELETE FROM jobs WHERE id = 3;
\echo :LAST_ERROR_SQLSTATE
INSERT INTO jobs VALUES (6, 'requeued', 12), (1, 'requeued', 8);
UPDATE jobs SET state = 'running', last_fencing_token = 10 WHERE id = 3;
SELECT fencing.fenced_update('jobs', '{"id": 5}', 10, '{"state": "done"}') AS fenced_update;
SELECT fencing.fenced_update('jobs', '{"id": 5}', 9, '{"state": "stale"}') AS fenced_update;
SELECT fencing.fenced_update('jobs', '{"id": 2}', 6, '{"state": "stale"}', 'skip') AS fenced_update;
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
BEGIN; SET LOCAL fencing.token = 19; TRUNCATE batches; COMMIT;
\echo :LAST_ERROR_SQLSTATE
INSERT INTO batches VALUES (1, '{}', 20);
SELECT * FROM batches ORDER BY id;

-- events: the marks of the partitions (eu 1 at 16), the detached one's kept
-- by the table (us 1 at 6) under its floor from the rows it took away (13),
-- the truncated partition's floor (15); a partition made after the upgrade
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
-- marks hold and its floor does not move (same key identity: the registry's
-- key identity is still the table's after the upgrade).
INSERT INTO legacy VALUES ('z', 3);
SELECT fencing.protect('legacy');
INSERT INTO legacy VALUES ('x', 1, 7);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO legacy VALUES ('x', 1, 8);
SELECT relid, token FROM fencing.floors WHERE relid = 'legacy'::regclass;
-- unprotect and protect again.
SELECT fencing.unprotect('batches');
SELECT relid, protected FROM fencing.registry WHERE relid = 'batches'::regclass;
INSERT INTO batches VALUES (7, '{}');
SELECT fencing.protect('batches');
INSERT INTO batches VALUES (8, '{}');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO batches VALUES (2, '{}', 19);
\echo :LAST_ERROR_SQLSTATE
-- Protecting every registered table again under its settings changes no key
-- identity and raises no floor: the identity recorded under 15 is the one
-- protect() computes under 17.
CREATE TEMP TABLE floors_now AS SELECT relid, token, compacted FROM fencing.floors;
SELECT count(fencing.protect(relid, token_column, mode)) AS protected_again FROM fencing.registry WHERE relid <> 'events_us'::regclass;
SELECT relid::oid, key_columns, key_types::oid[], key_collations::text[] FROM fencing.registry
EXCEPT SELECT relid, key_columns, key_types, key_collations FROM before.registry;
SELECT * FROM floors_now EXCEPT SELECT relid, token, compacted FROM fencing.floors;
-- A new table is protected and guarded.
CREATE TABLE fresh (id int PRIMARY KEY);
SELECT fencing.protect('fresh');
INSERT INTO fresh VALUES (1, 5);
BEGIN; SET LOCAL fencing.token = 6; DELETE FROM fresh; COMMIT;
INSERT INTO fresh VALUES (1, 5);
\echo :LAST_ERROR_SQLSTATE

-- Leases, fences, resource floors.  The first grant on the new cluster (a
-- new system identifier) starts a new token history above everything before.
SELECT resource, holder, live FROM fencing.leases ORDER BY resource;
SELECT fencing.renew('order:1', 'worker-a', value, '1 hour') AS still_held FROM facts WHERE name = 'live';
SELECT fencing.renew('order:2', 'worker-b', value, '1 hour') AS renewed_released FROM facts WHERE name = 'released';
SELECT fencing.acquire('order:1', 'worker-c', '1 hour') IS NULL AS still_busy;
SELECT fencing.acquire('order:2', 'worker-c', '1 hour') AS newer \gset
SELECT :newer > (SELECT last_value FROM before.sequences WHERE name = 'token_seq') AS after_the_sequence,
       :newer > (SELECT max(value) FROM facts WHERE name IN ('live', 'released', 'old')) AS above_old_tokens;
SELECT count(*) AS timelines FROM fencing.token_timelines;
SELECT fencing.release('order:2', 'worker-b', value) AS stale_release FROM facts WHERE name = 'released';
SELECT fencing.release('order:2', 'worker-c', :newer) AS released;
SELECT fencing.fence('order:3', 41);
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.fence('order:3', 43) AS previous_mark;
SELECT fencing.fence('old:2', 18);
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.acquire('old:1', 'worker-y', '1 hour') > value AS above_the_floor FROM facts WHERE name = 'old';
SELECT fencing.high_water_mark() >= :newer AS high_water_mark_follows;
SELECT fencing.high_water_mark() >= value AS high_water_mark_not_lower FROM facts WHERE name = 'high_water_mark';
