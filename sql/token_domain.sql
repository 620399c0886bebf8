-- One token domain: every entry point takes every positive bigint, up to
-- 2^63 - 1, and refuses NULL (22004) and zero or negative (22023) the same
-- way; no token a writer presents makes a later call - compaction included -
-- fail; and a refused token changes nothing.

CREATE ROLE regress_fencing_writer;
GRANT USAGE ON SCHEMA fencing TO regress_fencing_writer;
CREATE TABLE big (id int PRIMARY KEY, v text);
SELECT fencing.protect('big');
GRANT SELECT, INSERT, UPDATE, DELETE ON big TO regress_fencing_writer;
INSERT INTO big VALUES (1, 'one', 100), (2, 'two', 100), (3, 'three', 100);

-- A writer deletes a row under 2^63 - 1: its mark holds 2^63 - 1 ...
SET ROLE regress_fencing_writer;
BEGIN;
SET LOCAL fencing.token = 9223372036854775807;
DELETE FROM big WHERE id = 3;
COMMIT;
RESET ROLE;
SELECT t.mark('big', t.img(3)) AS mark;
-- ... and the owner still compacts the table (one above 2^63 - 1 saturates).
SELECT fencing.compact('big', 100) AS removed;
SELECT fencing.compact('big', 200) AS removed;
SELECT token AS floor FROM fencing.floors WHERE relid = 'big'::regclass;

-- A role with USAGE on schema fencing fences a resource at 2^63 - 1 ...
SET ROLE regress_fencing_writer;
SELECT fencing.fence('td:x', 9223372036854775807) AS previous;
RESET ROLE;
-- ... and resources are still compacted, under every prefix and under its own.
BEGIN;
SELECT fencing.compact_resources(100) IS NOT NULL AS compacted_everything;
ROLLBACK;
SELECT fencing.fence('td:low', 50) AS previous;
SELECT fencing.compact_resources(100, 'td:') AS removed;
SELECT resource, token FROM fencing.fences WHERE resource LIKE 'td:%' ORDER BY 1;
-- Leases are not fences: acquire() still grants on that resource, below 2^53.
SELECT token BETWEEN 100 AND 9007199254740991 AS granted
FROM (SELECT fencing.acquire('td:x', 'a', '1 hour') AS token OFFSET 0) g;
SELECT fencing.release('td:x', 'a', (SELECT token FROM fencing.resources WHERE resource = 'td:x'));

-- 2^63 - 1 through every entry point.
-- The guard: INSERT with the column and with fencing.token, UPDATE assigning
-- the column and with fencing.token, DELETE, TRUNCATE.
INSERT INTO big VALUES (10, 'column', 9223372036854775807);
BEGIN;
SET LOCAL fencing.token = 9223372036854775807;
INSERT INTO big VALUES (11, 'setting');
UPDATE big SET v = 'updated' WHERE id = 10;
COMMIT;
UPDATE big SET v = 'assigned', last_fencing_token = 9223372036854775807 WHERE id = 11;
SELECT id, v, last_fencing_token FROM big WHERE id >= 10 ORDER BY id;
-- Below it, the same rows are stale.
UPDATE big SET v = 'late', last_fencing_token = 9223372036854775806 WHERE id = 10;
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE big_truncated (id int PRIMARY KEY);
SELECT fencing.protect('big_truncated');
INSERT INTO big_truncated VALUES (1, 9223372036854775807);
BEGIN;
SET LOCAL fencing.token = 9223372036854775807;
TRUNCATE big_truncated;
COMMIT;
SELECT token AS truncate_floor FROM fencing.floors WHERE relid = 'big_truncated'::regclass;
-- fenced_update(): accepted at 2^63 - 1 (again, in monotonic mode), stale below.
SELECT fencing.fenced_update('big', '{"id": 1}', 9223372036854775807, '{"v": "fenced"}') AS applied;
SELECT fencing.fenced_update('big', '{"id": 1}', 9223372036854775807, '{"v": "again"}') AS applied;
SELECT fencing.fenced_update('big', '{"id": 1}', 9223372036854775806, '{"v": "late"}', 'skip') AS applied;
-- fence(): accepted again at 2^63 - 1, stale below.
SELECT fencing.fence('td:x', 9223372036854775807) AS previous;
SELECT t.error_of($$SELECT fencing.fence('td:x', 9223372036854775806)$$);
-- renew() and release(): no lease holds 2^63 - 1; nothing fails.
SELECT fencing.renew('td:x', 'a', 9223372036854775807, '1 hour') AS renewed;
SELECT fencing.release('td:x', 'a', 9223372036854775807) AS released;
-- fencing.token: 2^63 - 1 is a token, 2^63 is not a bigint.
SELECT t.error_of($$SET LOCAL fencing.token = 9223372036854775807$$);
SELECT t.error_of($$SET LOCAL fencing.token = 9223372036854775808$$);

