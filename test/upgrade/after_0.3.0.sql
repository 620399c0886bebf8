-- After ALTER EXTENSION fencing UPDATE from 0.3.0 (state of
-- test/upgrade/before_0.3.0.sql): every registry row, mark, floor, lease,
-- fence, resource floor, token timeline and the token sequences kept row for
-- row; the rules still enforced; leases renew, release and expire as
-- before; new tokens above the old ones, in the same generation; protect(),
-- unprotect() and compaction work.  State, not the list of objects
-- (test/upgrade/objects.sql compares those with a fresh install).
\set VERBOSITY terse
-- Until the update, the new library serves 0.3.0's protect(target, column, mode).
CREATE TABLE pre_update (id int PRIMARY KEY, v text);
SELECT fencing.protect('pre_update', 'last_fencing_token', 'monotonic');
INSERT INTO pre_update VALUES (1, 'x', 5);
INSERT INTO pre_update VALUES (2, 'x');
\echo :LAST_ERROR_SQLSTATE
DROP TABLE pre_update;
-- The internal helpers' OIDs, to follow them through the update.
CREATE TEMP TABLE helpers_0_3_0 AS
SELECT p.oid, p.proname FROM pg_proc p WHERE p.pronamespace = 'fencing'::regnamespace AND p.proname LIKE '\_%';
-- Until the update, the new library serves 0.3.0's objects: their leases
-- have no durable horizon, and every change is flushed as 0.3.0 did.  (The
-- grants move the token bound and the high-water mark, which the checks
-- below then expect.)
SELECT fencing.acquire('served:1', 'worker-s', '1 hour') AS served \gset
SELECT fencing.renew('served:1', 'worker-s', :served, '1 hour') AS served_renewed;
SELECT fencing.acquire('served:1', 'worker-t', '1 hour') IS NULL AS served_held;
SELECT live AS served_live FROM fencing.leases WHERE resource = 'served:1';
SELECT fencing.release('served:1', 'worker-s', :served) AS served_released;
SELECT fencing.acquire('served:1', 'worker-t', '1 hour') > :served AS served_granted;
UPDATE before.sequences SET last_value = (SELECT last_value FROM fencing.token_seq)
WHERE name = 'token_seq';
UPDATE facts SET value = fencing.high_water_mark() WHERE name = 'high_water_mark';
ALTER EXTENSION fencing UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'fencing';
-- Every helper moved: the same function (OID) in schema fencing_internal,
-- none left in schema fencing; the event triggers call the moved functions.
SELECT h.proname, p.pronamespace::regnamespace AS schema
FROM helpers_0_3_0 h LEFT JOIN pg_proc p ON p.oid = h.oid ORDER BY 1;
SELECT count(*) AS helpers_left_in_fencing FROM pg_proc p
WHERE p.pronamespace = 'fencing'::regnamespace AND p.proname LIKE '\_%';
SELECT evtname, evtfoid::regprocedure FROM pg_event_trigger ORDER BY evtname;

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
	(SELECT * FROM before.resources EXCEPT SELECT resource, holder, token, granted_at, expires_at, released FROM fencing.resources)
	UNION ALL (SELECT resource, holder, token, granted_at, expires_at, released FROM fencing.resources
	           WHERE resource NOT LIKE 'served:%' EXCEPT SELECT * FROM before.resources)) s
-- Every lease of 0.3.0 was flushed: its durable horizon is its expiry.
UNION ALL SELECT 'grace_until', count(*) FROM fencing.resources
	WHERE grace_until IS DISTINCT FROM expires_at OR epoch IS NOT NULL
UNION ALL SELECT 'fences', count(*) FROM (
	(SELECT * FROM before.fences EXCEPT SELECT * FROM fencing.fences)
	UNION ALL (SELECT * FROM fencing.fences EXCEPT SELECT * FROM before.fences)) s
