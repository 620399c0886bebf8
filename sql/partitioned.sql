-- Partitioned tables: protect() reaches every partition, today's and tomorrow's.

CREATE TABLE events (region text, id int, payload text, PRIMARY KEY (region, id))
	PARTITION BY LIST (region);
CREATE TABLE events_eu PARTITION OF events FOR VALUES IN ('eu');
CREATE TABLE events_us PARTITION OF events FOR VALUES IN ('us');
INSERT INTO events VALUES ('eu', 1, 'a'), ('us', 1, 'b');
SELECT fencing.protect('events');
SELECT * FROM fencing.protected_tables WHERE relation::text LIKE 'events%';
-- The column and the guard reach every partition.
SELECT c.relname, a.attname IS NOT NULL AS has_column,
       (SELECT count(*) FROM pg_trigger t WHERE t.tgrelid = c.oid AND t.tgname = 'fencing_guard') AS guards
FROM pg_class c LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'last_fencing_token'
WHERE c.relname LIKE 'events%' AND c.relkind IN ('r', 'p') ORDER BY 1;

-- A partition attached later is guarded too.
CREATE TABLE events_ap PARTITION OF events FOR VALUES IN ('ap');
INSERT INTO events VALUES ('ap', 1, 'c');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO events VALUES ('ap', 1, 'c', 3);

-- Writes through the parent and through a partition are fenced alike.
SELECT fencing.fenced_update('events', '{"region": "eu", "id": 1}', 5, '{"payload": "eu@5"}');
SELECT fencing.fenced_update('events', '{"region": "eu", "id": 1}', 4, '{"payload": "eu@4"}');
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.fenced_update('events_eu', '{"region": "eu", "id": 1}', 4, '{"payload": "eu@4"}', 'skip');
UPDATE events_us SET payload = 'us@2', last_fencing_token = 2;
UPDATE events SET payload = 'us@1', last_fencing_token = 1 WHERE region = 'us';
\echo :LAST_ERROR_SQLSTATE

-- A multi-partition statement is all-or-nothing.
BEGIN;
SET LOCAL fencing.token = 3;
UPDATE events SET payload = payload || '!';
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT * FROM events ORDER BY region, id;

-- A deleted key's mark is kept under the partition that held the row and
-- under the partitioned table, and a new row is checked against both.
BEGIN;
SET LOCAL fencing.token = 9;
DELETE FROM events_eu WHERE id = 1;
COMMIT;
SELECT t.marks(t.img('eu'), t.img(1));
INSERT INTO events VALUES ('eu', 1, 'zombie', 8);
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.fenced_update('events', '{"region": "eu", "id": 1}', 8, '{}', 'skip');
INSERT INTO events_eu VALUES ('eu', 1, 'back', 9);
SELECT * FROM events ORDER BY region, id;

-- An UPDATE that moves a row to another partition is a DELETE + INSERT inside
-- PostgreSQL; the DELETE carries the UPDATE's token, and the old key's mark
-- is the UPDATE's token, never lower.
UPDATE events SET region = 'us', id = 2, last_fencing_token = 20 WHERE region = 'eu' AND id = 1;
SELECT tableoid::regclass, * FROM events WHERE id = 2;
SELECT t.marks(t.img('eu'), t.img(1));
BEGIN;
SET LOCAL fencing.token = 21;
UPDATE events SET region = 'eu' WHERE region = 'us' AND id = 2;
COMMIT;
SELECT tableoid::regclass, * FROM events WHERE id = 2;
INSERT INTO events VALUES ('eu', 1, 'zombie', 19);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO events VALUES ('us', 2, 'zombie', 20);
\echo :LAST_ERROR_SQLSTATE
SELECT t.marks(t.img('eu'), t.img(1)) AS eu_1, t.marks(t.img('us'), t.img(2)) AS us_2;

