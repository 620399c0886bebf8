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

-- Deleted keys are remembered for the partitioned table as a whole.
BEGIN;
SET LOCAL fencing.token = 9;
DELETE FROM events_eu WHERE id = 1;
COMMIT;
SELECT relid, key, token FROM fencing.deleted_keys WHERE relid = 'events'::regclass;
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
SELECT key, token FROM fencing.deleted_keys WHERE relid = 'events'::regclass ORDER BY key;
BEGIN;
SET LOCAL fencing.token = 21;
UPDATE events SET region = 'eu' WHERE region = 'us' AND id = 2;
COMMIT;
SELECT tableoid::regclass, * FROM events WHERE id = 2;
INSERT INTO events VALUES ('eu', 1, 'zombie', 19);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO events VALUES ('us', 2, 'zombie', 20);
\echo :LAST_ERROR_SQLSTATE
SELECT key, token FROM fencing.deleted_keys WHERE relid = 'events'::regclass ORDER BY key;

SELECT fencing.unprotect('events');
SELECT count(*) AS guards FROM pg_trigger WHERE tgname = 'fencing_guard'
  AND tgrelid IN (SELECT oid FROM pg_class WHERE relname LIKE 'events%');

-- Dropping the table forgets its marks.
DROP TABLE events;
SELECT count(*) AS marks_left FROM fencing.deleted_keys d
WHERE NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = d.relid);
