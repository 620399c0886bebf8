-- fencing.token is the token of the current transaction only (docs/design.md): a
-- value set in one transaction never reaches a write of another, so a pooled
-- connection cannot hand one client's token to the next client.

-- This session has not loaded the module yet (the test server does not
-- preload it).  Until it is loaded, PostgreSQL keeps fencing.token as an
-- unchecked placeholder, so a bad value is accepted here ...
BEGIN;
SET LOCAL fencing.token = 'abc';
SHOW fencing.token;
-- ... but the first protected write loads the module, which drops the bad
-- value with a WARNING: the write carries no token and is refused.
UPDATE t.scoped SET v = 'abc' WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;

-- Loaded now: anything but a positive bigint fails at once with 22023.
SET fencing.token = 0;
\echo :LAST_ERROR_SQLSTATE
SET fencing.token = -5;
SET fencing.token = 'abc';
SET fencing.token = '12abc';
SET fencing.token = '9223372036854775808';
SET fencing.token = ' 9223372036854775807 ';
SHOW fencing.token;
RESET fencing.token;

-- A plain SET in autocommit: the UPDATE in the next transaction carries no token.
SET fencing.token = 90;
UPDATE t.scoped SET v = 'leaked' WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
-- SET inside BEGIN ... COMMIT applies there, and not to the next transaction.
BEGIN;
SET fencing.token = 91;
UPDATE t.scoped SET v = 'ninety-one' WHERE id = 1;
COMMIT;
UPDATE t.scoped SET v = 'leaked' WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
-- set_config(name, value, true) is SET LOCAL with a bind parameter.
BEGIN;
SELECT set_config('fencing.token', '92', true);
UPDATE t.scoped SET v = 'ninety-two' WHERE id = 1;
COMMIT;
-- A rolled-back savepoint takes its SET with it.
BEGIN;
SET LOCAL fencing.token = 93;
SAVEPOINT s;
SET LOCAL fencing.token = 94;
ROLLBACK TO SAVEPOINT s;
UPDATE t.scoped SET v = 'ninety-three' WHERE id = 1;
SAVEPOINT s2;
RESET fencing.token;
UPDATE t.scoped SET v = 'reset' WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
ROLLBACK TO SAVEPOINT s2;
COMMIT;
-- A function's SET clause applies while the function runs, and not after it.
CREATE FUNCTION t.write_as_95(new_v text) RETURNS void LANGUAGE sql
SET fencing.token = 95
AS $$ UPDATE t.scoped SET v = new_v WHERE id = 1 $$;
BEGIN;
SELECT t.write_as_95('ninety-five');
UPDATE t.scoped SET v = 'after the function' WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT t.write_as_95('ninety-five');
SELECT * FROM t.scoped;
RESET fencing.token;

-- In a new session whose module is not loaded yet: a SET LOCAL of the
-- transaction still counts when the write loads the module ...
\c -
BEGIN;
SET LOCAL fencing.token = 96;
UPDATE t.scoped SET v = 'ninety-six' WHERE id = 1;
COMMIT;
-- ... and a session value set by an earlier transaction still does not.
\c -
SET fencing.token = 97;
UPDATE t.scoped SET v = 'leaked' WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
-- Role defaults (and database defaults, PGOPTIONS, postgresql.conf) never count.
ALTER ROLE CURRENT_USER SET fencing.token = 98;
\c -
SHOW fencing.token;
UPDATE t.scoped SET v = 'leaked' WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
-- ... not even when RESET or SET ... TO DEFAULT brings them back in a transaction.
BEGIN;
RESET fencing.token;
UPDATE t.scoped SET v = 'leaked' WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN;
SET LOCAL fencing.token TO DEFAULT;
UPDATE t.scoped SET v = 'leaked' WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = 99;
RESET ALL;
UPDATE t.scoped SET v = 'leaked' WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
ALTER ROLE CURRENT_USER RESET fencing.token;
\c "dbname=contrib_regression options=-cfencing.token=555"
SHOW fencing.token;
UPDATE t.scoped SET v = 'leaked' WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
BEGIN;
RESET fencing.token;
UPDATE t.scoped SET v = 'leaked' WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT * FROM t.scoped;
