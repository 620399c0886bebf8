-- fencing.stats: accepted and rejected writes per protected relation and
-- fenced resource, counted in shared memory across backends (with
-- shared_preload_libraries = 'fencing'; without it the view is empty).

CREATE TABLE counted (id int PRIMARY KEY, v text);
SELECT fencing.protect('counted');
CREATE TABLE counted_parts (id int, part int, PRIMARY KEY (id, part)) PARTITION BY LIST (part);
CREATE TABLE counted_parts_1 PARTITION OF counted_parts FOR VALUES IN (1);
SELECT fencing.protect('counted_parts');
SELECT fencing.stats_reset();

INSERT INTO counted VALUES (1, 'a', 5), (2, 'b', 5);
-- A write rolled back is not counted.
BEGIN;
INSERT INTO counted VALUES (3, 'c', 5);
ROLLBACK;
UPDATE counted SET v = 'x', last_fencing_token = 4 WHERE id = 1;
UPDATE counted SET v = 'x' WHERE id = 2;
SELECT fencing.fenced_update('counted', '{"id": 1}', 3, '{}', 'skip');
SELECT fencing.fence('counted:resource', 10);
SELECT fencing.fence('counted:resource', 9);
-- Writes to a partition count for the protected (partitioned) table.
INSERT INTO counted_parts_1 VALUES (1, 1, 2);
-- Another backend's writes land in the same counters.
\c -
INSERT INTO counted VALUES (4, 'd', 6);
SELECT relation, resource, writes_accepted, stale_rejections, missing_token_rejections,
       last_rejection_kind, last_rejection_key, last_rejection_presented, last_rejection_stored,
       last_rejection_at IS NOT NULL AS rejected, stats_reset <= now() AS reset_before
FROM fencing.stats
WHERE relation IN ('counted'::regclass, 'counted_parts'::regclass) OR resource LIKE 'counted%'
ORDER BY relation::text, resource;

-- fencing.stats = off (superuser): nothing is counted.
SET fencing.stats = off;
INSERT INTO counted VALUES (5, 'e', 6);
RESET fencing.stats;
SELECT writes_accepted FROM fencing.stats WHERE relation = 'counted'::regclass;

-- fencing.log_rejections: one LOG line per rejection (here sent to the client too).
SET fencing.log_rejections = 'stale';
SET client_min_messages = 'log';
UPDATE counted SET v = 'y', last_fencing_token = 1 WHERE id = 4;
UPDATE counted SET v = 'y' WHERE id = 4;
SET fencing.log_rejections = 'all';
UPDATE counted SET v = 'y' WHERE id = 4;
RESET client_min_messages;
RESET fencing.log_rejections;
-- A token above the table's max_token (22023) is logged as a stale one is
-- (log_rejections 'stale' or 'all') and not counted: the counters are the
-- refusals by the stored token.
CREATE TABLE ceilinged (id int PRIMARY KEY, v text);
SELECT fencing.protect('ceilinged', max_token => 100);
INSERT INTO ceilinged VALUES (1, 'a', 10);
SELECT fencing.stats_reset();
SET fencing.log_rejections = 'stale';
SET client_min_messages = 'log';
UPDATE ceilinged SET v = 'b', last_fencing_token = 101 WHERE id = 1;
INSERT INTO ceilinged VALUES (2, 'a', 1000);
SET fencing.log_rejections = 'off';
UPDATE ceilinged SET v = 'b', last_fencing_token = 101 WHERE id = 1;
RESET client_min_messages;
RESET fencing.log_rejections;
SELECT writes_accepted, stale_rejections, missing_token_rejections, last_rejection_kind
FROM fencing.stats WHERE relation = 'ceilinged'::regclass;
DROP TABLE ceilinged;

