-- A write presents only its own token (docs/design.md, the storage guard).  Two statement shapes let
-- one row's token reach another write of the same statement, and only
-- there: the UPDATE of INSERT ... ON CONFLICT DO UPDATE, to the conflicting
-- row with the proposed key, and the DELETE half of an UPDATE that moves a
-- row to another partition.  Everything that merely looks like them finds
-- no token to borrow: 23T02.

CREATE TABLE ledger (id int PRIMARY KEY, email text UNIQUE, v text);
SELECT fencing.protect('ledger');
INSERT INTO ledger VALUES (1, 'a@x', 'one', 10), (2, 'b@x', 'two', 10);

-- Upsert: the conflicting row with the proposed key takes the proposed token.
INSERT INTO ledger VALUES (1, 'a@x', 'upserted', 20) ON CONFLICT (id) DO UPDATE SET v = excluded.v;
SELECT * FROM ledger WHERE id = 1;
-- ... and a stale proposal is refused like any stale UPDATE.
INSERT INTO ledger VALUES (1, 'a@x', 'late', 19) ON CONFLICT (id) DO UPDATE SET v = excluded.v;
\echo :LAST_ERROR_SQLSTATE
-- A conflict on another unique index hits a row with another key: no lend.
INSERT INTO ledger VALUES (3, 'b@x', 'collides', 30) ON CONFLICT (email) DO UPDATE SET v = excluded.v;
\echo :LAST_ERROR_SQLSTATE
INSERT INTO ledger VALUES (3, 'b@x', 'collides', 30) ON CONFLICT (email)
DO UPDATE SET v = excluded.v, last_fencing_token = excluded.last_fencing_token;
SELECT * FROM ledger ORDER BY id;

-- An INSERT in a CTE lends nothing to the statement's UPDATE of another row ...
WITH i AS (INSERT INTO ledger VALUES (4, 'd@x', 'four', 50) RETURNING id)
UPDATE ledger SET v = 'borrowed' FROM i WHERE ledger.id = 1;
\echo :LAST_ERROR_SQLSTATE
-- ... nor of the same key, when the INSERT did nothing.
WITH i AS (INSERT INTO ledger VALUES (1, 'a@x', 'dup', 50) ON CONFLICT DO NOTHING RETURNING id)
UPDATE ledger SET v = 'borrowed' WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
-- A BEFORE trigger that skips an UPDATE does not leave its token for a
-- later DELETE of the row, in the same statement or transaction.
CREATE FUNCTION t.skip_marked() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.v = 'skip' THEN
		RETURN NULL;
	END IF;
	RETURN NEW;
END
$$;
CREATE TRIGGER z_skip BEFORE UPDATE ON ledger FOR EACH ROW EXECUTE FUNCTION t.skip_marked();
BEGIN;
UPDATE ledger SET v = 'skip', last_fencing_token = 50 WHERE id = 2;
DELETE FROM ledger WHERE id = 2;
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
WITH u AS (UPDATE ledger SET v = 'skip', last_fencing_token = 50 WHERE id = 2 RETURNING id)
DELETE FROM ledger WHERE id = 2;
\echo :LAST_ERROR_SQLSTATE
-- An INSERT skipped by a trigger lends nothing either.
CREATE FUNCTION t.skip_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RETURN CASE WHEN NEW.v = 'skip' THEN NULL ELSE NEW END;
END
$$;
CREATE TRIGGER z_skip_insert BEFORE INSERT ON ledger FOR EACH ROW EXECUTE FUNCTION t.skip_insert();
WITH i AS (INSERT INTO ledger VALUES (2, 'b2@x', 'skip', 60) RETURNING id)
UPDATE ledger SET v = 'borrowed' WHERE id = 2;
\echo :LAST_ERROR_SQLSTATE
-- A trigger's own statements present their own token (here: none).
CREATE FUNCTION t.touch_neighbour() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	UPDATE ledger SET v = 'touched by a trigger' WHERE id = NEW.id + 1;
	RETURN NEW;
