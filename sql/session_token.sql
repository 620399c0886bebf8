-- A session-level fencing.token (SET without LOCAL, SET SESSION,
-- set_config(..., false)) outlives its transaction as the session's value,
-- shown by SHOW, and no later transaction uses it (docs/sql-api.md, "Settings"): behind a
-- transaction pooler, the next write fails with 23T02.  So it is loud: the
-- commit of a transaction that leaves one behind, unused by any of its
-- writes, warns; and 23T02 says why such a value did not count.

CREATE TABLE t.sessioned (id int PRIMARY KEY, v text);
SELECT fencing.protect('t.sessioned');
INSERT INTO t.sessioned VALUES (1, 'one', 5), (2, 'two', 5);

-- A plain SET in autocommit is its own transaction: it warns, SHOW shows the
-- value, and the next write carries no token, saying why.
SET fencing.token = 10;
SHOW fencing.token;
UPDATE t.sessioned SET v = 'borrowed' WHERE id = 1;
DELETE FROM t.sessioned WHERE id = 2;
TRUNCATE t.sessioned;
-- SET SESSION is the same statement.
SET SESSION fencing.token = 11;
-- set_config(..., false) is SET with a bind parameter: it warns as well,
-- at the end of its statement's transaction ...
SELECT set_config('fencing.token', '12', false);
-- ... or at the COMMIT of an explicit one that did not write with it.
BEGIN;
SELECT set_config('fencing.token', '13', false);
SELECT count(*) FROM t.sessioned;
COMMIT;
-- In a DO block or a function, too.
DO $$ BEGIN PERFORM set_config('fencing.token', '14', false); END $$;
DO $$ BEGIN SET fencing.token = 15; END $$;
-- A SET followed by a SET LOCAL in one transaction: the SET's value is the
-- one that stays, and the warning names it.
BEGIN;
SET fencing.token = 16;
SET LOCAL fencing.token = 17;
COMMIT;
SHOW fencing.token;
-- A SET released with its savepoint stays; one rolled back does not.
BEGIN;
SAVEPOINT s;
SET fencing.token = 18;
RELEASE SAVEPOINT s;
COMMIT;
BEGIN;
SAVEPOINT s;
SET fencing.token = 19;
ROLLBACK TO SAVEPOINT s;
COMMIT;
SHOW fencing.token;

-- No warning where the value is used, rolled back, not a token, or not a
-- session value.
-- SET inside BEGIN ... COMMIT applies to that transaction's writes (docs/sql-api.md, "Settings"):
-- no warning, although the value stays for the session ...
BEGIN;
SET fencing.token = 20;
UPDATE t.sessioned SET v = 'twenty' WHERE id = 1;
COMMIT;
SHOW fencing.token;
-- ... where the next transaction does not use it, and 23T02 says so.
UPDATE t.sessioned SET v = 'borrowed' WHERE id = 1;
-- So does a statement list sent as one query (one implicit transaction).
SET fencing.token = 21 \; UPDATE t.sessioned SET v = 'twenty-one' WHERE id = 1;
SELECT v, last_fencing_token FROM t.sessioned WHERE id = 1;
-- A function that sets the token for the session and writes with it.
CREATE FUNCTION t.set_and_write(token bigint, new_v text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM set_config('fencing.token', token::text, false);
	UPDATE t.sessioned SET v = new_v WHERE id = 1;
END
$$;
SELECT t.set_and_write(22, 'twenty-two');
SELECT v, last_fencing_token FROM t.sessioned WHERE id = 1;
-- Rolled back.
BEGIN;
SET fencing.token = 23;
ROLLBACK;
-- SET LOCAL and set_config(..., true): PostgreSQL's own warning outside a
-- transaction block, none of ours.
SET LOCAL fencing.token = 24;
BEGIN;
SET LOCAL fencing.token = 25;
COMMIT;
BEGIN;
SELECT set_config('fencing.token', '26', true);
COMMIT;
SELECT set_config('fencing.token', '27', true);
-- A function's SET clause ends with the function.
CREATE FUNCTION t.write_as_28(new_v text) RETURNS void LANGUAGE sql
SET fencing.token = 28
AS $$ UPDATE t.sessioned SET v = new_v WHERE id = 1 $$;
SELECT t.write_as_28('twenty-eight');
-- RESET, SET ... TO DEFAULT, an empty value, DISCARD ALL and RESET ALL set
-- no token.
SET fencing.token = 29;
RESET fencing.token;
SHOW fencing.token;
SET fencing.token = 30;
SET fencing.token TO DEFAULT;
SET fencing.token = 31;
SET fencing.token = '';
SHOW fencing.token;
SET fencing.token = 32;
DISCARD ALL;
SET fencing.token = 33;
RESET ALL;
SHOW fencing.token;
-- Role and database defaults: no warning when they are set, nor when a new
-- session starts with them; 23T02 says a default is not a token.
ALTER ROLE CURRENT_USER SET fencing.token = 34;
SELECT format('ALTER DATABASE %I SET fencing.token = 35', current_database()) \gexec
\c -
SHOW fencing.token;
UPDATE t.sessioned SET v = 'borrowed' WHERE id = 1;
RESET fencing.token;
SHOW fencing.token;
ALTER ROLE CURRENT_USER RESET fencing.token;
\c -
SHOW fencing.token;
BEGIN;
SET LOCAL fencing.token TO DEFAULT;
DELETE FROM t.sessioned WHERE id = 2;
ROLLBACK;
SELECT format('ALTER DATABASE %I RESET fencing.token', current_database()) \gexec
\c -
-- With no value at all, 23T02 has nothing to add.
UPDATE t.sessioned SET v = 'borrowed' WHERE id = 1;

SELECT * FROM t.sessioned ORDER BY id;
