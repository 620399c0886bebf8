-- Tokens: (512 + generation) * 2^42 + the server clock in milliseconds since
-- 1970; the generation is the timeline plus a base fixed per system; a
-- margin on a (system, timeline) that has not issued tokens;
-- fencing.grant_confirmation; fencing.high_water_mark().

-- A token is in this server's generation, at least the clock at the grant,
-- and above the previous one.
SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS before \gset
SELECT fencing.acquire('clock:1', 'a', '1 min') AS t1 \gset
SELECT :t1 >> 42 = 512 + t.generation AS in_generation,
       t.generation - t.timeline >= 1 AS base,
       t.timeline = (SELECT timeline_id FROM pg_control_checkpoint()) AS this_timeline,
       (:t1 & (2 ^ 42 - 1)::bigint) >= :before AS follows_clock,
       :t1 < 2 ^ 53 AS below_2_53
FROM fencing.token_timelines t, pg_control_system() s
WHERE t.system_identifier = s.system_identifier;
SELECT pg_sleep(0.01);
SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS before \gset
SELECT fencing.acquire('clock:2', 'a', '1 min') AS t2 \gset
SELECT :t2 > :t1 AS increases, (:t2 & (2 ^ 42 - 1)::bigint) >= :before AS follows_clock;

-- fencing.token_at(): the lowest token of this generation at a moment, a
-- compaction floor; owner only; bad moments refused.
SELECT fencing.token_at(clock_timestamp() - interval '1 day') < :t1 AS yesterday_below,
       fencing.token_at(clock_timestamp() + interval '1 hour') > :t2 AS in_an_hour_above,
       fencing.token_at(clock_timestamp()) >> 42 = :t1 >> 42 AS same_generation,
       fencing.token_at('1970-01-01 00:00:01+00') & (2 ^ 42 - 1)::bigint AS one_second;
SELECT fencing.token_at('infinity');
SELECT fencing.token_at('1969-12-31 23:59:59+00');
SELECT fencing.token_at('2200-01-01');
SELECT fencing.token_at(NULL) IS NULL AS strict;
CREATE ROLE clock_reader;
SET ROLE clock_reader;
SELECT fencing.token_at(now());
RESET ROLE;
DROP ROLE clock_reader;

-- A new history - a new database here, as after a restore from a dump; a
-- promotion or a point-in-time restore is one too - gets the margin on its
-- first grant, and is recorded with its first token and generation.
SHOW fencing.failover_margin;
\set regress_db :DBNAME
CREATE DATABASE fencing_clock;
\c fencing_clock
CREATE EXTENSION fencing;
SET fencing.failover_margin = '1h';
SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS before \gset
SELECT fencing.acquire('clock:3', 'a', '1 min') AS t3 \gset
SELECT (:t3 & (2 ^ 42 - 1)::bigint) - :before >= 3600 * 1000 AS margin_applied,
       (:t3 & (2 ^ 42 - 1)::bigint) - :before < 3601 * 1000 AS margin_only;
SELECT count(*) AS timelines, bool_and(first_token = :t3) AS first_token_recorded,
       bool_and(generation = timeline + 1) AS first_system_base_1
FROM fencing.token_timelines;
-- The next grant, here or in another session, is one above it: no second margin.
SELECT fencing.acquire('clock:4', 'a', '1 min') AS t4 \gset
SELECT :t4 = :t3 + 1 AS next_without_margin;
\c
SET fencing.failover_margin = '1h';
SELECT fencing.acquire('clock:5', 'a', '1 min') AS t5 \gset
SELECT :t5 = :t4 + 1 AS other_session_without_margin;
-- Each grant is above the resource's last token, whatever the sequence holds.
SELECT setval('fencing.token_seq', 1);
UPDATE fencing.resources SET released = true, token = :t5 + 1000 WHERE resource = 'clock:3';
SELECT fencing.acquire('clock:3', 'b', '1 min') = :t5 + 1001 AS above_last_token;
-- A token never leaves its generation: above its last one (a resource's last
-- token set there by hand, as a clock 139 years ahead would) nothing is
-- issued, since those numbers are the next timeline's.
SELECT ((:t5 >> 42) + 1 << 42) - 1 AS generation_end \gset
INSERT INTO fencing.resources (resource, holder, token, granted_at, expires_at, released)
VALUES ('clock:8', 'a', :generation_end - 1, now(), now(), true);
SELECT fencing.acquire('clock:8', 'b', '1 min') = :generation_end AS last_of_generation;
UPDATE fencing.resources SET released = true WHERE resource = 'clock:8';
SELECT fencing.acquire('clock:8', 'c', '1 min');
SELECT count(*) AS refused_changed_nothing FROM fencing.resources WHERE resource = 'clock:8' AND holder = 'b';

-- One margin per history, even if the first grant rolls back (its record
-- goes, the history stays seen): the next grant is one above the rolled-back
-- one.  test/isolation/specs/first_grant.spec: also while it is still open.
-- And a system that has no row takes its generations one above every
-- generation recorded by other systems (a restore of another system's dump
-- brings those rows): here a row of system 42 with generation 40.
\c :regress_db
DROP DATABASE fencing_clock;
CREATE DATABASE fencing_clock;
\c fencing_clock
CREATE EXTENSION fencing;
INSERT INTO fencing.token_timelines VALUES (42, 39, 1, now(), 40);
BEGIN;
SELECT fencing.acquire('clock:6', 'a', '1 min') AS t6 \gset
ROLLBACK;
SELECT count(*) AS timelines_after_rollback FROM fencing.token_timelines;
SELECT fencing.acquire('clock:7', 'a', '1 min') AS t7 \gset
SELECT :t7 = :t6 + 1 AS no_second_margin,
       :t7 >> 42 = 512 + 41 + (SELECT timeline_id FROM pg_control_checkpoint()) AS above_other_systems;
