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
SELECT t.marks(t.img(1)) AS job_1;

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
SELECT t.marks(t.img(1)) AS job_1, t.marks(t.img(2)) AS job_2, t.marks(t.img(3)) AS job_3;

-- An UPDATE that changes the key deletes the old key (its mark is recorded)
-- and creates the new one (its mark is checked).
BEGIN;
SET LOCAL fencing.token = 50;
UPDATE jobs SET id = 30 WHERE id = 3;
COMMIT;
SELECT t.marks(t.img(1)) AS job_1, t.marks(t.img(2)) AS job_2, t.marks(t.img(3)) AS job_3;
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
SELECT t.marks(t.img('A"1'), date_send('2026-12-24')) AS booking;
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
SELECT t.marks(t.img('y'), t.img(2)) AS reversed_y_2;
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
SELECT t.marks(numeric_send(1)) AS price_1;
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

-- A key's mark does not depend on any session setting.  A regclass key is a
-- table's OID, whatever search_path makes of its name.
CREATE SCHEMA s;
CREATE TABLE s.target_a (); CREATE TABLE public.target_a ();
CREATE TABLE reg_keys (rel regclass PRIMARY KEY, note text);
SELECT fencing.protect('reg_keys');
INSERT INTO reg_keys VALUES ('s.target_a', 'x', 90);
BEGIN;
SET LOCAL fencing.token = 100;
DELETE FROM reg_keys WHERE rel = 's.target_a'::regclass;
COMMIT;
\set VERBOSITY terse
SET search_path = s, public;
INSERT INTO reg_keys VALUES ('target_a', 'zombie', 50);
\echo :LAST_ERROR_SQLSTATE
RESET search_path;
INSERT INTO reg_keys VALUES ('s.target_a', 'zombie', 50);
\echo :LAST_ERROR_SQLSTATE
-- public.target_a is another table, hence another key.
INSERT INTO reg_keys VALUES ('public.target_a', 'other', 50);
\set VERBOSITY default
SELECT t.marks(oidsend('s.target_a'::regclass)) AS s_target_a;

-- Times, dates, floats, bytea and money, deleted under some settings and
-- re-inserted under others.
CREATE TABLE styled (at timestamptz, day date, f float8, b bytea, m money,
                     PRIMARY KEY (at, day, f, b, m));
SELECT fencing.protect('styled');
SET TimeZone = 'Asia/Tokyo'; SET DateStyle = 'SQL, DMY'; SET extra_float_digits = 0;
SET bytea_output = 'escape'; SET lc_monetary = 'C';
INSERT INTO styled VALUES ('2026-12-24 18:00', '24/12/2026', 0.1, '\x00ff', 12.5, 1);
BEGIN;
SET LOCAL fencing.token = 8;
DELETE FROM styled;
COMMIT;
RESET TimeZone; RESET DateStyle; RESET extra_float_digits; RESET bytea_output;
SET TimeZone = 'UTC';
INSERT INTO styled VALUES ('2026-12-24 09:00+00', '2026-12-24', 0.1, '\x00ff', 12.5, 7);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO styled VALUES ('2026-12-24 09:00+00', '2026-12-24', 0.1, '\x00ff', 12.5, 8);
RESET TimeZone;
SELECT count(*) AS rows FROM styled;

-- Strings are their bytes in the database encoding, not in the client's.
CREATE TABLE words (w text PRIMARY KEY);
SELECT fencing.protect('words');
SET client_encoding = 'LATIN1';
INSERT INTO words VALUES (convert_from('\xc3a9'::bytea, 'UTF8'), 3);
BEGIN;
SET LOCAL fencing.token = 4;
DELETE FROM words;
COMMIT;
RESET client_encoding;
INSERT INTO words VALUES (convert_from('\xc3a9'::bytea, 'UTF8'), 3);
\echo :LAST_ERROR_SQLSTATE
SELECT t.marks('\xc3a9'::bytea) AS e_acute;

-- char(n) padding and integer width do not make another key either: 'a' is
-- 'a   ', and an int key that becomes bigint keeps its marks.
CREATE TABLE codes (c char(4), n int, PRIMARY KEY (c, n));
SELECT fencing.protect('codes');
INSERT INTO codes VALUES ('a', 1, 5);
BEGIN;
SET LOCAL fencing.token = 6;
DELETE FROM codes;
COMMIT;
INSERT INTO codes VALUES ('a  ', 1, 5);
\echo :LAST_ERROR_SQLSTATE
-- (The guard's AFTER UPDATE trigger compares the key columns: unprotect the
-- table to change their type; its marks stay.)
ALTER TABLE codes ALTER COLUMN n TYPE bigint;
SELECT fencing.unprotect('codes');
ALTER TABLE codes ALTER COLUMN n TYPE bigint;
SELECT fencing.protect('codes');
INSERT INTO codes VALUES ('a', 1, 5);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO codes VALUES ('a', 1, 6);