UNION ALL SELECT 'resource_floors', count(*) FROM (
	(SELECT * FROM before.resource_floors EXCEPT SELECT * FROM fencing.resource_floors)
	UNION ALL (SELECT * FROM fencing.resource_floors EXCEPT SELECT * FROM before.resource_floors)) s
UNION ALL SELECT 'token_timelines', count(*) FROM (
	(SELECT * FROM before.token_timelines
	 EXCEPT SELECT system_identifier, timeline, first_token, started_at, generation FROM fencing.token_timelines)
	UNION ALL
	(SELECT system_identifier, timeline, first_token, started_at, generation FROM fencing.token_timelines
	 EXCEPT SELECT * FROM before.token_timelines)) s
UNION ALL SELECT 'sequences', count(*) FROM (
	SELECT * FROM before.sequences
	EXCEPT (SELECT 'token_seq', last_value, is_called FROM fencing.token_seq
	        UNION ALL SELECT 'token_history', last_value, is_called FROM fencing.token_history)) s
UNION ALL SELECT 'rows', count(*) FROM (
	(SELECT * FROM before.rows
	 EXCEPT (SELECT 'jobs' AS t, to_jsonb(j) AS r FROM jobs j
	         UNION ALL SELECT 'tasks', to_jsonb(t) FROM tasks t
	         UNION ALL SELECT 'bookings', to_jsonb(b) FROM bookings b
	         UNION ALL SELECT 'batches', to_jsonb(b) FROM batches b
	         UNION ALL SELECT 'events', to_jsonb(e) || jsonb_build_object('part', e.tableoid::regclass::text) FROM events e
	         UNION ALL SELECT 'events_us', to_jsonb(e) FROM events_us e
	         UNION ALL SELECT 'legacy', to_jsonb(l) FROM legacy l
	         UNION ALL SELECT 'rekeyed', to_jsonb(r) FROM rekeyed r
	         UNION ALL SELECT 'owned.items', to_jsonb(i) FROM owned.items i))) s;
-- What was kept, by table (names, not oids: stable output).
SELECT relid, token_column, mode, protected, key_columns, key_types,
       cardinality(key_collations) AS collations
FROM fencing.registry ORDER BY relid::text;
SELECT relation, token_column, mode FROM fencing.protected_tables ORDER BY relation::text;
SELECT relid, count(*) AS marks, min(token), max(token) FROM fencing.deleted_keys GROUP BY relid ORDER BY relid::text;
SELECT relid, token, compacted FROM fencing.floors ORDER BY relid::text;
SELECT resource, holder, released FROM fencing.resources ORDER BY resource;
SELECT resource, token FROM fencing.fences ORDER BY resource;
SELECT prefix, token = (SELECT value + 1 FROM facts WHERE name = 'old') AS above_the_old_lease,
       token = (SELECT value + 1 FROM facts WHERE name = 'batch_old') AS above_the_old_batch_lease
FROM fencing.resource_floors ORDER BY prefix;
SELECT fencing.high_water_mark() = value AS same_high_water_mark FROM facts WHERE name = 'high_water_mark';
-- The guard triggers and the extension's event triggers came through.
SELECT tgrelid::regclass, tgname, tgenabled FROM pg_trigger
WHERE tgfoid = 'fencing.guard'::regproc ORDER BY tgrelid::regclass::text, tgname;
SELECT evtname, evtevent, evtenabled FROM pg_event_trigger ORDER BY evtname;

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

-- tasks (compact_in_batches() at 22: the marks at 22 kept, the floor 22):
-- nothing below 22 goes, a key deleted at 22 comes back at 22 and not
-- below; compacting again in batches takes the rest.
INSERT INTO tasks VALUES (3, 0, 21);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO tasks VALUES (2, 0, 21);
\echo :LAST_ERROR_SQLSTATE
UPDATE tasks SET v = 1, last_fencing_token = 21 WHERE id = 31;
\echo :LAST_ERROR_SQLSTATE
INSERT INTO tasks VALUES (2, 0, 22), (3, 0, 22);
UPDATE tasks SET v = 1, last_fencing_token = 22 WHERE id = 31;
CALL fencing.compact_in_batches('tasks', 23, 4);
SELECT count(*) AS marks FROM fencing.deleted_keys WHERE relid = 'tasks'::regclass;
INSERT INTO tasks VALUES (5, 0, 22);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO tasks VALUES (5, 0, 23);
SELECT relid, token, compacted FROM fencing.floors WHERE relid = 'tasks'::regclass;

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
SELECT relid, token FROM fencing.floors WHERE relid = 'legacy'::regclass;