END
$$;
CREATE TRIGGER a_touch BEFORE INSERT ON ledger FOR EACH ROW EXECUTE FUNCTION t.touch_neighbour();
INSERT INTO ledger VALUES (0, 'z@x', 'zero', 70);
\echo :LAST_ERROR_SQLSTATE
DROP TRIGGER a_touch ON ledger;
SELECT * FROM ledger ORDER BY id;

-- MERGE: the guard sees the union of the columns its actions assign, not
-- the action a row took, so its UPDATE actions must all assign the
-- token column or none of them.
CREATE TABLE feed (id int, v text, tok bigint);
INSERT INTO feed VALUES (1, 'merged', 80), (2, 'merged', 80);
MERGE INTO ledger l USING feed f ON l.id = f.id
WHEN MATCHED AND f.id = 1 THEN UPDATE SET v = f.v, last_fencing_token = f.tok
WHEN MATCHED THEN UPDATE SET v = 'sneaked in';
\echo :LAST_ERROR_SQLSTATE
-- All of them assign it: each row presents its value.
MERGE INTO ledger l USING feed f ON l.id = f.id
WHEN MATCHED AND f.id = 1 THEN UPDATE SET v = f.v, last_fencing_token = f.tok
WHEN MATCHED THEN UPDATE SET v = 'also merged', last_fencing_token = f.tok;
-- None of them: fencing.token, or 23T02.
MERGE INTO ledger l USING feed f ON l.id = f.id
WHEN MATCHED AND f.id = 1 THEN UPDATE SET v = 'a' WHEN MATCHED THEN UPDATE SET v = 'b';
\echo :LAST_ERROR_SQLSTATE
BEGIN;
SET LOCAL fencing.token = 81;
MERGE INTO ledger l USING feed f ON l.id = f.id
WHEN MATCHED AND f.id = 1 THEN UPDATE SET v = 'a' WHEN MATCHED THEN DELETE
WHEN NOT MATCHED THEN INSERT VALUES (f.id, 'new@x', f.v);
COMMIT;
SELECT * FROM ledger ORDER BY id;
-- A skipped MATCHED UPDATE lends nothing to a DELETE of the row by another source row.
BEGIN;
SET LOCAL fencing.token = 82;
UPDATE ledger SET v = 'x' WHERE id = 1;
COMMIT;
CREATE TABLE feed2 (id int, v text);
INSERT INTO feed2 VALUES (1, 'skip'), (1, 'delete me');
MERGE INTO ledger l USING feed2 f ON l.id = f.id
WHEN MATCHED AND f.v = 'skip' THEN UPDATE SET v = f.v, last_fencing_token = 90
WHEN MATCHED THEN DELETE;
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM ledger ORDER BY id;

-- Partition moves: the DELETE half presents the UPDATE's token; a DELETE of
-- the row version a skipped UPDATE looked at presents nothing.
CREATE TABLE routed (id int, zone int, v text, PRIMARY KEY (id, zone)) PARTITION BY LIST (zone);
CREATE TABLE routed_1 PARTITION OF routed FOR VALUES IN (1);
CREATE TABLE routed_2 PARTITION OF routed FOR VALUES IN (2);
SELECT fencing.protect('routed');
INSERT INTO routed VALUES (1, 1, 'a', 10), (2, 1, 'b', 10);
UPDATE routed SET zone = 2, last_fencing_token = 11 WHERE id = 1;
BEGIN;
SET LOCAL fencing.token = 12;
UPDATE routed SET zone = 2 WHERE id = 2;
COMMIT;
SELECT tableoid::regclass, * FROM routed ORDER BY id;
SELECT t.marks(t.img(1), t.img(1)) AS moved_1, t.marks(t.img(2), t.img(1)) AS moved_2;
UPDATE routed SET zone = 1, last_fencing_token = 10 WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
CREATE TRIGGER z_skip BEFORE UPDATE ON routed FOR EACH ROW EXECUTE FUNCTION t.skip_marked();
WITH u AS (UPDATE routed SET v = 'skip', zone = 1, last_fencing_token = 13 WHERE id = 1 RETURNING id)
DELETE FROM routed WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
SELECT tableoid::regclass, * FROM routed ORDER BY id;

DROP TABLE ledger, feed, feed2, routed;
