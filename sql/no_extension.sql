-- A database without the extension, on a server that loads the module
-- (shared_preload_libraries; on the server that does not preload it, LOAD
-- puts the same hooks in place): the module is loaded server-wide, but in a
-- database where CREATE EXTENSION fencing was not run every statement
-- behaves as without it (src/catalog/extension.hpp, docs/operations.md).
-- The regression database, which has the extension, keeps enforcing in
-- between; once the extension is created in the other database, the same
-- session enforces there too, and no longer once it is dropped.
SELECT current_database() AS regress_db \gset

-- The database with the extension: a protected table, a row at token 10.
CREATE TABLE elsewhere (id int PRIMARY KEY, v text);
SELECT fencing.protect('elsewhere');
INSERT INTO elsewhere VALUES (1, 'at 10', 10);

CREATE DATABASE fencing_no_extension;
\c fencing_no_extension
LOAD 'fencing';
SELECT count(*) AS installed FROM pg_extension WHERE extname = 'fencing';

-- The MERGE of issue 37: MERGE 1, as without the module (it was: schema
-- "fencing" does not exist).
CREATE TABLE merge_t (id int PRIMARY KEY, v text);
CREATE TABLE merge_s (id int, v text);
INSERT INTO merge_s VALUES (1, 'a');
MERGE INTO merge_t t USING merge_s s ON t.id = s.id WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v);
\echo MERGE :ROW_COUNT