-- rekeyed (unprotected, then its key became bigint): the key identity 0.3.0
-- recorded is kept, so protecting it again raises its floor above its mark
-- (30): key 1, deleted at 30, cannot come back below it.
SELECT fencing.protect('rekeyed');
SELECT relid, key_types FROM fencing.registry WHERE relid = 'rekeyed'::regclass;
SELECT relid, token >= 30 AS above_the_mark FROM fencing.floors WHERE relid = 'rekeyed'::regclass;
INSERT INTO rekeyed VALUES (1, 1, 29);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO rekeyed VALUES (3, 3, 29);
\echo :LAST_ERROR_SQLSTATE

-- unprotect and protect again.
SELECT fencing.unprotect('batches');
SELECT relid, protected FROM fencing.registry WHERE relid = 'batches'::regclass;
INSERT INTO batches VALUES (7, '{}');
SELECT fencing.protect('batches');
INSERT INTO batches VALUES (8, '{}');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO batches VALUES (2, '{}', 19);
\echo :LAST_ERROR_SQLSTATE

-- The ordinary role's table: its marks (key 2 at 9) and compact() floor (6)
-- hold; the role still compacts, unprotects and protects it.
SET ROLE fencing_upgrade_owner;
INSERT INTO owned.items VALUES (2, 0, 8);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO owned.items VALUES (1, 0, 5);
\echo :LAST_ERROR_SQLSTATE
UPDATE owned.items SET v = 1, last_fencing_token = 5 WHERE id = 3;
\echo :LAST_ERROR_SQLSTATE
INSERT INTO owned.items VALUES (1, 0, 6);
SELECT fencing.compact('owned.items', 10) AS compacted_marks;
INSERT INTO owned.items VALUES (2, 0, 9);
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.unprotect('owned.items');
SELECT fencing.protect('owned.items');
INSERT INTO owned.items VALUES (2, 0, 10);
SELECT * FROM owned.items ORDER BY id;
RESET ROLE;

-- Protecting every registered table again under its settings changes no key
-- identity and raises no floor: the identity 0.3.0 recorded is the one
-- protect() computes now.
CREATE TEMP TABLE floors_now AS SELECT relid, token, compacted FROM fencing.floors;
CREATE TEMP TABLE registry_now AS SELECT relid, key_columns, key_types, key_collations FROM fencing.registry;
SELECT count(fencing.protect(relid, token_column, mode)) AS protected_again
FROM fencing.registry WHERE relid NOT IN ('events_us'::regclass, 'owned.items'::regclass);
SELECT relid, key_columns, key_types, key_collations FROM fencing.registry
EXCEPT SELECT * FROM registry_now;
SELECT * FROM floors_now EXCEPT SELECT relid, token, compacted FROM fencing.floors;
-- A new table is protected and guarded.
CREATE TABLE fresh (id int PRIMARY KEY);
SELECT fencing.protect('fresh');
INSERT INTO fresh VALUES (1, 5);
BEGIN; SET LOCAL fencing.token = 6; DELETE FROM fresh; COMMIT;
INSERT INTO fresh VALUES (1, 5);
\echo :LAST_ERROR_SQLSTATE

