-- Tokens follow the server clock (microseconds since 1970), with a margin on
-- a (system, timeline) that has not issued tokens; fencing.high_water_mark().

-- A token is at least the clock at the grant, and above the previous one.
SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS before \gset
SELECT fencing.acquire('clock:1', 'a', '1 min') AS t1 \gset
SELECT :t1 >= :before AS follows_clock, :t1 < 2 ^ 53 AS below_2_53;
SELECT pg_sleep(0.01);
SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS before \gset
SELECT fencing.acquire('clock:2', 'a', '1 min') AS t2 \gset
SELECT :t2 > :t1 AS increases, :t2 >= :before AS follows_clock;

-- This server's (system, timeline) is recorded once, with its first token.
SELECT count(*) AS timelines, bool_and(t.first_token <= :t1) AS first_token_ok
FROM fencing.token_timelines t, pg_control_system() s
WHERE t.system_identifier = s.system_identifier;

-- A history not seen before - as after a promotion, a point-in-time
-- restore or a restore from a dump; here: the history sequence set back by
-- hand - gets the margin on its first grant, and is recorded.
SHOW fencing.failover_margin;
DELETE FROM fencing.token_timelines;
SELECT setval('fencing.token_history', 1, false);
\c
SET fencing.failover_margin = '1h';
SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS before \gset
SELECT fencing.acquire('clock:3', 'a', '1 min') AS t3 \gset
SELECT :t3 - :before >= 3600 * 1000000::bigint AS margin_applied,
       :t3 - :before < 3601 * 1000000::bigint AS margin_only;
SELECT count(*) AS timelines, bool_and(first_token = :t3) AS first_token_recorded
FROM fencing.token_timelines;
-- The next grant, here or in another session, is one above it: no second margin.
SELECT fencing.acquire('clock:4', 'a', '1 min') AS t4 \gset
SELECT :t4 = :t3 + 1 AS next_without_margin;
\c
SET fencing.failover_margin = '1h';
SELECT fencing.acquire('clock:5', 'a', '1 min') AS t5 \gset
SELECT :t5 = :t4 + 1 AS other_session_without_margin;

-- One margin per history, even if the first grant rolls back (its record
-- goes, the history stays seen): the next grant is one above the rolled-back
-- one.  test/isolation/specs/first_grant.spec: also while it is still open.
DELETE FROM fencing.token_timelines;
SELECT setval('fencing.token_history', 1, false);
\c
BEGIN;
SELECT fencing.acquire('clock:6', 'a', '1 min') AS t6 \gset
ROLLBACK;
SELECT count(*) AS timelines_after_rollback FROM fencing.token_timelines;
SELECT fencing.acquire('clock:7', 'a', '1 min') AS t7 \gset
SELECT :t7 = :t6 + 1 AS no_second_margin;
-- A token past 2^53 - 1 is not issued: the sequence set there by hand.
SELECT setval('fencing.token_seq', 9007199254740990);
SELECT fencing.acquire('clock:8', 'a', '1 min');
SELECT fencing.acquire('clock:9', 'a', '1 min') IS NULL AS refused;
SELECT setval('fencing.token_seq', :t7) = :t7 AS reset;

-- The margin is a superuser setting, between 0 and 1 hour.  (PostgreSQL 17
-- and later name the unit of the bounds too: expected/clock_1.out.)
SET fencing.failover_margin = '2h';
SET fencing.failover_margin = -1;
CREATE ROLE clock_user;
SET ROLE clock_user;
SET fencing.failover_margin = 0;
RESET ROLE;

-- fencing.high_water_mark(): the highest token in protected tables, marks,
-- floors, fences and leases; 0 when there is none.  In a database of its own,
-- which the other tests' tokens do not reach.
\set regress_db :DBNAME
CREATE DATABASE fencing_clock;
\c fencing_clock
CREATE EXTENSION fencing;
SELECT fencing.high_water_mark() AS empty;
SELECT fencing.acquire('hw:lease', 'a', '1 min') AS lease_token \gset
CREATE TABLE hw_items (id int PRIMARY KEY, v int);
SELECT fencing.protect('hw_items');
CREATE TABLE hw_parts (id int PRIMARY KEY, v int) PARTITION BY RANGE (id);
CREATE TABLE hw_parts_1 PARTITION OF hw_parts FOR VALUES FROM (0) TO (100);
CREATE TABLE hw_custom ("Token Col" bigint NOT NULL DEFAULT 0, id int PRIMARY KEY);
SELECT fencing.protect('hw_parts');
SELECT fencing.protect('hw_custom', 'Token Col', 'strict');
SELECT fencing.high_water_mark() = :lease_token AS leases_count;
INSERT INTO hw_items VALUES (1, 0, 9000000000000001);
SELECT fencing.high_water_mark() AS hwm;
BEGIN;
SET LOCAL fencing.token = 9000000000000002;
DELETE FROM hw_items WHERE id = 1;
COMMIT;
SELECT fencing.high_water_mark() AS after_delete_mark;
BEGIN;
SET LOCAL fencing.token = 9000000000000003;
INSERT INTO hw_parts VALUES (5, 0);
COMMIT;
SELECT fencing.high_water_mark() AS partition_row;
BEGIN;
SET LOCAL fencing.token = 9000000000000004;
TRUNCATE hw_parts;
COMMIT;
SELECT fencing.high_water_mark() AS after_truncate_floor;
BEGIN;
SELECT fencing.fence('hw:resource', 9000000000000005);
COMMIT;
SELECT fencing.high_water_mark() AS after_fence;
INSERT INTO hw_custom VALUES (9000000000000006, 1);
SELECT fencing.high_water_mark() AS quoted_token_column;
-- Temporary tables do not count (nor could other sessions' be read).
CREATE TEMP TABLE hw_temp (id int PRIMARY KEY);
SELECT fencing.protect('hw_temp');
INSERT INTO hw_temp VALUES (1, 9100000000000000);
SELECT fencing.high_water_mark() AS temp_skipped;
DROP TABLE hw_temp;

-- It reads every protected table, row-level security or not: for the owner,
-- and for the roles the owner grants it to (with USAGE on the schema).
ALTER TABLE hw_custom ENABLE ROW LEVEL SECURITY;
ALTER TABLE hw_custom FORCE ROW LEVEL SECURITY;
SET ROLE clock_user;
SELECT fencing.high_water_mark();
RESET ROLE;
GRANT USAGE ON SCHEMA fencing TO clock_user;
GRANT EXECUTE ON FUNCTION fencing.high_water_mark() TO clock_user;
SET ROLE clock_user;
SELECT fencing.high_water_mark() AS granted_role_sees_all;
RESET ROLE;

-- Dropped tables stop counting (their marks go with them).
DROP TABLE hw_custom;
SELECT fencing.high_water_mark() AS after_drop;
DROP TABLE hw_items, hw_parts;
SELECT fencing.high_water_mark() AS fence_remains;

\c :regress_db
DROP DATABASE fencing_clock;
DROP ROLE clock_user;