-- The record went with the rollback; the next reservation (a grant past the
-- window: here above a resource's last token set ahead by hand) makes it.
SELECT count(*) AS not_yet_recorded FROM fencing.token_timelines
WHERE system_identifier = (SELECT system_identifier FROM pg_control_system());
UPDATE fencing.resources SET released = true, token = :t7 + 2000 WHERE resource = 'clock:7';
SELECT fencing.acquire('clock:7', 'b', '1 min') = :t7 + 2001 AS reserved;
SELECT generation - timeline AS recorded_base, first_token = :t7 + 2001 AS first_of_reservation
FROM fencing.token_timelines
WHERE system_identifier = (SELECT system_identifier FROM pg_control_system());

-- No room for a generation past 2^53: refused, and nothing is issued.
\c :regress_db
DROP DATABASE fencing_clock;
CREATE DATABASE fencing_clock;
\c fencing_clock
CREATE EXTENSION fencing;
INSERT INTO fencing.token_timelines VALUES (42, 1, 1, now(), 1535);
SELECT fencing.acquire('clock:9', 'a', '1 min');
SELECT count(*) AS nothing_granted FROM fencing.resources WHERE token IS NOT NULL;

-- The margin is a superuser setting, between 0 and 1 hour.  (PostgreSQL 17
-- and later name the unit of the bounds too: expected/clock_1.out.)
SET fencing.failover_margin = '2h';
SET fencing.failover_margin = -1;
CREATE ROLE clock_user;
SET ROLE clock_user;
SET fencing.failover_margin = 0;
RESET ROLE;

-- fencing.grant_confirmation: with no standby at all, 'standby' and
-- 'synchronous' refuse grants and renewals (55000) and change nothing;
-- release() is never refused.  A superuser setting.
DELETE FROM fencing.token_timelines;
SELECT fencing.acquire('confirm:1', 'a', '1 min') AS c1 \gset
SET fencing.grant_confirmation = standby;
SELECT fencing.acquire('confirm:2', 'a', '1 min');
SELECT fencing.renew('confirm:1', 'a', :c1, '1 min');
SET fencing.grant_confirmation = synchronous;
SET fencing.standby_reply_timeout = '1 h';
SELECT fencing.acquire('confirm:2', 'a', '1 min');
SELECT fencing.renew('confirm:1', 'a', :c1, '1 min');
SELECT fencing.release('confirm:1', 'a', :c1) AS released;
SELECT count(*) AS refused_changed_nothing FROM fencing.resources WHERE resource = 'confirm:2';
SET fencing.grant_confirmation = whenever;
SET fencing.standby_reply_timeout = 0;
SET ROLE clock_user;
SET fencing.grant_confirmation = off;
SET fencing.standby_reply_timeout = '1 min';
RESET ROLE;
RESET fencing.grant_confirmation;
SELECT fencing.acquire('confirm:2', 'a', '1 min') > :c1 AS granted_when_off;

\c :regress_db
DROP DATABASE fencing_clock;
CREATE DATABASE fencing_clock;
\c fencing_clock
CREATE EXTENSION fencing;
-- fencing.high_water_mark(): the highest token in protected tables, marks,
-- floors and leases (not fences); 0 when there is none.  In a database of its own,
-- which the other tests' tokens do not reach.
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
-- A fence's token is the caller's: it does not move the reseed value, and
-- fence_high_water_mark() reports it apart.
SELECT fencing.high_water_mark() AS after_fence,
       fencing.fence_high_water_mark() AS fence_mark;
-- A role that owns nothing, with USAGE on the schema only: its fence near
-- 2^53 leaves high_water_mark() where it was.
CREATE ROLE hw_nobody;
GRANT USAGE ON SCHEMA fencing TO hw_nobody;
SET ROLE hw_nobody;
SELECT fencing.fence('hw:nobody', 9007199254740990) AS nobody_fenced;
SELECT fencing.fence_high_water_mark();
RESET ROLE;
SELECT fencing.high_water_mark() AS after_nobody_fence,
       fencing.fence_high_water_mark() AS fence_mark_after_nobody;
-- Nor through a temporary table of its own (TEMP is PUBLIC's on a
-- database): the marks of the keys it deletes and the floor of its TRUNCATE
-- do not count, as its rows do not, neither while it exists nor after
-- DISCARD TEMP dropped it (which no event trigger sees).
SET ROLE hw_nobody;
CREATE TEMP TABLE hw_nobody_temp (id int PRIMARY KEY);
SELECT fencing.protect('hw_nobody_temp');
BEGIN;
SET LOCAL fencing.token = 9050000000000000;
INSERT INTO hw_nobody_temp VALUES (1);
DELETE FROM hw_nobody_temp;
COMMIT;
BEGIN;
SET LOCAL fencing.token = 9050000000000001;
TRUNCATE hw_nobody_temp;
COMMIT;
RESET ROLE;
SELECT fencing.high_water_mark() AS after_nobody_temp;
DISCARD TEMP;
SELECT fencing.high_water_mark() AS after_nobody_temp_discarded;
INSERT INTO hw_custom VALUES (9000000000000006, 1);
SELECT fencing.high_water_mark() AS quoted_token_column;
-- Temporary tables cannot be protected (sql/guard_switch.sql): none counts.
CREATE TEMP TABLE hw_temp (id int PRIMARY KEY);
SELECT fencing.protect('hw_temp');
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
SELECT fencing.high_water_mark() = :lease_token AS lease_remains;

\c :regress_db
DROP DATABASE fencing_clock;
DROP ROLE clock_user;
DROP ROLE hw_nobody;