-- From here on a schema fencing that is no extension's: tables named like
-- the extension's whose reading raises an error.  Nothing of the module
-- reads them (before 0.4.0 the module took such tables for the
-- extension's, from their names).
CREATE SCHEMA fencing;
CREATE FUNCTION fencing.alarm(what text) RETURNS SETOF record LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'fencing.% was read', what;
END
$$;
CREATE VIEW fencing.registry AS
SELECT * FROM fencing.alarm('registry') a(relid regclass, token_column name, mode text, protected boolean);
CREATE VIEW fencing.table_options AS
SELECT * FROM fencing.alarm('table_options') a(relid regclass, enforce boolean, max_token bigint, maintainer oid);
CREATE VIEW fencing.deleted_keys AS
SELECT * FROM fencing.alarm('deleted_keys') a(relid regclass, key bytea, token bigint);
CREATE VIEW fencing.floors AS
SELECT * FROM fencing.alarm('floors') a(relid regclass, token bigint, compacted bigint);
CREATE VIEW fencing.resources AS
SELECT * FROM fencing.alarm('resources') a(resource text, token bigint);
CREATE SCHEMA fencing_internal;
CREATE FUNCTION fencing_internal._protect(regclass, name, text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'fencing_internal._protect was called';
END
$$;

-- A table with the default token column's name, and a MERGE whose UPDATE
-- actions assign it in one action and not in the other: refused only on a
-- protected table of a database with the extension (below).
CREATE TABLE accounts (id int PRIMARY KEY, v text, last_fencing_token bigint NOT NULL DEFAULT 0);
INSERT INTO accounts VALUES (1, 'one', 10), (2, 'two', 10);
CREATE TABLE changes (id int, v text, tok bigint);
INSERT INTO changes VALUES (1, 'changed', 5), (2, 'changed', 0), (3, 'new', 5);
MERGE INTO accounts a USING changes c ON a.id = c.id
WHEN MATCHED AND c.tok > 0 THEN UPDATE SET v = c.v, last_fencing_token = c.tok
WHEN MATCHED THEN UPDATE SET v = c.v
WHEN NOT MATCHED THEN INSERT VALUES (c.id, c.v, c.tok);
MERGE INTO accounts a USING changes c ON a.id = c.id
WHEN MATCHED AND c.id = 3 THEN DELETE;
SELECT * FROM accounts ORDER BY id;
-- Prepared, explained, in a function.
PREPARE merge_one(int) AS
MERGE INTO merge_t t USING (SELECT $1 AS id) s ON t.id = s.id
WHEN MATCHED THEN UPDATE SET v = 'again' WHEN NOT MATCHED THEN INSERT VALUES (s.id, 'prepared');
EXECUTE merge_one(1);
EXECUTE merge_one(2);
DO $$
DECLARE
	line text;
BEGIN
	-- EXPLAIN's first line (the rest of the plan varies between releases).
	FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) MERGE INTO merge_t t USING merge_s s ON t.id = s.id'
	                    ' WHEN MATCHED THEN DELETE' LOOP
		RAISE NOTICE '%', line;
		EXIT;
	END LOOP;
	MERGE INTO merge_t t USING merge_s s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = 'from DO';
END
$$;
SELECT * FROM merge_t ORDER BY id;

-- Writes, COPY (which runs no executor: the utility hook's path) and TRUNCATE.
INSERT INTO accounts VALUES (4, 'four', 1) ON CONFLICT (id) DO UPDATE SET v = 'conflict';
UPDATE accounts SET v = 'updated', last_fencing_token = 1 WHERE id = 1;
DELETE FROM accounts WHERE id = 2;
COPY accounts FROM stdin;
7	copied	0
8	copied	3
\.
COPY merge_s TO stdout;
COPY (SELECT id FROM accounts WHERE id > 6 ORDER BY id) TO stdout;
TRUNCATE accounts;
SELECT count(*) AS after_truncate FROM accounts;

-- DDL, partitions included: create, attach, detach, drop (a partitioned
-- table with its partitions, a schema with its tables).
CREATE TABLE parts (id int PRIMARY KEY, v text) PARTITION BY RANGE (id);
CREATE TABLE parts_1 PARTITION OF parts FOR VALUES FROM (0) TO (100);
CREATE TABLE parts_2 (id int PRIMARY KEY, v text);
ALTER TABLE parts ATTACH PARTITION parts_2 FOR VALUES FROM (100) TO (200);
INSERT INTO parts VALUES (1, 'one'), (150, 'one fifty');
MERGE INTO parts p USING (VALUES (1, 'merged'), (151, 'new')) s(id, v) ON p.id = s.id
WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v);
ALTER TABLE parts DETACH PARTITION parts_2;
DROP TABLE parts_2;
ALTER TABLE parts ADD COLUMN note text;
ALTER TABLE parts RENAME COLUMN note TO remark;
CREATE TABLE parts_3 PARTITION OF parts FOR VALUES FROM (300) TO (400);
DROP TABLE parts_1;
DROP TABLE parts;
CREATE SCHEMA scratch;
CREATE TABLE scratch.a (id int PRIMARY KEY) PARTITION BY LIST (id);
CREATE TABLE scratch.a1 PARTITION OF scratch.a FOR VALUES IN (1);
CREATE TABLE scratch.copied AS SELECT * FROM merge_t;
SELECT * INTO scratch.selected FROM merge_t;
CREATE TRIGGER no_op BEFORE UPDATE ON merge_t FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger();
DROP TRIGGER no_op ON merge_t;
\set VERBOSITY terse
DROP SCHEMA scratch CASCADE;
\set VERBOSITY default

-- A failing statement, a failing transaction, a failing subtransaction.
MERGE INTO merge_t t USING (VALUES (1, 'x')) s(id, v) ON false WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v);
BEGIN;
MERGE INTO merge_t t USING merge_s s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = 'doomed';
SELECT 1 / 0;
COMMIT;
BEGIN;
SAVEPOINT s;
MERGE INTO merge_t t USING (VALUES (2, 'x')) s(id, v) ON false WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v);
ROLLBACK TO SAVEPOINT s;
MERGE INTO merge_t t USING merge_s s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = 'kept';
SAVEPOINT s2;
DROP TABLE merge_s;
CREATE TABLE dropped_in_savepoint (id int) PARTITION BY LIST (id);
CREATE TABLE dropped_in_savepoint_1 PARTITION OF dropped_in_savepoint FOR VALUES IN (1);
DROP TABLE dropped_in_savepoint_1;
SELECT 1 / 0;
ROLLBACK TO SAVEPOINT s2;
COMMIT;
SELECT * FROM merge_t ORDER BY id;
-- A cursor held past its transaction, DISCARD ALL.
BEGIN;
DECLARE held CURSOR WITH HOLD FOR SELECT id FROM merge_t ORDER BY id;
COMMIT;
FETCH ALL FROM held;
DISCARD ALL;

