-- fencing.compact() and fencing.compact_resources(): floors that bound the
-- state that only grows, without letting a stale holder through.

CREATE TABLE jobs (id int PRIMARY KEY, state text);
SELECT fencing.protect('jobs');
-- 100 keys written and deleted, each under its own token 101..200; key 0 stays.
INSERT INTO jobs SELECT g, 'queued', 100 + g FROM generate_series(0, 100) g;
DO $$
BEGIN
	FOR k IN 1..100 LOOP
		PERFORM set_config('fencing.token', (100 + k)::text, true);
		DELETE FROM jobs WHERE id = k;
	END LOOP;
END
$$;
SELECT count(*) AS marks, min(token), max(token) FROM fencing.deleted_keys WHERE relid = 'jobs'::regclass;

-- Compacting at 151 removes the 51 marks at or under it (a mark at the
-- floor refuses what the floor refuses) and raises the floor.
SELECT fencing.compact('jobs', 151) AS removed;
SELECT count(*) AS marks, min(token) FROM fencing.deleted_keys WHERE relid = 'jobs'::regclass;
SELECT token AS floor FROM fencing.floors WHERE relid = 'jobs'::regclass;

-- A stale holder is still refused: a key whose mark was removed (deleted
-- under 110) is refused below the floor, a key whose mark stays by its mark,
-- a key never seen below the floor.
INSERT INTO jobs VALUES (10, 'zombie', 140);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO jobs VALUES (60, 'zombie', 159);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO jobs VALUES (1000, 'never seen', 150);
\echo :LAST_ERROR_SQLSTATE
-- ... and so is any write below the floor, also to a row that holds less.
UPDATE jobs SET state = 'late', last_fencing_token = 120 WHERE id = 0;
\echo :LAST_ERROR_SQLSTATE
BEGIN;
SET LOCAL fencing.token = 150;
DELETE FROM jobs WHERE id = 0;
ROLLBACK;
SELECT fencing.fenced_update('jobs', '{"id": 0}', 150, '{"state": "late"}', 'skip') AS applied;
SELECT fencing.fenced_update('jobs', '{"id": 10}', 150, '{"state": "late"}', 'skip') AS deleted_key_applied;
-- At and above the floor, writes go on.
INSERT INTO jobs VALUES (10, 'requeued', 151);
SELECT fencing.fenced_update('jobs', '{"id": 0}', 151, '{"state": "moved"}') AS applied;
SELECT id, state, last_fencing_token FROM jobs WHERE id IN (0, 10) ORDER BY id;

-- Another session sees the raised floor at once (the cache is invalidated).
\c
UPDATE jobs SET state = 'x', last_fencing_token = 150 WHERE id = 0;
\echo :LAST_ERROR_SQLSTATE
-- TRUNCATE too: below the floor it is refused, whatever the rows hold.
BEGIN;
SET LOCAL fencing.token = 150;
TRUNCATE jobs;
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
-- A floor above every token the table has seen and above what the lock
-- manager can issue by now (this generation, the clock) would stop every
-- writer for good: refused - a token of the next generation, or an hour
-- ahead of the clock in this one.
SELECT fencing.acquire('compact:clock', 'a', '1 ms') AS now_token \gset
\set VERBOSITY sqlstate
SELECT fencing.compact('jobs', 9007199254740992);
SELECT fencing.compact('jobs', ((:now_token >> 42) + 1) << 42);
SELECT fencing.compact('jobs', :now_token + 3600000);
\set VERBOSITY default
-- A floor never goes down; compacting again below it removes nothing more.
SELECT fencing.compact('jobs', 120) AS removed;
SELECT token AS floor FROM fencing.floors WHERE relid = 'jobs'::regclass;
-- In strict mode an equal token is refused, as for marks.
CREATE TABLE strict_jobs (id int PRIMARY KEY);
SELECT fencing.protect('strict_jobs', mode => 'strict');
INSERT INTO strict_jobs VALUES (1, 10);
SELECT fencing.compact('strict_jobs', 20);
INSERT INTO strict_jobs VALUES (2, 20);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO strict_jobs VALUES (2, 21);