-- Leases, fences, resource floors.  Tokens go on from 0.3.0's: above every
-- old one, in the generation recorded for this timeline, no new timeline.
SELECT resource, holder, live FROM fencing.leases ORDER BY resource;
-- fencing.leases gained state (at the end): each lease 0.3.0 left is held,
-- released or expired.
SELECT resource, live, state FROM fencing.leases ORDER BY resource;
SELECT attname FROM pg_attribute WHERE attrelid = 'fencing.leases'::regclass AND attnum > 0 ORDER BY attnum;
SELECT fencing.renew('order:1', 'worker-a', value, '1 hour') AS still_held FROM facts WHERE name = 'live';
SELECT fencing.renew('order:2', 'worker-b', value, '1 hour') AS renewed_released FROM facts WHERE name = 'released';
SELECT fencing.acquire('order:1', 'worker-c', '1 hour') IS NULL AS still_busy;
SELECT fencing.acquire('order:2', 'worker-c', '1 hour') AS newer \gset
SELECT fencing.acquire('order:4', 'worker-e', '1 hour') AS after_expiry \gset
SELECT fencing.renew('order:4', 'worker-d', value, '1 hour') AS renewed_expired FROM facts WHERE name = 'expired';
SELECT :newer > (SELECT max(value) FROM facts WHERE name IN ('live', 'released', 'expired', 'old', 'batch_old'))
       AS above_old_tokens,
       :after_expiry > :newer AS increasing,
       (:newer >> 42) - 512 = (SELECT max(generation) FROM before.token_timelines) AS same_generation;
SELECT count(*) AS timelines_added FROM (
	SELECT system_identifier, timeline FROM fencing.token_timelines
	EXCEPT SELECT system_identifier, timeline FROM before.token_timelines) s;
SELECT fencing.release('order:2', 'worker-b', value) AS stale_release FROM facts WHERE name = 'released';
SELECT fencing.release('order:2', 'worker-c', :newer) AS released;
SELECT fencing.release('order:1', 'worker-a', value) AS released_the_old_lease FROM facts WHERE name = 'live';
SELECT fencing.acquire('order:1', 'worker-c', '1 hour') > :after_expiry AS taken_over;
SELECT resource, holder, live FROM fencing.leases ORDER BY resource;
-- New in 0.4.0: leader election.  An election is a lease, those 0.3.0
-- left included: leader() shows the live lease of order:1, a campaign of
-- another candidate is refused, resign() hands it over to the next one.
SELECT holder, token = (SELECT token FROM fencing.leases WHERE resource = 'order:1') AS its_token
FROM fencing.leader('order:1');
SELECT count(*) AS leaders FROM fencing.leader('order:2');
SELECT fencing.campaign('order:1', 'worker-d', '1 hour') IS NULL AS campaign_refused;
SELECT fencing.resign('order:1', 'worker-c', token) AS resigned FROM fencing.leader('order:1');
SELECT fencing.campaign('order:1', 'worker-d', '1 hour', '1 s') > :after_expiry AS campaign_granted;
SELECT holder FROM fencing.leader('order:1');
SELECT has_function_privilege('public', 'fencing.campaign(text, text, interval, interval)', 'EXECUTE')
       AND has_function_privilege('public', 'fencing.resign(text, text, bigint)', 'EXECUTE')
       AND has_function_privilege('public', 'fencing.leader(text)', 'EXECUTE') AS public_may;
SELECT fencing.fence('order:3', 41);
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.fence('order:3', 43) AS previous_mark;
SELECT fencing.fence('old:2', 18);
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.fence('batch:2', 18);
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.acquire('old:1', 'worker-y', '1 hour') > value AS above_the_floor FROM facts WHERE name = 'old';
SELECT fencing.acquire('batch:1', 'worker-x', '1 hour') > value AS above_the_floor FROM facts WHERE name = 'batch_old';
-- token_at() (0.3.0's) answers in the same generation (tokens run
-- fencing.failover_margin ahead of the clock on a history's first grant, so
-- it is below them).
SELECT fencing.token_at(now()) >> 42 = :newer >> 42 AS token_at_same_generation,
       fencing.token_at(now()) <= :newer AS token_at_not_above;
