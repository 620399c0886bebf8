-- A deleted key's high-water mark outlives the row: a stale holder cannot
-- resurrect a row that a newer holder deleted.

CREATE TABLE jobs (id int PRIMARY KEY, state text);
SELECT fencing.protect('jobs');
INSERT INTO jobs VALUES (1, 'queued', 33), (2, 'queued', 33), (3, 'queued', 33);

-- B (token 34) deletes job 1.
BEGIN;
SET LOCAL fencing.token = 34;
DELETE FROM jobs WHERE id = 1;
COMMIT;
SELECT relid, key, token FROM fencing.deleted_keys WHERE relid = 'jobs'::regclass;

-- A (token 33) wakes and re-inserts it: rejected, by either token source.
INSERT INTO jobs VALUES (1, 'zombie', 33);
\echo :LAST_ERROR_SQLSTATE
BEGIN;
SET LOCAL fencing.token = 33;
INSERT INTO jobs VALUES (1, 'zombie');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
-- A's fenced_update on the deleted key is stale, not missing.
SELECT fencing.fenced_update('jobs', '{"id": 1}', 33, '{"state": "done"}');
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.fenced_update('jobs', '{"id": 1}', 33, '{"state": "done"}', on_stale => 'skip');
-- A newer holder may update a deleted key?  No row: P0002.
SELECT fencing.fenced_update('jobs', '{"id": 1}', 35, '{"state": "done"}');
\echo :LAST_ERROR_SQLSTATE
-- A key that never existed is simply missing.
SELECT fencing.fenced_update('jobs', '{"id": 42}', 1, '{"state": "done"}');
\echo :LAST_ERROR_SQLSTATE
-- The holder that deleted it (monotonic) and newer ones may re-insert it.
INSERT INTO jobs VALUES (1, 'requeued', 34);
SELECT * FROM jobs WHERE id = 1;

-- Strict mode: re-inserting under the deleting token is a second write under one grant.
SELECT fencing.protect('jobs', mode => 'strict');
BEGIN;
SET LOCAL fencing.token = 40;
DELETE FROM jobs WHERE id = 2;
INSERT INTO jobs VALUES (2, 'again');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = 40;
DELETE FROM jobs WHERE id = 2;
COMMIT;
INSERT INTO jobs VALUES (2, 'again', 40);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO jobs VALUES (2, 'again', 41);
SELECT fencing.protect('jobs');

-- A rolled-back DELETE leaves no mark.
BEGIN;
SET LOCAL fencing.token = 90;
DELETE FROM jobs WHERE id = 3;
ROLLBACK;
SELECT key, token FROM fencing.deleted_keys WHERE relid = 'jobs'::regclass ORDER BY key;

-- An UPDATE that changes the key deletes the old key (its mark is recorded)
-- and creates the new one (its mark is checked).
BEGIN;
SET LOCAL fencing.token = 50;
UPDATE jobs SET id = 30 WHERE id = 3;
COMMIT;
SELECT key, token FROM fencing.deleted_keys WHERE relid = 'jobs'::regclass ORDER BY key;
INSERT INTO jobs VALUES (3, 'zombie', 49);
\echo :LAST_ERROR_SQLSTATE
-- Row 2 holds 41, so 45 passes the row, but key 3 was deleted under 50.
UPDATE jobs SET id = 3, last_fencing_token = 45 WHERE id = 2;
\echo :LAST_ERROR_SQLSTATE
UPDATE jobs SET id = 1, last_fencing_token = 45 WHERE id = 30;  -- key 1's row holds 34, but 30 holds 50
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM jobs ORDER BY id;

-- Keys are compared by value: a composite key with text and dates.
CREATE TABLE bookings (room text, day date, guest text, PRIMARY KEY (room, day));
SELECT fencing.protect('bookings');
INSERT INTO bookings VALUES ('A"1', '2026-12-24', 'ann', 7);
BEGIN;
SET LOCAL fencing.token = 8;
DELETE FROM bookings;
COMMIT;
SELECT key, token FROM fencing.deleted_keys WHERE relid = 'bookings'::regclass;
SELECT fencing.fenced_update('bookings', '{"room": "A\"1", "day": "2026-12-24"}', 7, '{"guest": "bob"}');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bookings VALUES ('A"1', '2026-12-24', 'bob', 7);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bookings VALUES ('A"1', '2026-12-25', 'bob', 7);
SELECT * FROM bookings;

-- A key declared in another order than its columns: the guard and
-- fenced_update() name it the same way.
CREATE TABLE reversed (a int, b text, v text, PRIMARY KEY (b, a));
SELECT fencing.protect('reversed');
INSERT INTO reversed VALUES (1, 'x', 'one', 5), (2, 'y', 'two', 5);
SELECT fencing.fenced_update('reversed', '{"a": 1, "b": "x"}', 6, '{"v": "one@6"}');
SELECT fencing.fenced_update('reversed', '{"b": "x", "a": 1}', 5, '{"v": "late"}', 'skip');
BEGIN;
SET LOCAL fencing.token = 7;
DELETE FROM reversed WHERE a = 2;
COMMIT;
SELECT key, token FROM fencing.deleted_keys WHERE relid = 'reversed'::regclass;
SELECT fencing.fenced_update('reversed', '{"a": 2, "b": "y"}', 6, '{"v": "zombie"}');
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.fenced_update('reversed', '{"a": 2, "b": "y"}', 8, '{"v": "zombie"}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM reversed;
DROP TABLE reversed;

-- numeric and float keys: equal values spelled differently are one key.
CREATE TABLE prices (amount numeric PRIMARY KEY, temp float8 UNIQUE);
SELECT fencing.protect('prices');
INSERT INTO prices VALUES (1.0, -0.0, 5);
BEGIN;
SET LOCAL fencing.token = 6;
DELETE FROM prices;
COMMIT;
SELECT key, token FROM fencing.deleted_keys WHERE relid = 'prices'::regclass;
INSERT INTO prices VALUES (1.00, 0, 5);
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.fenced_update('prices', '{"amount": 1.000}', 5, '{}', 'skip');
CREATE TABLE temps (t float8 PRIMARY KEY);
SELECT fencing.protect('temps');
INSERT INTO temps VALUES (-0.0, 5);
BEGIN;
SET LOCAL fencing.token = 6;
DELETE FROM temps;
COMMIT;
INSERT INTO temps VALUES (0, 5);
\echo :LAST_ERROR_SQLSTATE
DROP TABLE prices, temps;

-- Ordinary users cannot read or forge marks.
SELECT has_table_privilege('public', 'fencing.deleted_keys', 'SELECT') AS public_select,
       has_table_privilege('public', 'fencing.deleted_keys', 'INSERT') AS public_insert;

-- A bulk DELETE records every mark in one statement (no per-key locks to run out of).
CREATE TABLE bulk (id int PRIMARY KEY);
SELECT fencing.protect('bulk');
INSERT INTO bulk SELECT g, 1 FROM generate_series(1, 20000) g;
BEGIN;
SET LOCAL fencing.token = 2;
DELETE FROM bulk;
COMMIT;
SELECT count(*) AS marks, min(token), max(token) FROM fencing.deleted_keys WHERE relid = 'bulk'::regclass;
INSERT INTO bulk SELECT g, 1 FROM generate_series(19990, 20000) g;
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bulk SELECT g, 2 FROM generate_series(1, 20000) g;
SELECT count(*) FROM bulk;

DROP TABLE jobs, bookings, bulk;
