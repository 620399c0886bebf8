-- TRUNCATE of a protected table presents a token as a DELETE of every row
-- would, and leaves the table a floor: no key can come back under a token
-- below the highest one the table held.

CREATE TABLE queue (id int PRIMARY KEY, job text);
SELECT fencing.protect('queue');
INSERT INTO queue VALUES (1, 'a', 10), (2, 'b', 12);
-- No token: 23T02, and nothing goes.
TRUNCATE queue;
\echo :LAST_ERROR_SQLSTATE
-- A token below a row's: 23T01.
BEGIN;
SET LOCAL fencing.token = 11;
TRUNCATE queue;
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT count(*) AS rows FROM queue;
-- A rolled-back TRUNCATE leaves no floor.
BEGIN;
SET LOCAL fencing.token = 90;
TRUNCATE queue;
ROLLBACK;
SELECT count(*) AS floors FROM fencing.floors WHERE relid = 'queue'::regclass;
-- A newer holder truncates; a stale holder cannot bring back any key, not
-- even one the table never had, by either token source, nor by upsert.
BEGIN;
SET LOCAL fencing.token = 20;
TRUNCATE queue;
COMMIT;
SELECT relid, token FROM fencing.floors WHERE relid = 'queue'::regclass;
INSERT INTO queue VALUES (1, 'zombie', 12);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO queue VALUES (7, 'never seen', 19);
\echo :LAST_ERROR_SQLSTATE
BEGIN;
SET LOCAL fencing.token = 19;
INSERT INTO queue VALUES (7, 'never seen');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
INSERT INTO queue VALUES (7, 'never seen', 19) ON CONFLICT (id) DO UPDATE SET job = excluded.job;
\echo :LAST_ERROR_SQLSTATE
-- fenced_update() on a missing key below the floor is stale, above it missing.
SELECT fencing.fenced_update('queue', '{"id": 1}', 19, '{"job": "x"}', 'skip');
SELECT t.error_of($$SELECT fencing.fenced_update('queue', '{"id": 1}', 21, '{"job": "x"}')$$);
-- The truncating holder (monotonic) and newer ones carry on.
INSERT INTO queue VALUES (1, 'again', 20), (2, 'later', 25);
SELECT * FROM queue ORDER BY id;
-- A floor never goes down: an older TRUNCATE of an empty table changes nothing.
BEGIN;
SET LOCAL fencing.token = 26;
DELETE FROM queue;
COMMIT;
BEGIN;
SET LOCAL fencing.token = 15;
TRUNCATE queue;
COMMIT;
SELECT relid, token FROM fencing.floors WHERE relid = 'queue'::regclass;

-- Strict mode: a TRUNCATE under a row's own token is a second write of that grant.
CREATE TABLE strict_queue (id int PRIMARY KEY);
SELECT fencing.protect('strict_queue', mode => 'strict');
INSERT INTO strict_queue VALUES (1, 5);
BEGIN;
SET LOCAL fencing.token = 5;
TRUNCATE strict_queue;
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = 6;
TRUNCATE strict_queue;
COMMIT;
INSERT INTO strict_queue VALUES (1, 6);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO strict_queue VALUES (1, 7);

-- TRUNCATE ... CASCADE and several tables: each protected table is checked.
CREATE TABLE parent (id int PRIMARY KEY);
CREATE TABLE child (id int PRIMARY KEY, parent_id int REFERENCES parent);
SELECT fencing.protect('child');
INSERT INTO parent VALUES (1);
INSERT INTO child VALUES (1, 1, 40);
TRUNCATE parent CASCADE;
\echo :LAST_ERROR_SQLSTATE
BEGIN;
SET LOCAL fencing.token = 41;
TRUNCATE parent, child;
COMMIT;
INSERT INTO child VALUES (1, NULL, 40);
\echo :LAST_ERROR_SQLSTATE

-- A role with TRUNCATE (and no SELECT) truncates with a token, checked
-- against rows it may not read, and the floor is recorded all the same.
INSERT INTO queue VALUES (3, 'c', 25);
CREATE ROLE regress_fencing_truncator;
GRANT USAGE ON SCHEMA fencing TO regress_fencing_truncator;
GRANT TRUNCATE ON queue TO regress_fencing_truncator;
SET ROLE regress_fencing_truncator;
BEGIN;
SET LOCAL fencing.token = 24;
TRUNCATE queue;
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = 30;
TRUNCATE queue;
COMMIT;
RESET ROLE;
SELECT relid, token FROM fencing.floors WHERE relid = 'queue'::regclass;

-- unprotect() takes the TRUNCATE guard away with the others; the floor stays.
SELECT fencing.unprotect('queue');
SELECT count(*) AS guards FROM pg_trigger WHERE tgrelid = 'queue'::regclass;
TRUNCATE queue;
SELECT fencing.protect('queue');
INSERT INTO queue VALUES (1, 'zombie', 29);
\echo :LAST_ERROR_SQLSTATE

-- A DBA's AFTER trigger on fencing.floors fires, and leaks nothing.
CREATE TABLE floor_audit (relid regclass, token bigint);
CREATE FUNCTION audit_floor() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO floor_audit VALUES (NEW.relid, NEW.token);
	RETURN NULL;
END
$$;
BEGIN;
CREATE TRIGGER audit AFTER INSERT OR UPDATE ON fencing.floors
	FOR EACH ROW EXECUTE FUNCTION audit_floor();
SET LOCAL fencing.token = 40;
TRUNCATE queue;
SELECT * FROM floor_audit;
ROLLBACK;
DROP TABLE floor_audit;
DROP FUNCTION audit_floor();

DROP TABLE queue, strict_queue, parent, child;
SELECT count(*) AS floors_left FROM fencing.floors f
WHERE NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = f.relid);
DROP OWNED BY regress_fencing_truncator;
DROP ROLE regress_fencing_truncator;
