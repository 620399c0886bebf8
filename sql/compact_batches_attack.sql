-- fencing.compact_in_batches() and compact_resources_in_batches() under
-- attack: contexts that cannot commit, shadows in search_path, LIKE
-- metacharacters in a prefix, a huge batch size.

CREATE TABLE jobs (id int PRIMARY KEY, state text);
SELECT fencing.protect('jobs');
INSERT INTO jobs SELECT g, 'queued', 100 + g FROM generate_series(1, 6) g;
DO $$
BEGIN
	FOR k IN 1..6 LOOP
		PERFORM set_config('fencing.token', (100 + k)::text, true);
		DELETE FROM jobs WHERE id = k;
	END LOOP;
END
$$;

-- A block with an exception handler runs in a subtransaction, which cannot
-- commit: refused before the table is locked or its floor raised, with the
-- procedure's own message, and nothing changes.
DO $$
DECLARE n bigint;
BEGIN
	CALL fencing.compact_in_batches('jobs', 104, 10, n);
EXCEPTION WHEN OTHERS THEN
	RAISE NOTICE '% %', SQLSTATE, SQLERRM;
END $$;
DO $$
DECLARE n bigint;
BEGIN
	CALL fencing.compact_resources_in_batches(104, '', 10, n);
EXCEPTION WHEN OTHERS THEN
	RAISE NOTICE '% %', SQLSTATE, SQLERRM;
END $$;
SELECT count(*) AS floors FROM fencing.floors WHERE relid = 'jobs'::regclass;
SELECT count(*) AS marks FROM fencing.deleted_keys WHERE relid = 'jobs'::regclass;
-- A procedure with a SET clause cannot commit either.
CREATE PROCEDURE compact_with_set() LANGUAGE plpgsql SET work_mem = '4MB' AS $$
DECLARE n bigint;
BEGIN
	CALL fencing.compact_in_batches('jobs', 104, 10, n);
END $$;
CALL compact_with_set();
\echo :LAST_ERROR_SQLSTATE
-- A cursor loop may commit: each call compacts.
DO $$
DECLARE r record; n bigint;
BEGIN
	FOR r IN SELECT b FROM unnest(ARRAY[103, 105]) b ORDER BY b LOOP
		CALL fencing.compact_in_batches('jobs', r.b, 1, n);
		RAISE NOTICE 'below %: removed %', r.b, n;
	END LOOP;
END $$;
SELECT token, compacted FROM fencing.floors WHERE relid = 'jobs'::regclass;
SELECT count(*) AS marks FROM fencing.deleted_keys WHERE relid = 'jobs'::regclass;
-- The largest batch size: one batch.
CALL fencing.compact_in_batches('jobs', 106, 2147483647);
SELECT count(*) AS marks FROM fencing.deleted_keys WHERE relid = 'jobs'::regclass;

-- A table owner with shadows of every operator and function the
-- compaction's SQL could name, first in search_path: none of them runs.
CREATE ROLE regress_fencing_shadow;
GRANT USAGE ON SCHEMA fencing TO regress_fencing_shadow;
CREATE SCHEMA shadow AUTHORIZATION regress_fencing_shadow;
ALTER TABLE jobs OWNER TO regress_fencing_shadow;
BEGIN;
SET LOCAL fencing.token = 200;
INSERT INTO jobs VALUES (7, 'x', 200), (8, 'x', 200);
DELETE FROM jobs WHERE id IN (7, 8);
COMMIT;
-- The extension owner lets the role compact resources.
SELECT fencing.fence('shadow:1', 10);
GRANT EXECUTE ON PROCEDURE fencing.compact_resources_in_batches(bigint, text, integer, bigint)
	TO regress_fencing_shadow;
SET ROLE regress_fencing_shadow;

CREATE FUNCTION shadow.caught() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'shadow evaluated as %', current_user;
END $$;
CREATE FUNCTION shadow.b2(bigint, bigint) RETURNS boolean LANGUAGE sql AS 'SELECT shadow.caught()';
CREATE FUNCTION shadow.y2(bytea, bytea) RETURNS boolean LANGUAGE sql AS 'SELECT shadow.caught()';
CREATE FUNCTION shadow.t2(text, text) RETURNS boolean LANGUAGE sql AS 'SELECT shadow.caught()';
CREATE FUNCTION shadow.r2(regclass, regclass) RETURNS boolean LANGUAGE sql AS 'SELECT shadow.caught()';
CREATE FUNCTION shadow.d2(tid, tid) RETURNS boolean LANGUAGE sql AS 'SELECT shadow.caught()';
CREATE OPERATOR shadow.< (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = shadow.b2);
CREATE OPERATOR shadow.>= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = shadow.b2);
CREATE OPERATOR shadow.> (LEFTARG = bytea, RIGHTARG = bytea, FUNCTION = shadow.y2);
CREATE OPERATOR shadow.> (LEFTARG = text, RIGHTARG = text, FUNCTION = shadow.t2);
CREATE OPERATOR shadow.= (LEFTARG = regclass, RIGHTARG = regclass, FUNCTION = shadow.r2);
CREATE OPERATOR shadow.= (LEFTARG = tid, RIGHTARG = tid, FUNCTION = shadow.d2);
CREATE FUNCTION shadow.starts_with(text, text) RETURNS boolean LANGUAGE sql AS 'SELECT shadow.caught()';
CREATE FUNCTION shadow.clock_timestamp() RETURNS timestamptz LANGUAGE sql
	AS 'SELECT CASE WHEN shadow.caught() THEN now() END';
CREATE FUNCTION shadow.now() RETURNS timestamptz LANGUAGE sql
	AS 'SELECT CASE WHEN shadow.caught() THEN pg_catalog.now() END';
SET search_path = shadow, pg_catalog, public;
CALL fencing.compact_in_batches('jobs', 201, 1);
SELECT fencing.compact('jobs', 201) AS removed;
CALL fencing.compact_resources_in_batches(50, 'shadow:', 1);
RESET search_path;
RESET ROLE;
SELECT count(*) AS marks FROM fencing.deleted_keys WHERE relid = 'jobs'::regclass;

-- A prefix is a prefix, not a LIKE pattern: % and _ match themselves.
SELECT fencing.fence('lk%a', 100), fencing.fence('lk_b', 100), fencing.fence('lkxc', 100),
       fencing.fence('lk\d', 100);
CALL fencing.compact_resources_in_batches(101, 'lk%', 1);
CALL fencing.compact_resources_in_batches(101, 'lk\', 1);
SELECT resource FROM fencing.fences WHERE resource LIKE 'lk%' ORDER BY 1;
SELECT prefix, token FROM fencing.resource_floors ORDER BY 1;
\set VERBOSITY sqlstate
SELECT fencing.fence('lk%z', 100);
\set VERBOSITY default
SELECT fencing.fence('lkyz', 100) AS previous;

DELETE FROM fencing.resource_floors;
DELETE FROM fencing.fences WHERE resource LIKE 'lk%';
DROP TABLE jobs;
DROP PROCEDURE compact_with_set();
DROP SCHEMA shadow CASCADE;
REVOKE ALL ON PROCEDURE fencing.compact_resources_in_batches(bigint, text, integer, bigint)
	FROM regress_fencing_shadow;
REVOKE ALL ON SCHEMA fencing FROM regress_fencing_shadow;
DROP ROLE regress_fencing_shadow;