-- DETACH: the partition takes its marks along, and the table keeps its own.
BEGIN;
SET LOCAL fencing.token = 30;
DELETE FROM events WHERE region = 'eu' AND id = 2;
COMMIT;
ALTER TABLE events DETACH PARTITION events_eu;
-- Detached, it lost the guard PostgreSQL cloned into it (its TRUNCATE trigger
-- stays, inert); protected on its own, its marks apply again.
SELECT tgname FROM pg_trigger WHERE tgrelid = 'events_eu'::regclass ORDER BY 1;
TRUNCATE events_eu;
SELECT fencing.protect('events_eu');
INSERT INTO events_eu VALUES ('eu', 2, 'zombie', 29);
\echo :LAST_ERROR_SQLSTATE
-- A new partition for 'eu' starts empty, but the table's marks still refuse the key.
CREATE TABLE events_eu_new PARTITION OF events FOR VALUES IN ('eu');
INSERT INTO events VALUES ('eu', 2, 'zombie', 29);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO events VALUES ('eu', 2, 'fresh', 30);

-- ATTACH: a table brings its marks into the tree (unprotect it first: it
-- takes the partitioned table's guard).
CREATE TABLE events_sa (region text, id int, payload text, PRIMARY KEY (region, id));
SELECT fencing.protect('events_sa');
INSERT INTO events_sa VALUES ('sa', 1, 'x', 40);
BEGIN;
SET LOCAL fencing.token = 41;
DELETE FROM events_sa;
COMMIT;
ALTER TABLE events ATTACH PARTITION events_sa FOR VALUES IN ('sa');
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.unprotect('events_sa');
ALTER TABLE events ATTACH PARTITION events_sa FOR VALUES IN ('sa');
INSERT INTO events VALUES ('sa', 1, 'zombie', 40);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO events VALUES ('sa', 1, 'back', 41);
-- Attached and created partitions got their TRUNCATE guard.
SELECT c.relname, count(t.tgname) AS truncate_guards
FROM pg_class c LEFT JOIN pg_trigger t ON t.tgrelid = c.oid AND t.tgname = 'fencing_guard_truncate'
WHERE c.relname LIKE 'events%' AND c.relkind IN ('r', 'p') GROUP BY 1 ORDER BY 1;

-- TRUNCATE of a partition presents a token as a DELETE of its rows would,
-- and leaves a floor for that partition only.
BEGIN;
SET LOCAL fencing.token = 5;
TRUNCATE events_us;
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = 50;
TRUNCATE events_us;
COMMIT;
INSERT INTO events VALUES ('us', 9, 'old', 49);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO events VALUES ('eu', 9, 'other partition', 49);
-- TRUNCATE of the partitioned table reaches every partition.
TRUNCATE events;
\echo :LAST_ERROR_SQLSTATE
BEGIN;
SET LOCAL fencing.token = 48;
TRUNCATE events;
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = 60;
TRUNCATE events;
COMMIT;
SELECT relid, token FROM fencing.floors WHERE relid::text LIKE 'events%' ORDER BY relid::text;
INSERT INTO events VALUES ('ap', 7, 'old', 59);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO events VALUES ('ap', 7, 'new', 60);
SELECT * FROM events ORDER BY region, id;

-- A partition's guard comes from its table: unprotect() refuses it there,
-- and its TRUNCATE guard stays.
SELECT fencing.unprotect('events_ap');
\echo :LAST_ERROR_SQLSTATE
TRUNCATE events_ap;
\echo :LAST_ERROR_SQLSTATE
-- An unprotected table takes no guard away from a partition protected on its own.
CREATE TABLE shelves (id int PRIMARY KEY, last_fencing_token bigint NOT NULL DEFAULT 0)
	PARTITION BY RANGE (id);
CREATE TABLE shelves_1 PARTITION OF shelves FOR VALUES FROM (0) TO (100);
SELECT fencing.protect('shelves_1');
SELECT fencing.unprotect('shelves');
TRUNCATE shelves_1;
\echo :LAST_ERROR_SQLSTATE
SELECT relation FROM fencing.protected_tables WHERE relation::text LIKE 'shelves%';
DROP TABLE shelves;

SELECT fencing.unprotect('events');
SELECT count(*) AS guards FROM pg_trigger WHERE tgname = 'fencing_guard'
  AND tgrelid IN (SELECT oid FROM pg_class WHERE relname LIKE 'events%');

-- Dropping the tables forgets their marks and floors.
DROP TABLE events, events_eu;
SELECT count(*) AS marks_left FROM fencing.deleted_keys d
WHERE NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = d.relid);
SELECT count(*) AS floors_left FROM fencing.floors d
WHERE NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = d.relid);