-- Partitioned tables: the floor of the table covers every partition; a
-- partition alone is not compacted.
CREATE TABLE parts (region text, id int, PRIMARY KEY (region, id)) PARTITION BY LIST (region);
CREATE TABLE parts_eu PARTITION OF parts FOR VALUES IN ('eu');
SELECT fencing.protect('parts');
INSERT INTO parts VALUES ('eu', 1, 10);
BEGIN;
SET LOCAL fencing.token = 11;
DELETE FROM parts WHERE id = 1;
COMMIT;
SELECT fencing.compact('parts_eu', 50);
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.compact('parts', 50) AS removed;
SELECT count(*) AS marks_left FROM fencing.deleted_keys WHERE relid IN ('parts'::regclass, 'parts_eu'::regclass);
INSERT INTO parts VALUES ('eu', 1, 49);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO parts_eu VALUES ('eu', 2, 49);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO parts VALUES ('eu', 1, 50);
-- A partition detached after compaction keeps the floor, as it keeps its marks.
ALTER TABLE parts DETACH PARTITION parts_eu;
SELECT fencing.protect('parts_eu');
INSERT INTO parts_eu VALUES ('eu', 3, 49);
\echo :LAST_ERROR_SQLSTATE
-- A DETACH raises the floor for new keys only (the history the partition
-- takes away), not for the rows other partitions hold.
CREATE TABLE parts_us PARTITION OF parts FOR VALUES IN ('us');
CREATE TABLE parts_ap PARTITION OF parts FOR VALUES IN ('ap');
INSERT INTO parts VALUES ('us', 1, 60), ('ap', 1, 900);
ALTER TABLE parts DETACH PARTITION parts_ap;
UPDATE parts SET id = 1, last_fencing_token = 61 WHERE region = 'us' AND id = 1;
INSERT INTO parts VALUES ('us', 2, 61);
\echo :LAST_ERROR_SQLSTATE

-- Bad input changes nothing.
SELECT fencing.compact(NULL, 10);
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.compact('jobs', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.compact('jobs', 0);
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.compact(0, 10);
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE plain (id int PRIMARY KEY);
SELECT fencing.compact('plain', 10);
\echo :LAST_ERROR_SQLSTATE
-- Only the table's owner compacts it.
CREATE ROLE regress_fencing_compactor;
GRANT USAGE ON SCHEMA fencing TO regress_fencing_compactor;
GRANT ALL ON jobs TO regress_fencing_compactor;
SET ROLE regress_fencing_compactor;
SELECT fencing.compact('jobs', 500);
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.compact_resources(500);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT token AS floor_unchanged FROM fencing.floors WHERE relid = 'jobs'::regclass;

-- Resources: idle leases and fences below the floor go; live leases stay;
-- fence() refuses, and acquire() issues no token, below the floor.
SELECT fencing.fence('batch:1', 100), fencing.fence('batch:2', 300), fencing.fence('other:1', 100);
SELECT fencing.acquire('batch:idle', 'a', '1 ms') IS NOT NULL AS granted;
SELECT pg_sleep(0.01);
SELECT fencing.acquire('batch:live', 'a', '1 hour') AS live_token \gset
SELECT fencing.compact_resources(200, 'batch:');
SELECT resource FROM fencing.fences WHERE resource LIKE 'batch:%' OR resource LIKE 'other:%' ORDER BY 1;
SELECT resource FROM fencing.resources WHERE resource LIKE 'batch:%' ORDER BY 1;
SELECT fencing.fence('batch:1', 150);
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.fence('batch:1', 200) AS previous_mark_is_the_floor;
SELECT fencing.fence('other:1', 150) AS other_prefix_untouched;
SELECT fencing.compact_resources(:live_token, 'batch:');
SELECT fencing.acquire('batch:idle', 'b', '1 hour') > :live_token AS above_the_floor;
-- A floor above every token the lock manager issued here and above the clock
-- could only stop every writer for good.
\set VERBOSITY sqlstate
SELECT fencing.compact_resources(:live_token + 1000000000000, 'batch:');
-- Nor does a fence's token count: any caller picks it, and the floor would
-- push every later grant of the database to the end of its generation.
SELECT fencing.fence('batch:pushed', ((:live_token >> 42) + 1 << 42) - 10) > 0 AS fenced_far_ahead;
SELECT fencing.compact_resources(((:live_token >> 42) + 1 << 42) - 20, 'batch:');
\set VERBOSITY default
SELECT count(*) AS no_floor_raised FROM fencing.resource_floors WHERE token > :live_token;
-- One above the highest token seen is allowed: it removes every idle row
-- (tokens here run ahead of the clock by the first grant's failover margin).
SELECT fencing.release('batch:idle', 'b', (SELECT token FROM fencing.resources WHERE resource = 'batch:idle'));
SELECT fencing.compact_resources((SELECT max(token) + 1 FROM fencing.resources
                                  WHERE resource LIKE 'batch:%'), 'batch:') AS removed;
SELECT resource FROM fencing.resources WHERE resource LIKE 'batch:%' ORDER BY 1;
SELECT fencing.compact_resources(0);
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.compact_resources(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT prefix FROM fencing.resource_floors ORDER BY 1;

DELETE FROM fencing.resource_floors;
DELETE FROM fencing.resources WHERE resource LIKE 'batch:%' OR resource LIKE 'other:%';
DELETE FROM fencing.fences WHERE resource LIKE 'batch:%' OR resource LIKE 'other:%';
DROP TABLE jobs, strict_jobs, parts, parts_eu, parts_ap, plain;
REVOKE ALL ON SCHEMA fencing FROM regress_fencing_compactor;
DROP ROLE regress_fencing_compactor;
