-- fencing 0.3.0 -> 0.4.0
\echo Use "ALTER EXTENSION fencing UPDATE TO '0.4.0'" to load this file. \quit

-- Every protected table first (src/legacy/upgrade.cpp): running writes finish and
-- later ones wait for the update, instead of deadlocking with it.
CREATE FUNCTION fencing._lock_protected_tables() RETURNS void
AS 'MODULE_PATHNAME', 'lock_protected_tables' LANGUAGE C;
SELECT fencing._lock_protected_tables();
DROP FUNCTION fencing._lock_protected_tables();

-- The definitions below come from sql/src/, the files the install script is
-- assembled from: the Makefile puts each file a line "--@include FILE" names
-- in its place.  Every definition of the release comes again (CREATE OR
-- REPLACE), the unchanged ones as they were: the upgraded extension has the
-- objects of a fresh install.

--@include sql/src/guard.sql

--@include sql/src/protect.sql

--@include sql/src/citus.sql

--@include sql/src/ddl.sql

--@include sql/src/leases.sql

--@include sql/src/stats.sql

--@include sql/src/compact.sql

--@include sql/src/views.sql

-- Event triggers whose WHEN changed (event triggers cannot be altered, only
-- dropped and created again; sql/src/event_triggers.sql has them as a fresh
-- install does): the follower also sees CREATE TABLE AS and SELECT INTO
-- (state left under a new table's OID goes) and ALTER EXTENSION ... ADD (no
-- relation of a protected tree joins an extension, which DROP EXTENSION
-- would drop it with); the module loads before every command, since any
-- DROP ... CASCADE can drop a partition.
DROP EVENT TRIGGER fencing_after_table_ddl;
CREATE EVENT TRIGGER fencing_after_table_ddl ON ddl_command_end
WHEN TAG IN ('CREATE TABLE', 'ALTER TABLE', 'CREATE SCHEMA', 'CREATE FOREIGN TABLE', 'ALTER TRIGGER',
              'CREATE TRIGGER', 'CREATE TABLE AS', 'SELECT INTO', 'ALTER EXTENSION')
EXECUTE FUNCTION fencing._after_table_ddl();
DROP EVENT TRIGGER fencing_before_drop;
CREATE EVENT TRIGGER fencing_before_drop ON ddl_command_start
EXECUTE FUNCTION fencing._before_drop();

-- State 0.3.0 left behind: temporary tables could be protected, and went
-- (ON COMMIT DROP, the session's end) without sql_drop.  The registry rows,
-- marks and floors under OIDs no relation has, or a temporary one has, go;
-- those of detached and unprotected tables, which exist, stay.
DELETE FROM fencing.deleted_keys d
WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class c
                  WHERE c.oid OPERATOR(pg_catalog.=) d.relid
                    AND c.relpersistence OPERATOR(pg_catalog.<>) 't');
DELETE FROM fencing.floors f
WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class c
                  WHERE c.oid OPERATOR(pg_catalog.=) f.relid
                    AND c.relpersistence OPERATOR(pg_catalog.<>) 't');
DELETE FROM fencing.registry r
WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class c
                  WHERE c.oid OPERATOR(pg_catalog.=) r.relid
                    AND c.relpersistence OPERATOR(pg_catalog.<>) 't');
