-- The registry: the extension knows its protected tables from its own
-- catalog table, never from trigger names, and follows every DDL route
-- that changes a table's key identity or token column.

-- protect() records the table, its settings and its key identity;
-- unprotect() keeps the row (unprotected), DROP TABLE removes it.
CREATE TABLE reg (id int PRIMARY KEY, v text);
SELECT fencing.protect('reg', mode => 'strict');
SELECT relid, token_column, mode, protected, key_columns, key_types, key_collations
FROM fencing.registry WHERE relid = 'reg'::regclass;
SELECT * FROM fencing.protected_tables WHERE relation = 'reg'::regclass;
SELECT fencing.unprotect('reg');
SELECT relid, protected FROM fencing.registry WHERE relid = 'reg'::regclass;
SELECT count(*) FROM fencing.protected_tables WHERE relation = 'reg'::regclass;
DROP TABLE reg;
SELECT count(*) FROM fencing.registry r WHERE NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = r.relid);

-- A guard trigger that protect() did not install refuses every write (55000),
-- whatever its name and arguments, and the extension ignores it elsewhere.
CREATE TABLE handmade_guard (id int PRIMARY KEY, last_fencing_token bigint NOT NULL DEFAULT 0);
CREATE TRIGGER fencing_guard BEFORE INSERT OR UPDATE OR DELETE ON handmade_guard
FOR EACH ROW EXECUTE FUNCTION fencing.guard('last_fencing_token', 'monotonic');
CREATE TRIGGER fencing_guard_truncate BEFORE TRUNCATE ON handmade_guard
FOR EACH STATEMENT EXECUTE FUNCTION fencing.guard();
INSERT INTO handmade_guard VALUES (1, 5);
\echo :LAST_ERROR_SQLSTATE
BEGIN;
SET LOCAL fencing.token = 5;
TRUNCATE handmade_guard;
ROLLBACK;
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM fencing.protected_tables WHERE relation = 'handmade_guard'::regclass;
SELECT t.error_of($$SELECT fencing.compact('handmade_guard', 1)$$);

-- On a protected table, a guard trigger made by hand with other settings
-- refuses writes too.
CREATE TABLE imitated (id int PRIMARY KEY);
SELECT fencing.protect('imitated');
CREATE TRIGGER fencing_guard_extra BEFORE UPDATE ON imitated
FOR EACH ROW EXECUTE FUNCTION fencing.guard('last_fencing_token', 'strict');
INSERT INTO imitated VALUES (1, 3);
SELECT t.error_of($$UPDATE imitated SET last_fencing_token = 4$$);
DROP TRIGGER fencing_guard_extra ON imitated;
SELECT t.error_of($$UPDATE imitated SET last_fencing_token = 4$$);

-- A view with a guard as INSTEAD OF trigger is no protected table, and
-- high_water_mark() never evaluates its columns.
CREATE FUNCTION evaluated() RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'a user function was evaluated by the extension';
END
$$;
CREATE VIEW guarded_view AS SELECT 1 AS id, evaluated() AS last_fencing_token;
CREATE TRIGGER fencing_guard INSTEAD OF UPDATE ON guarded_view
FOR EACH ROW EXECUTE FUNCTION fencing.guard('last_fencing_token', 'monotonic');
SELECT count(*) FROM fencing.protected_tables WHERE relation = 'guarded_view'::regclass;
SELECT t.error_of($$SELECT fencing.protect('guarded_view')$$);
SET client_min_messages = error;
SELECT t.error_of($$SELECT fencing.high_water_mark()$$) AS high_water_mark;
RESET client_min_messages;

-- A token column of a domain over bigint is refused.
CREATE DOMAIN token_domain AS bigint CHECK (VALUE >= 0);
CREATE TABLE domained (id int PRIMARY KEY, last_fencing_token token_domain NOT NULL DEFAULT 0);
SELECT t.error_of($$SELECT fencing.protect('domained')$$);

-- Only the table's owner may protect or unprotect it.
CREATE ROLE regress_fencing_stranger;
GRANT USAGE ON SCHEMA fencing TO regress_fencing_stranger;
GRANT ALL ON imitated TO regress_fencing_stranger;
SET ROLE regress_fencing_stranger;
SELECT t.error_of($$SELECT fencing.unprotect('imitated')$$);
SELECT t.error_of($$SELECT fencing.protect('imitated', mode => 'strict')$$);
RESET ROLE;
SELECT mode FROM fencing.protected_tables WHERE relation = 'imitated'::regclass;

-- While protected, the token column keeps its type, values and default:
-- a rewrite to the same type, a default, an identity or a generation
-- expression are refused, and nothing changes.
SELECT t.error_of($$ALTER TABLE imitated ALTER COLUMN last_fencing_token TYPE bigint USING 0$$);
SELECT t.error_of($$ALTER TABLE imitated ALTER COLUMN last_fencing_token SET DEFAULT 999$$);
SELECT t.error_of($$ALTER TABLE imitated ALTER COLUMN last_fencing_token DROP DEFAULT,
                    ALTER COLUMN last_fencing_token ADD GENERATED ALWAYS AS IDENTITY$$);
SELECT t.error_of($$ALTER TABLE imitated RENAME COLUMN last_fencing_token TO token$$);
SELECT id, last_fencing_token FROM imitated;
SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef d
WHERE d.adrelid = 'imitated'::regclass;
INSERT INTO imitated VALUES (2);
\echo :LAST_ERROR_SQLSTATE
-- SET DEFAULT 0 is what protect() makes: allowed.
ALTER TABLE imitated ALTER COLUMN last_fencing_token SET DEFAULT 0;