-- compact() with a floor of 2^63 - 1: refused unless 2^63 - 2 or more was
-- seen (the server clock is far below), allowed then.
CREATE TABLE seen_low (id int PRIMARY KEY);
SELECT fencing.protect('seen_low');
INSERT INTO seen_low VALUES (1, 100);
BEGIN;
SET LOCAL fencing.token = 200;
DELETE FROM seen_low;
COMMIT;
SELECT t.error_of($$SELECT fencing.compact('seen_low', 9223372036854775807)$$);
SELECT t.error_of($$SELECT fencing.compact('seen_low', 9223372036854775806)$$);
-- No 2^53 cap below that: a floor is a token like any other.
CREATE TABLE seen_high (id int PRIMARY KEY);
SELECT fencing.protect('seen_high');
INSERT INTO seen_high VALUES (1, 9007199254740993), (2, 9223372036854775806);
BEGIN;
SET LOCAL fencing.token = 9007199254740993;
DELETE FROM seen_high WHERE id = 1;
COMMIT;
SELECT fencing.compact('seen_high', 9007199254740994) AS removed_above_2_53;
SELECT t.error_of($$SELECT fencing.compact('seen_high', 9223372036854775807)$$);
BEGIN;
SET LOCAL fencing.token = 9223372036854775806;
DELETE FROM seen_high WHERE id = 2;
COMMIT;
SELECT fencing.compact('seen_high', 9223372036854775807) AS removed;
-- The floor is 2^63 - 1 now: only 2^63 - 1 writes, and compacting again works.
INSERT INTO seen_high VALUES (3, 9223372036854775806);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO seen_high VALUES (3, 9223372036854775807);
SELECT fencing.compact('seen_high', 9223372036854775807) AS removed;
-- For resources: what the lock manager can issue (its generation and clock)
-- and the leases' tokens under the prefix - not the fences': any caller
-- picks a fence's token, and the floor is also acquire()'s least token.
SELECT t.error_of($$SELECT fencing.compact_resources(9223372036854775807, 'td:none:')$$);
SELECT fencing.fence('td:edge', 9223372036854775806) AS previous_is_the_floor_of_td;
SELECT t.error_of($$SELECT fencing.compact_resources(9223372036854775807, 'td:edge')$$);
-- So no floor leaves acquire() nothing to issue, and the grant is ordinary.
SELECT token BETWEEN 100 AND 9007199254740991 AS granted
FROM (SELECT fencing.acquire('td:edge', 'a', '1 hour') AS token OFFSET 0) g;
SELECT token BETWEEN 100 AND 9007199254740991 AS granted
FROM (SELECT fencing.acquire('td:after', 'a', '1 hour') AS token OFFSET 0) g;

-- NULL, zero and negative tokens, everywhere, and none changes anything.
CREATE FUNCTION pg_temp.state() RETURNS text LANGUAGE sql AS $$
	SELECT concat_ws(' | ',
		(SELECT string_agg(format('%s %s %s', id, v, last_fencing_token), ', ' ORDER BY id) FROM big),
		(SELECT string_agg(format('%s %s', relid::regclass, token), ', ' ORDER BY relid::regclass::text, token)
		 FROM fencing.deleted_keys WHERE relid::regclass::text IN ('big', 'seen_low', 'seen_high')),
		(SELECT string_agg(format('%s %s %s', relid::regclass, token, compacted), ', ' ORDER BY relid::regclass::text)
		 FROM fencing.floors WHERE relid::regclass::text IN ('big', 'seen_low', 'seen_high', 'big_truncated')),
		(SELECT string_agg(format('%s %s', resource, token), ', ' ORDER BY resource)
		 FROM fencing.fences WHERE resource LIKE 'td:%'),
		(SELECT string_agg(format('%s %s %s %s', resource, holder, token, released), ', ' ORDER BY resource)
		 FROM fencing.resources WHERE resource LIKE 'td:%'),
		(SELECT string_agg(format('%s %s', prefix, token), ', ' ORDER BY prefix)
		 FROM fencing.resource_floors WHERE prefix LIKE 'td:%'))