SELECT fencing.compact_resources(value + 2, 'old:') AS compacted_resources FROM facts WHERE name = 'old';
SELECT fencing.high_water_mark() >= :newer AS high_water_mark_follows;
SELECT fencing.high_water_mark() >= value AS high_water_mark_not_lower FROM facts WHERE name = 'high_water_mark';

-- New in 0.4.0: lease counters (empty without shared_preload_libraries, as
-- here), and schema fencing_monitor, which pg_monitor reads without the
-- right to take a lease.
SELECT count(*) AS lease_stats_rows FROM fencing.lease_stats;
SET ROLE pg_monitor;
SELECT resource, state FROM fencing_monitor.leases ORDER BY resource;
SELECT marks > 0 AS marks_counted FROM fencing_monitor.marks;
SELECT generation IS NOT NULL AS generation_known FROM fencing_monitor.tokens;
SELECT fencing.acquire('order:9', 'monitor', '1 hour');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- protect() gained enforce and max_token; its grants passed to it; every
-- table protected before the update enforces, without a ceiling.
SELECT has_function_privilege('fencing_upgrade_owner',
                              'fencing.protect(regclass, name, text, boolean, bigint)', 'EXECUTE') AS grantee_may,
       has_function_privilege('public',
                              'fencing.protect(regclass, name, text, boolean, bigint)', 'EXECUTE') AS public_may;
SELECT relation, enforce, max_token FROM fencing.protected_tables ORDER BY relation::text;
-- Report-only on a table protected before the update: a write without a
-- token is accepted, the stored token kept; enforcing again refuses it.
SELECT last_fencing_token AS stored FROM jobs WHERE id = 5;
SELECT fencing.set_enforce('jobs', false);
UPDATE jobs SET state = 'report-only' WHERE id = 5;
SELECT id, state, last_fencing_token FROM jobs WHERE id = 5;
SELECT fencing.set_enforce('jobs', true);
UPDATE jobs SET state = 'x' WHERE id = 5;
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.protect('jobs', max_token => 1000);
INSERT INTO jobs VALUES (100, 'huge', 1001);
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.protect('jobs');
-- reset_token() on state kept through the update: row 6 (deleted at 12 and
-- inserted again, so its key has a mark of 12 from 0.3.0) goes down to 11,
-- its mark with it, and 0.3.0's compaction floor (8) still holds.
SELECT fencing.reset_token('jobs', '{"id": 6}', 11) AS previous;
SELECT token FROM fencing.deleted_keys WHERE relid = 'jobs'::regclass ORDER BY token;
BEGIN; SET LOCAL fencing.token = 11;
DELETE FROM jobs WHERE id = 6; INSERT INTO jobs VALUES (6, 'repaired');
COMMIT;
SELECT id, state, last_fencing_token FROM jobs WHERE id = 6;
SELECT fencing.reset_token('jobs', '{"id": 6}', 7);
\echo :LAST_ERROR_SQLSTATE
-- The default rights again, as a fresh install has them (objects.sql compares).
REVOKE EXECUTE ON FUNCTION fencing.protect(regclass, name, text, boolean, bigint) FROM fencing_upgrade_owner;
GRANT EXECUTE ON FUNCTION fencing.protect(regclass, name, text, boolean, bigint) TO PUBLIC;
UPDATE pg_proc SET proacl = NULL
WHERE oid = 'fencing.protect(regclass, name, text, boolean, bigint)'::regprocedure;

