-- fencing 0.3.0 -> 0.4.0
\echo Use "ALTER EXTENSION fencing UPDATE TO '0.4.0'" to load this file. \quit

-- Every protected table first (src/upgrade.cpp): running writes finish and
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