$$;
SELECT fencing.acquire('td:held', 'a', '1 hour') AS held \gset
SELECT pg_temp.state() AS state_before \gset
-- The guard, as the writer: a token column or fencing.token outside the domain.
SET ROLE regress_fencing_writer;
SELECT t.error_of($$INSERT INTO big VALUES (20, 'negative', -1)$$);
SELECT t.error_of($$UPDATE big SET last_fencing_token = 0 WHERE id = 1$$);
SELECT t.error_of($$UPDATE big SET last_fencing_token = -5 WHERE id = 1$$);
SELECT t.error_of($$UPDATE big SET last_fencing_token = NULL WHERE id = 1$$);
SELECT t.error_of($$SET LOCAL fencing.token = 0$$);
SELECT t.error_of($$SET LOCAL fencing.token = -1$$);
SELECT t.error_of($$SET LOCAL fencing.token = -9223372036854775808$$);
SELECT t.error_of($$SET LOCAL fencing.token = 'ten'$$);
-- fenced_update(), fence(), renew(), release().
SELECT t.error_of($$SELECT fencing.fenced_update('big', '{"id": 1}', NULL, '{"v": "x"}')$$);
SELECT t.error_of($$SELECT fencing.fenced_update('big', '{"id": 1}', 0, '{"v": "x"}')$$);
SELECT t.error_of($$SELECT fencing.fenced_update('big', '{"id": 1}', -9223372036854775808, '{"v": "x"}')$$);
SELECT t.error_of($$SELECT fencing.fence('td:x', NULL)$$);
SELECT t.error_of($$SELECT fencing.fence('td:new', 0)$$);
SELECT t.error_of($$SELECT fencing.fence('td:new', -1)$$);
SELECT t.error_of($$SELECT fencing.renew('td:held', 'a', NULL, '1 hour')$$);
SELECT t.error_of($$SELECT fencing.renew('td:held', 'a', 0, '1 hour')$$);
SELECT t.error_of($$SELECT fencing.renew('td:held', 'a', -1, '1 hour')$$);
SELECT t.error_of($$SELECT fencing.release('td:held', 'a', NULL)$$);
SELECT t.error_of($$SELECT fencing.release('td:held', 'a', 0)$$);
SELECT t.error_of($$SELECT fencing.release('td:held', 'a', -1)$$);
RESET ROLE;
-- compact() and compact_resources(), as the owner.
SELECT t.error_of($$SELECT fencing.compact('big', NULL)$$);
SELECT t.error_of($$SELECT fencing.compact('big', 0)$$);
SELECT t.error_of($$SELECT fencing.compact('big', -100)$$);
SELECT t.error_of($$SELECT fencing.compact_resources(NULL, 'td:')$$);
SELECT t.error_of($$SELECT fencing.compact_resources(0, 'td:')$$);
SELECT t.error_of($$SELECT fencing.compact_resources(-100, 'td:')$$);
SELECT t.error_of($$SELECT fencing.compact_resources(100, NULL)$$);
-- Refused floors change nothing either.
SELECT t.error_of($$SELECT fencing.compact('seen_low', 9223372036854775807)$$) IS NOT NULL AS refused;
SELECT t.error_of($$SELECT fencing.compact_resources(9223372036854775807, 'td:none:')$$) IS NOT NULL AS refused;
SELECT pg_temp.state() = :'state_before' AS unchanged;
-- And the lease is still held by its token.
SELECT fencing.release('td:held', 'a', :held) AS released;

-- compact_resources() is C now: SECURITY DEFINER with a pinned search_path,
-- not for PUBLIC.
SELECT l.lanname, p.prosecdef, p.proconfig, has_function_privilege('regress_fencing_writer', p.oid, 'EXECUTE') AS writer_may
FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
WHERE p.oid = 'fencing.compact_resources'::regproc;

DELETE FROM fencing.resource_floors WHERE prefix LIKE 'td:%';
DELETE FROM fencing.resources WHERE resource LIKE 'td:%';
DELETE FROM fencing.fences WHERE resource LIKE 'td:%';
DROP TABLE big, big_truncated, seen_low, seen_high;
REVOKE ALL ON SCHEMA fencing FROM regress_fencing_writer;
DROP ROLE regress_fencing_writer;