-- Savepoints: writes rolled back to a savepoint are not counted, a released
-- savepoint's join its parent's and count when the transaction commits.
SELECT fencing.stats_reset();
BEGIN;
INSERT INTO counted VALUES (10, 'f', 7);
SAVEPOINT a;
INSERT INTO counted VALUES (11, 'f', 7), (12, 'f', 7);
ROLLBACK TO SAVEPOINT a;
INSERT INTO counted VALUES (13, 'f', 7);
RELEASE SAVEPOINT a;
-- Nested: an inner savepoint rolled back inside an outer one released ...
SAVEPOINT b;
INSERT INTO counted VALUES (14, 'f', 7);
SAVEPOINT c;
INSERT INTO counted VALUES (15, 'f', 7);
ROLLBACK TO SAVEPOINT c;
SAVEPOINT d;
INSERT INTO counted VALUES (16, 'f', 7);
RELEASE SAVEPOINT d;
RELEASE SAVEPOINT b;
-- ... and an inner one released inside an outer one rolled back.
SAVEPOINT e;
INSERT INTO counted VALUES (17, 'f', 7);
SAVEPOINT f;
INSERT INTO counted VALUES (18, 'f', 7);
RELEASE SAVEPOINT f;
ROLLBACK TO SAVEPOINT e;
-- Counters first used inside a savepoint: a partitioned table's and a resource's.
SAVEPOINT g;
INSERT INTO counted_parts_1 VALUES (5, 1, 3);
SELECT fencing.fence('counted:savepoint', 1);
ROLLBACK TO SAVEPOINT g;
SELECT fencing.fence('counted:savepoint', 2);
SAVEPOINT h;
INSERT INTO counted_parts_1 VALUES (6, 1, 3);
RELEASE SAVEPOINT h;
-- A rejection is counted at once, also when its savepoint is rolled back.
SAVEPOINT i;
UPDATE counted SET v = 'z', last_fencing_token = 1 WHERE id = 10;
ROLLBACK TO SAVEPOINT i;
COMMIT;
-- A transaction rolled back counts nothing, released savepoints or not.
BEGIN;
SAVEPOINT j;
INSERT INTO counted VALUES (19, 'f', 7);
RELEASE SAVEPOINT j;
ROLLBACK;
-- counted: 10, 13, 14, 16 accepted, one stale; counted_parts: 6; the resource: token 2.
SELECT array_agg(id ORDER BY id) AS committed FROM counted WHERE id >= 10;
SELECT relation, resource, writes_accepted, stale_rejections
FROM fencing.stats
WHERE relation IN ('counted'::regclass, 'counted_parts'::regclass) OR resource LIKE 'counted%'
ORDER BY relation::text, resource;

-- PL/pgSQL EXCEPTION blocks are subtransactions too.
SELECT fencing.stats_reset();
DO $$
BEGIN
	INSERT INTO counted VALUES (20, 'h', 7);
	BEGIN
		INSERT INTO counted VALUES (21, 'h', 7);
		RAISE EXCEPTION 'undone';
	EXCEPTION WHEN raise_exception THEN
		NULL;
	END;
	BEGIN
		INSERT INTO counted VALUES (22, 'h', 7);
	EXCEPTION WHEN others THEN
		NULL;
	END;
END
$$;
-- One statement's writes around subtransactions of a function it calls: the
-- function's rolled-back writes are not counted, the statement's are.
CREATE FUNCTION counted_inner(id int, undo bool) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	BEGIN
		INSERT INTO counted VALUES (id + 100, 'inner', 7);
		IF undo THEN
			RAISE EXCEPTION 'undone';
		END IF;
	EXCEPTION WHEN raise_exception THEN
		NULL;
	END;
	RETURN 'outer';
END
$$;
INSERT INTO counted SELECT g, counted_inner(g, true), 7 FROM generate_series(30, 32) g;
INSERT INTO counted SELECT g, counted_inner(g, false), 7 FROM generate_series(40, 41) g;
-- counted: 20, 22, 30-32, 40, 41, 140, 141.
SELECT array_agg(id ORDER BY id) AS committed FROM counted WHERE id >= 20;
SELECT writes_accepted FROM fencing.stats WHERE relation = 'counted'::regclass;
DROP FUNCTION counted_inner;

-- Reading needs the owner or pg_read_all_stats; resetting, the owner.
CREATE ROLE regress_fencing_monitor;
GRANT USAGE ON SCHEMA fencing TO regress_fencing_monitor;
SET ROLE regress_fencing_monitor;
SELECT t.error_of($$SELECT * FROM fencing.stats$$);
SELECT t.error_of($$SELECT fencing.stats_reset()$$);
RESET ROLE;
GRANT pg_read_all_stats TO regress_fencing_monitor;
SET ROLE regress_fencing_monitor;
SELECT count(*) > 0 AS readable FROM fencing.stats;
RESET ROLE;
SELECT fencing.stats_reset();
SELECT writes_accepted, stale_rejections, missing_token_rejections, last_rejection_at
FROM fencing.stats WHERE relation = 'counted'::regclass;
DROP OWNED BY regress_fencing_monitor;
DROP ROLE regress_fencing_monitor;
DROP TABLE counted, counted_parts;