-- Enums are named by their label (dump/restore renumbers their OIDs).
CREATE TYPE mood AS ENUM ('sad', 'happy');
CREATE TABLE moods (m mood PRIMARY KEY);
SELECT fencing.protect('moods');
INSERT INTO moods VALUES ('happy', 2);
BEGIN;
SET LOCAL fencing.token = 3;
DELETE FROM moods;
COMMIT;
INSERT INTO moods VALUES ('happy', 2);
\echo :LAST_ERROR_SQLSTATE
SELECT t.marks(t.img('happy')) AS happy;

-- Every key the table accepts can be deleted: a mark has a bounded size
-- (a 1,440-byte bytea, a 2,700-character text, a 200,000-character text that
-- the index stores compressed).
CREATE TABLE blobs (k bytea PRIMARY KEY);
SELECT fencing.protect('blobs');
INSERT INTO blobs VALUES (decode(repeat('ab', 1440), 'hex'), 1);
CREATE TABLE long_texts (k text PRIMARY KEY);
SELECT fencing.protect('long_texts');
INSERT INTO long_texts
SELECT string_agg(chr(65 + (g * 7919) % 26), ''), 1 FROM generate_series(1, 2700) g;
INSERT INTO long_texts VALUES (repeat('ab', 100000), 1);
BEGIN;
SET LOCAL fencing.token = 2;
DELETE FROM blobs;
DELETE FROM long_texts;
COMMIT;
SELECT relid, count(*), min(token) FROM fencing.deleted_keys
WHERE relid IN ('blobs'::regclass, 'long_texts'::regclass) GROUP BY 1 ORDER BY relid::text;
INSERT INTO blobs VALUES (decode(repeat('ab', 1440), 'hex'), 1);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO long_texts VALUES (repeat('ab', 100000), 1);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO long_texts VALUES (repeat('ab', 100000), 2);
DROP TABLE reg_keys, s.target_a, public.target_a, styled, words, codes, moods, blobs, long_texts;
DROP SCHEMA s;
DROP TYPE mood;

DROP TABLE jobs, bookings, bulk;

-- A key changed by another BEFORE UPDATE row trigger, not by the UPDATE's
-- SET list.  Without such triggers the guard's key check is AFTER UPDATE OF
-- the key columns; creating one (before or after the guard in firing order)
-- turns it into AFTER UPDATE WHEN the key changed, which sees the change.
CREATE FUNCTION move_key() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.v = 'move' THEN
		NEW.id := 2;
	END IF;
	RETURN NEW;