-- fencing.token: the setting is the library's, defined in every database
-- of the server (PostgreSQL has no per-database settings of a module), so
-- its value is checked as everywhere; nothing uses it here, and a commit
-- does not warn of a session value no write used (the database with the
-- extension does, below).
SET fencing.token = 'abc';
SET fencing.token = 0;
SET fencing.token = 5;
SHOW fencing.token;
BEGIN;
SET LOCAL fencing.token = 6;
MERGE INTO merge_t t USING (VALUES (1)) s(id) ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = 'token 6';
SHOW fencing.token;
COMMIT;
SHOW fencing.token;
RESET fencing.token;

-- Meanwhile the database with the extension enforces: a stale token is
-- refused, a MERGE with disagreeing actions too, and a plain SET warns.
\c :regress_db
UPDATE elsewhere SET v = 'stale', last_fencing_token = 9 WHERE id = 1;
MERGE INTO elsewhere e USING (VALUES (1, 'merged', 11)) s(id, v, tok) ON e.id = s.id
WHEN MATCHED AND s.tok > 10 THEN UPDATE SET v = s.v, last_fencing_token = s.tok
WHEN MATCHED THEN UPDATE SET v = s.v;
SET fencing.token = 5;
RESET fencing.token;
SELECT * FROM elsewhere;

-- In the same session, the extension is created in that database: the
-- session asks again and enforces there (the planted schema goes first:
-- CREATE EXTENSION refuses a schema fencing that is not empty).
\c fencing_no_extension
MERGE INTO merge_t t USING (VALUES (1)) s(id) ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = 'before';
\set VERBOSITY terse
DROP SCHEMA fencing, fencing_internal CASCADE;
\set VERBOSITY default
-- Created and rolled back: nothing to enforce after the rollback.
BEGIN;
CREATE EXTENSION fencing;
SELECT fencing.protect('merge_t');
ROLLBACK;
UPDATE merge_t SET v = 'after the rollback' WHERE id = 1;
CREATE EXTENSION fencing;
SELECT fencing.protect('accounts', 'last_fencing_token');
INSERT INTO accounts VALUES (1, 'one', 10);
UPDATE accounts SET v = 'stale', last_fencing_token = 9 WHERE id = 1;
MERGE INTO accounts a USING (VALUES (1, 'merged', 11)) s(id, v, tok) ON a.id = s.id
WHEN MATCHED AND s.tok > 10 THEN UPDATE SET v = s.v, last_fencing_token = s.tok
WHEN MATCHED THEN UPDATE SET v = s.v;
-- Dropped in a transaction: from its next statement on, nothing enforces.
BEGIN;
\set VERBOSITY terse
DROP EXTENSION fencing CASCADE;
\set VERBOSITY default
UPDATE accounts SET v = 'unguarded', last_fencing_token = 9 WHERE id = 1;
MERGE INTO accounts a USING (VALUES (1, 'merged', 11)) s(id, v, tok) ON a.id = s.id
WHEN MATCHED AND s.tok > 10 THEN UPDATE SET v = s.v, last_fencing_token = s.tok
WHEN MATCHED THEN UPDATE SET v = s.v;
SET fencing.token = 3;
COMMIT;
RESET fencing.token;
SELECT * FROM accounts;

\c :regress_db
DROP DATABASE fencing_no_extension;
UPDATE elsewhere SET v = 'stale', last_fencing_token = 9 WHERE id = 1;
DROP TABLE elsewhere;
