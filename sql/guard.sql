-- The guard trigger: where a write's token comes from, and what it leaves.

CREATE TABLE items (id int PRIMARY KEY, v text);
INSERT INTO items VALUES (1, 'one'), (2, 'two'), (3, 'three');
SELECT fencing.protect('items');
-- protect() is idempotent and added the column with its default.
SELECT fencing.protect('items');
SELECT column_name, data_type, is_nullable, column_default
FROM information_schema.columns WHERE table_name = 'items' AND column_name = 'last_fencing_token';

-- UPDATE without any token: 23T02, nothing changes.
UPDATE items SET v = 'x' WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE

-- UPDATE with fencing.token: the guard writes the token into the row.
BEGIN;
SET LOCAL fencing.token = 10;
UPDATE items SET v = 'one@10' WHERE id = 1;
SELECT * FROM items WHERE id = 1;
COMMIT;
-- SET LOCAL ends with the transaction: the next UPDATE carries no token.
UPDATE items SET v = 'x' WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE

-- UPDATE assigning the token column: that value is the token (with fencing.token
-- set, only that token or the row's own value may be assigned: orm_writeback).
BEGIN;
SET LOCAL fencing.token = 12;
UPDATE items SET v = 'one@12', last_fencing_token = 12 WHERE id = 1;
COMMIT;
SELECT * FROM items WHERE id = 1;
-- Assigned tokens must be positive; NULL is 22004, zero or negative 22023.
UPDATE items SET last_fencing_token = NULL WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
UPDATE items SET last_fencing_token = 0 WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
UPDATE items SET last_fencing_token = -12 WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
-- A stale assigned token: 23T01.
UPDATE items SET v = 'late', last_fencing_token = 11 WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
-- Monotonic: the same token may write again.
UPDATE items SET v = 'one@12 again', last_fencing_token = 12 WHERE id = 1;
SELECT * FROM items WHERE id = 1;

-- A multi-row statement is all-or-nothing: row 1 is at 12, so token 11 fails the whole statement.
BEGIN;
SET LOCAL fencing.token = 11;
UPDATE items SET v = v || '!';
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT * FROM items ORDER BY id;
-- With a token every row accepts, every row is written.
BEGIN;
SET LOCAL fencing.token = 20;
UPDATE items SET v = v || '!';
COMMIT;
SELECT * FROM items ORDER BY id;

-- INSERT: the token column if non-zero, else fencing.token, else 23T02.
INSERT INTO items VALUES (4, 'four');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO items VALUES (4, 'four', 7);
BEGIN;
SET LOCAL fencing.token = 8;
INSERT INTO items VALUES (5, 'five');
INSERT INTO items VALUES (6, 'six', 9);
COMMIT;
INSERT INTO items VALUES (7, 'seven', -1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM items WHERE id >= 4 ORDER BY id;

-- INSERT ... ON CONFLICT DO UPDATE is checked as the UPDATE it becomes.
INSERT INTO items VALUES (4, 'four@3', 3)
ON CONFLICT (id) DO UPDATE SET v = excluded.v, last_fencing_token = excluded.last_fencing_token;
\echo :LAST_ERROR_SQLSTATE
INSERT INTO items VALUES (4, 'four@30', 30)
ON CONFLICT (id) DO UPDATE SET v = excluded.v, last_fencing_token = excluded.last_fencing_token;
SELECT * FROM items WHERE id = 4;
-- The UPDATE branch presents the token of the proposed row when it does not assign one.
INSERT INTO items VALUES (4, 'four@31', 31) ON CONFLICT (id) DO UPDATE SET v = excluded.v;
SELECT * FROM items WHERE id = 4;
INSERT INTO items VALUES (4, 'four@29', 29) ON CONFLICT (id) DO UPDATE SET v = excluded.v;
\echo :LAST_ERROR_SQLSTATE
-- ... and a later statement does not inherit it.
UPDATE items SET v = 'no token' WHERE id = 4;
\echo :LAST_ERROR_SQLSTATE

-- DELETE: fencing.token, else 23T02; a stale token is 23T01.
DELETE FROM items WHERE id = 5;
\echo :LAST_ERROR_SQLSTATE
BEGIN;
SET LOCAL fencing.token = 7;
DELETE FROM items WHERE id = 5;
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = 8;
DELETE FROM items WHERE id = 5;
COMMIT;
SELECT count(*) AS rows_with_id_5 FROM items WHERE id = 5;

-- The stored token of a row never decreases, whatever the path.
SELECT id, last_fencing_token FROM items ORDER BY id;

-- The error a stale writer sees, in full.
UPDATE items SET v = 'late' , last_fencing_token = 19 WHERE id = 2;
UPDATE items SET v = 'late' WHERE id = 2;

-- The guard refuses to run as anything but the row triggers protect() installs.
SELECT tgname, tgtype, tgattr FROM pg_trigger WHERE tgrelid = 'items'::regclass ORDER BY tgname;
CREATE TABLE misuse (id int PRIMARY KEY, last_fencing_token bigint NOT NULL DEFAULT 0);
CREATE TRIGGER g AFTER DELETE ON misuse FOR EACH ROW EXECUTE FUNCTION fencing.guard('last_fencing_token', 'monotonic');
INSERT INTO misuse VALUES (1, 1);
DELETE FROM misuse;
DROP TRIGGER g ON misuse;
CREATE TRIGGER g BEFORE UPDATE ON misuse FOR EACH STATEMENT EXECUTE FUNCTION fencing.guard('last_fencing_token', 'monotonic');
UPDATE misuse SET last_fencing_token = 2;
DROP TRIGGER g ON misuse;
CREATE TRIGGER g BEFORE UPDATE ON misuse FOR EACH ROW EXECUTE FUNCTION fencing.guard('last_fencing_token', 'sometimes');
UPDATE misuse SET last_fencing_token = 2;
DROP TRIGGER g ON misuse;
SELECT fencing.guard();

-- unprotect() removes the guard; the column and its values stay.
SELECT fencing.unprotect('items');
SELECT fencing.unprotect('items');
SELECT count(*) AS guards FROM pg_trigger WHERE tgrelid = 'items'::regclass;
UPDATE items SET v = 'unguarded' WHERE id = 1;
SELECT * FROM items WHERE id = 1;
SELECT * FROM fencing.protected_tables WHERE relation = 'items'::regclass;

DROP TABLE items, misuse;