END
$$;
CREATE TABLE moved_first (id int PRIMARY KEY, v text);
CREATE TABLE moved_last (LIKE moved_first);
ALTER TABLE moved_last ADD PRIMARY KEY (id);
SELECT fencing.protect('moved_first'), fencing.protect('moved_last');
SELECT tgrelid::regclass, tgqual IS NOT NULL AS when_form, tgattr FROM pg_trigger
WHERE tgname = 'fencing_guard_key_changes' AND tgrelid IN ('moved_first'::regclass, 'moved_last'::regclass)
ORDER BY 1::text;
INSERT INTO moved_first VALUES (1, 'a', 10), (2, 'b', 10);
INSERT INTO moved_last VALUES (1, 'a', 10), (2, 'b', 10);
BEGIN;
SET LOCAL fencing.token = 50;
DELETE FROM moved_first WHERE id = 2;
DELETE FROM moved_last WHERE id = 2;
COMMIT;
CREATE TRIGGER a_move BEFORE UPDATE ON moved_first FOR EACH ROW EXECUTE FUNCTION move_key();
CREATE TRIGGER z_move BEFORE UPDATE ON moved_last FOR EACH ROW EXECUTE FUNCTION move_key();
SELECT tgrelid::regclass, tgqual IS NOT NULL AS when_form, tgattr FROM pg_trigger
WHERE tgname = 'fencing_guard_key_changes' AND tgrelid IN ('moved_first'::regclass, 'moved_last'::regclass)
ORDER BY 1::text;
-- Key 1 becomes key 2, deleted under 50: refused under 20, accepted under 60.
BEGIN;
SET LOCAL fencing.token = 20;
UPDATE moved_first SET v = 'move' WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = 20;
UPDATE moved_last SET v = 'move' WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = 60;
UPDATE moved_first SET v = 'move' WHERE id = 1;
UPDATE moved_last SET v = 'move' WHERE id = 1;
COMMIT;
SELECT * FROM moved_first UNION ALL SELECT * FROM moved_last;
-- A trigger created where the event trigger does not fire (replica role):
-- the guard refuses UPDATEs (55000) until protect() runs again; its hint
-- names the table's options, which protect() would otherwise reset.
CREATE TABLE moved_quietly (LIKE moved_first);
ALTER TABLE moved_quietly ADD PRIMARY KEY (id);
SELECT fencing.protect('moved_quietly', max_token => 1000);
INSERT INTO moved_quietly VALUES (1, 'a', 10), (2, 'b', 10);
BEGIN;
SET LOCAL fencing.token = 50;
DELETE FROM moved_quietly WHERE id = 2;
COMMIT;
SET session_replication_role = replica;
CREATE TRIGGER z_move BEFORE UPDATE ON moved_quietly FOR EACH ROW EXECUTE FUNCTION move_key();
RESET session_replication_role;
BEGIN;
SET LOCAL fencing.token = 20;
UPDATE moved_quietly SET v = 'move' WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT fencing.protect('moved_quietly', max_token => 1000);
BEGIN;
SET LOCAL fencing.token = 20;
UPDATE moved_quietly SET v = 'move' WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
-- A stored generated key column changes when its inputs do: AFTER UPDATE OF
-- the key columns fires for it too.
CREATE TABLE generated_keys (a int NOT NULL, id int GENERATED ALWAYS AS (a * 10) STORED PRIMARY KEY, v text);
SELECT fencing.protect('generated_keys');
INSERT INTO generated_keys (a, v, last_fencing_token) VALUES (1, 'x', 10), (2, 'y', 10);
BEGIN;
SET LOCAL fencing.token = 50;
DELETE FROM generated_keys WHERE a = 2;
COMMIT;
BEGIN;
SET LOCAL fencing.token = 20;
UPDATE generated_keys SET a = 2 WHERE a = 1;
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
-- The form follows triggers anywhere in the tree: a partition attached one
-- level down with its own trigger, a trigger on an unprotected parent of a
-- table protected on its own, a protected table attached under a parent
-- that has one.
CREATE TABLE deep (id int PRIMARY KEY, v text) PARTITION BY RANGE (id);
CREATE TABLE deep_mid PARTITION OF deep FOR VALUES FROM (0) TO (100) PARTITION BY RANGE (id);
CREATE TABLE deep_low PARTITION OF deep_mid FOR VALUES FROM (0) TO (50);
SELECT fencing.protect('deep');
CREATE TABLE deep_leaf (id int PRIMARY KEY, v text, last_fencing_token bigint NOT NULL DEFAULT 0);
CREATE TRIGGER z_move BEFORE UPDATE ON deep_leaf FOR EACH ROW EXECUTE FUNCTION move_key();
ALTER TABLE deep_mid ATTACH PARTITION deep_leaf FOR VALUES FROM (50) TO (100);
CREATE TABLE above (id int PRIMARY KEY, v text, last_fencing_token bigint NOT NULL DEFAULT 0) PARTITION BY RANGE (id);
CREATE TABLE above_1 PARTITION OF above FOR VALUES FROM (0) TO (100);
SELECT fencing.protect('above_1');
CREATE TRIGGER z_move BEFORE UPDATE ON above FOR EACH ROW EXECUTE FUNCTION move_key();
CREATE TABLE under (id int PRIMARY KEY, v text, last_fencing_token bigint NOT NULL DEFAULT 0) PARTITION BY RANGE (id);
CREATE TRIGGER z_move BEFORE UPDATE ON under FOR EACH ROW EXECUTE FUNCTION move_key();
CREATE TABLE under_1 (id int PRIMARY KEY, v text, last_fencing_token bigint NOT NULL DEFAULT 0);
SELECT fencing.protect('under_1');
ALTER TABLE under ATTACH PARTITION under_1 FOR VALUES FROM (0) TO (100);
SELECT tgrelid::regclass, tgqual IS NOT NULL AS when_form FROM pg_trigger
WHERE tgname = 'fencing_guard_key_changes' AND tgrelid IN ('deep'::regclass, 'above_1'::regclass, 'under_1'::regclass)
ORDER BY 1::text;
INSERT INTO deep VALUES (60, 'a', 10);
INSERT INTO above VALUES (1, 'a', 10), (2, 'b', 10);
INSERT INTO under VALUES (1, 'a', 10), (2, 'b', 10);
BEGIN;
SET LOCAL fencing.token = 50;
DELETE FROM above WHERE id = 2;
DELETE FROM under WHERE id = 2;
COMMIT;
BEGIN;
SET LOCAL fencing.token = 60;
UPDATE deep SET v = 'x' WHERE id = 60;
COMMIT;
BEGIN;
SET LOCAL fencing.token = 20;
UPDATE above SET v = 'move' WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = 20;
UPDATE under SET v = 'move' WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
-- Dropping the key column with CASCADE takes the key-change trigger along:
-- refused, saying why.
CREATE TABLE keyless (id int PRIMARY KEY, k2 int NOT NULL, v text);
SELECT fencing.protect('keyless');
ALTER TABLE keyless DROP COLUMN id CASCADE;
\echo :LAST_ERROR_SQLSTATE
DROP TABLE moved_first, moved_last, moved_quietly, generated_keys, deep, above, under, keyless;
DROP FUNCTION move_key();