-- Key identity: a key deleted under token 50 cannot come back under 40
-- after the documented way to change a key column's type (unprotect, ALTER
-- ... TYPE, protect): the marks were made under the old type's images, so
-- protect() raises the floor for new keys above them.
CREATE TABLE retyped (id int PRIMARY KEY, v text);
SELECT fencing.protect('retyped');
INSERT INTO retyped VALUES (1, 'a', 10);
BEGIN;
SET LOCAL fencing.token = 50;
DELETE FROM retyped WHERE id = 1;
COMMIT;
SELECT fencing.unprotect('retyped');
ALTER TABLE retyped ALTER COLUMN id TYPE bigint;
SELECT fencing.protect('retyped');
SELECT token FROM fencing.floors WHERE relid = 'retyped'::regclass;
INSERT INTO retyped VALUES (1, 'stale', 40);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO retyped VALUES (1, 'new holder', 51);
SELECT key_types FROM fencing.registry WHERE relid = 'retyped'::regclass;

-- While protected, PostgreSQL itself refuses a key column's type change:
-- the guard's key-change trigger depends on the key columns (UPDATE OF
-- them, or a WHEN condition on them when other BEFORE UPDATE triggers exist).
CREATE FUNCTION touch() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$;
SELECT t.error_of($$ALTER TABLE retyped ALTER COLUMN id TYPE numeric$$);
CREATE TRIGGER touch BEFORE UPDATE ON retyped FOR EACH ROW EXECUTE FUNCTION touch();
SELECT t.error_of($$ALTER TABLE retyped ALTER COLUMN id TYPE numeric$$);

-- A primary key changed while the table was unprotected: the same.
CREATE TABLE rekeyed (a int, b int, v text, PRIMARY KEY (a, b));
SELECT fencing.protect('rekeyed');
INSERT INTO rekeyed VALUES (1, 1, 'x', 10);
BEGIN;
SET LOCAL fencing.token = 70;
DELETE FROM rekeyed;
COMMIT;
SELECT fencing.unprotect('rekeyed');
ALTER TABLE rekeyed DROP CONSTRAINT rekeyed_pkey, ADD PRIMARY KEY (b, a);
SELECT fencing.protect('rekeyed');
INSERT INTO rekeyed VALUES (1, 1, 'stale', 65);
\echo :LAST_ERROR_SQLSTATE
SELECT key_columns FROM fencing.registry WHERE relid = 'rekeyed'::regclass;
-- Protecting again under the same identity raises nothing more.
SELECT fencing.protect('rekeyed');
INSERT INTO rekeyed VALUES (2, 2, 'fresh', 70);

-- A schema named fencing_citus made by an ordinary role (there is no Citus
-- here) does not stop DROP, and the extension never reads it.
CREATE ROLE regress_fencing_squatter;
GRANT CREATE ON DATABASE contrib_regression TO regress_fencing_squatter;
SET ROLE regress_fencing_squatter;
CREATE SCHEMA fencing_citus;
CREATE TABLE fencing_citus.floors (id bigint PRIMARY KEY, token bigint DEFAULT evaluated());
RESET ROLE;
CREATE TABLE dropped_anyway (id int PRIMARY KEY);
DROP TABLE dropped_anyway;
SET client_min_messages = error;
SELECT t.error_of($$SELECT fencing.high_water_mark()$$) AS high_water_mark;
RESET client_min_messages;
DROP SCHEMA fencing_citus CASCADE;
REVOKE CREATE ON DATABASE contrib_regression FROM regress_fencing_squatter;

DROP VIEW guarded_view;
DROP TABLE handmade_guard, imitated, domained, retyped, rekeyed;
DROP FUNCTION evaluated(), touch();
DROP DOMAIN token_domain;
DROP OWNED BY regress_fencing_stranger, regress_fencing_squatter;
DROP ROLE regress_fencing_stranger, regress_fencing_squatter;

-- CREATE EXTENSION refuses a schema named fencing made by another role
-- (terse: where PostgreSQL 18 prints the script's text as context).
\set VERBOSITY terse
CREATE DATABASE fencing_planted;
\c fencing_planted
CREATE ROLE regress_fencing_planter;
CREATE SCHEMA fencing AUTHORIZATION regress_fencing_planter;
CREATE EXTENSION fencing;
SELECT count(*) FROM pg_extension WHERE extname = 'fencing';
DROP SCHEMA fencing;
DROP ROLE regress_fencing_planter;
\c contrib_regression
DROP DATABASE fencing_planted;
-- ... or one another role may create in, or one with objects in it.
CREATE DATABASE fencing_planted;
\c fencing_planted
\set VERBOSITY terse
CREATE ROLE regress_fencing_planter;
CREATE SCHEMA fencing;
GRANT CREATE ON SCHEMA fencing TO regress_fencing_planter;
CREATE EXTENSION fencing;
REVOKE CREATE ON SCHEMA fencing FROM regress_fencing_planter;
CREATE FUNCTION fencing.protect(text) RETURNS void LANGUAGE sql AS 'SELECT';
CREATE EXTENSION fencing;
DROP FUNCTION fencing.protect(text);
CREATE EXTENSION fencing;
SELECT extname FROM pg_extension WHERE extname = 'fencing';
DROP EXTENSION fencing;
DROP ROLE regress_fencing_planter;
\c contrib_regression
DROP DATABASE fencing_planted;