-- The role goes (roles are the cluster's).
DROP OWNED BY fencing_upgrade_owner;
DROP ROLE fencing_upgrade_owner;

-- In a database of its own at 0.3.0, served by the 0.4.0 library (the
-- helpers in schema fencing): a schema fencing_internal that another role
-- made, with helpers of the same names that would run as whoever calls
-- them, is never called (protect(), the event trigger, unprotect(),
-- acquire()'s grant); the update refuses that schema, and moves the helpers
-- once it is gone; in the same session, the library then names the moved
-- helpers (acquire()'s kept statement is made again).
\c postgres
CREATE DATABASE fencing_upgrade_planted;
\c fencing_upgrade_planted
CREATE EXTENSION fencing VERSION '0.3.0';
CREATE ROLE fencing_upgrade_planter;
GRANT CREATE ON DATABASE fencing_upgrade_planted TO fencing_upgrade_planter;
SET ROLE fencing_upgrade_planter;
CREATE SCHEMA fencing_internal;
GRANT USAGE ON SCHEMA fencing_internal TO PUBLIC;
CREATE TABLE fencing_internal.calls (helper text);
GRANT INSERT ON fencing_internal.calls TO PUBLIC;
CREATE FUNCTION fencing_internal._protect(regclass, name, text) RETURNS void LANGUAGE sql
AS $$ INSERT INTO fencing_internal.calls VALUES ('_protect') $$;
CREATE FUNCTION fencing_internal._unprotect(regclass) RETURNS void LANGUAGE sql
AS $$ INSERT INTO fencing_internal.calls VALUES ('_unprotect') $$;
CREATE FUNCTION fencing_internal._guard_truncate(regclass, name, text) RETURNS void LANGUAGE sql
AS $$ INSERT INTO fencing_internal.calls VALUES ('_guard_truncate') $$;
CREATE FUNCTION fencing_internal._guard_key_changes(regclass, name, text) RETURNS void LANGUAGE sql
AS $$ INSERT INTO fencing_internal.calls VALUES ('_guard_key_changes') $$;
CREATE FUNCTION fencing_internal._grant_token(bigint, bigint) RETURNS bigint LANGUAGE sql
AS $$ INSERT INTO fencing_internal.calls VALUES ('_grant_token'); SELECT 1::bigint $$;
RESET ROLE;
CREATE TABLE probe (id int PRIMARY KEY, v int);
SELECT fencing.protect('probe');
CREATE FUNCTION probe_touch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER touch BEFORE UPDATE ON probe FOR EACH ROW EXECUTE FUNCTION probe_touch();
SELECT tgname, tgqual IS NOT NULL AS key_change_when FROM pg_trigger
WHERE tgrelid = 'probe'::regclass AND tgname LIKE 'fencing_guard%' ORDER BY 1;
-- A resource's first grant locks its row; a grant of a released one is the
-- one statement that calls _grant_token() (the planted one would return 1).
SELECT fencing.acquire('planted', 'a', '10 s') > 1 AS granted;
SELECT fencing.release('planted', 'a', token) FROM fencing.resources WHERE resource = 'planted';
SELECT fencing.acquire('planted', 'a', '10 s') > 1 AS granted;
SELECT fencing.unprotect('probe');
SELECT count(*) AS planted_helpers_called FROM fencing_internal.calls;
ALTER EXTENSION fencing UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'fencing';
DROP SCHEMA fencing_internal CASCADE;
REVOKE CREATE ON DATABASE fencing_upgrade_planted FROM fencing_upgrade_planter;
DROP ROLE fencing_upgrade_planter;
ALTER EXTENSION fencing UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'fencing';
SELECT fencing.acquire('planted', 'b', '10 s') IS NULL AS still_held;
SELECT fencing.release('planted', 'a', token) FROM fencing.resources WHERE resource = 'planted';
SELECT token AS before FROM fencing.resources WHERE resource = 'planted' \gset
SELECT fencing.acquire('planted', 'b', '10 s') > :before AS granted;
SELECT fencing.protect('probe');
SELECT tgname FROM pg_trigger WHERE tgrelid = 'probe'::regclass AND tgname LIKE 'fencing_guard%' ORDER BY 1;
SELECT fencing.unprotect('probe');
SELECT n.nspname, count(*) AS helpers FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE p.proname LIKE '\_%' AND n.nspname LIKE 'fencing%' GROUP BY 1 ORDER BY 1;
\c postgres
DROP DATABASE fencing_upgrade_planted;
