-- 23T01 and 23T02 carry the standard fields that drivers expose (psycopg's
-- e.diag, asyncpg's e.constraint_name, node-postgres' err.constraint, PgJDBC's
-- ServerErrorMessage): schema, table, the token column, and a constraint name
-- that tells a stale write (fencing_stale_token) from an unfenced one
-- (fencing_missing_token).  The table is the one the message names: for a
-- row write, the table (or partition) that holds the row, as PostgreSQL names
-- a partition in its own constraint errors; for fenced_update(), the table it
-- was called on.

CREATE SCHEMA diag;
-- fields(sql): the error's SQLSTATE and fields, as a catch block reads them.
CREATE FUNCTION diag.fields(statement text,
	OUT state text, OUT schema_name text, OUT table_name text, OUT column_name text,
	OUT constraint_name text) LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE statement;
	state := 'no error';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, schema_name = SCHEMA_NAME,
		table_name = TABLE_NAME, column_name = COLUMN_NAME, constraint_name = CONSTRAINT_NAME;
END
$$;

CREATE TABLE diag.accounts (id int PRIMARY KEY, balance int);
SELECT fencing.protect('diag.accounts');
INSERT INTO diag.accounts VALUES (1, 100, 5), (2, 200, 5);

-- Stale UPDATE, by the token column and by fencing.token.
SELECT * FROM diag.fields($$UPDATE diag.accounts SET balance = 0, last_fencing_token = 4 WHERE id = 1$$);
BEGIN;
SET LOCAL fencing.token = 4;
SELECT * FROM diag.fields($$UPDATE diag.accounts SET balance = 0 WHERE id = 1$$);
-- Stale DELETE.
SELECT * FROM diag.fields($$DELETE FROM diag.accounts WHERE id = 1$$);
ROLLBACK;

-- Stale INSERT over a deleted key's mark (the AFTER INSERT check).
BEGIN;
SET LOCAL fencing.token = 7;
DELETE FROM diag.accounts WHERE id = 2;
COMMIT;
SELECT * FROM diag.fields($$INSERT INTO diag.accounts VALUES (2, 0, 6)$$);

-- Missing token: UPDATE, DELETE, INSERT without one.
SELECT * FROM diag.fields($$UPDATE diag.accounts SET balance = 0 WHERE id = 1$$);
SELECT * FROM diag.fields($$DELETE FROM diag.accounts WHERE id = 1$$);
SELECT * FROM diag.fields($$INSERT INTO diag.accounts VALUES (3, 0)$$);

-- fenced_update(): stale with on_stale => 'error' (a row, and a deleted key's
-- mark); 'skip' raises nothing.
SELECT * FROM diag.fields($$SELECT fencing.fenced_update('diag.accounts', '{"id": 1}', 4, '{"balance": 0}')$$);
SELECT * FROM diag.fields($$SELECT fencing.fenced_update('diag.accounts', '{"id": 2}', 6, '{}', 'error')$$);
SELECT * FROM diag.fields($$SELECT fencing.fenced_update('diag.accounts', '{"id": 1}', 4, '{}', 'skip')$$);

-- TRUNCATE: stale, and without a token.
BEGIN;
SET LOCAL fencing.token = 3;
SELECT * FROM diag.fields($$TRUNCATE diag.accounts$$);
ROLLBACK;
SELECT * FROM diag.fields($$TRUNCATE diag.accounts$$);

-- A token column of another name (mixed case: the field is the name itself,
-- not quoted), in strict mode.
CREATE TABLE diag."Ledger" (id int PRIMARY KEY, amount int);
SELECT fencing.protect('diag."Ledger"', 'Epoch', 'strict');
INSERT INTO diag."Ledger" VALUES (1, 10, 8);
SELECT * FROM diag.fields($$UPDATE diag."Ledger" SET amount = 0, "Epoch" = 8$$);
SELECT * FROM diag.fields($$DELETE FROM diag."Ledger"$$);
SELECT * FROM diag.fields($$SELECT fencing.fenced_update('diag."Ledger"', '{"id": 1}', 8)$$);

-- A partitioned table whose partition has the token column at another
-- position (the parent has a dropped column): the partition holding the row is
-- named, with its own column; fenced_update() names the table it was given.
CREATE TABLE diag.events (region text, dropped int, id int, payload text,
	PRIMARY KEY (region, id)) PARTITION BY LIST (region);
ALTER TABLE diag.events DROP COLUMN dropped;
CREATE TABLE diag.events_eu PARTITION OF diag.events FOR VALUES IN ('eu');
SELECT fencing.protect('diag.events');
SELECT attrelid::regclass, attnum FROM pg_attribute
WHERE attname = 'last_fencing_token' AND attrelid IN ('diag.events'::regclass, 'diag.events_eu'::regclass)
ORDER BY 1;
INSERT INTO diag.events VALUES ('eu', 1, 'a', 5);
SELECT * FROM diag.fields($$UPDATE diag.events SET payload = 'b', last_fencing_token = 4$$);
SELECT * FROM diag.fields($$DELETE FROM diag.events$$);
SELECT * FROM diag.fields($$INSERT INTO diag.events VALUES ('eu', 2, 'c')$$);
SELECT * FROM diag.fields($$SELECT fencing.fenced_update('diag.events', '{"region": "eu", "id": 1}', 4)$$);
SELECT * FROM diag.fields($$SELECT fencing.fenced_update('diag.events_eu', '{"region": "eu", "id": 1}', 4)$$);
BEGIN;
SET LOCAL fencing.token = 4;
SELECT * FROM diag.fields($$TRUNCATE diag.events$$);
ROLLBACK;

-- A stale fence() names no table: a resource is not one.
SELECT fencing.fence('diag:resource', 10);
SELECT * FROM diag.fields($$SELECT fencing.fence('diag:resource', 9)$$);
-- Other errors of a protected table keep their own fields (22023, no constraint).
BEGIN;
SET LOCAL fencing.token = 6;
SELECT * FROM diag.fields($$UPDATE diag.accounts SET last_fencing_token = 9 WHERE id = 1$$);
ROLLBACK;

DROP SCHEMA diag CASCADE;
