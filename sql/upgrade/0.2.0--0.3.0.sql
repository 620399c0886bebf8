-- fencing 0.2.0 -> 0.3.0
\echo Use "ALTER EXTENSION fencing UPDATE TO '0.3.0'" to load this file. \quit

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
-- objects of a fresh install.  Changed in 0.3.0: the guard's settings come
-- from the registry; protect(), unprotect() and the DDL the extension follows
-- run in C (src/ddl.cpp); compact_resources() moves to C (src/compact.cpp):
-- one token domain, and arithmetic that a fence at 2^63 - 1 cannot overflow.

--@include sql/src/registry.sql

-- Every table 0.2.0 guarded (its fencing_guard trigger's arguments, read by
-- 0.2.0's own helper for the last time), and every other table that has
-- marks or floors (a detached partition, a table unprotected before), with
-- the key identity it has now; not the partitions of such tables (their
-- marks and floors are the guarded tree's: protect() and unprotect()
-- register the table, never its partitions).
WITH guarded AS (
	SELECT t.tgrelid AS relid, s.token_column, s.mode
	FROM pg_catalog.pg_trigger t
	JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid AND c.relkind IN ('r', 'p')
	CROSS JOIN LATERAL fencing._guard_settings(t.tgrelid) s
	WHERE t.tgname = 'fencing_guard' AND t.tgparentid = 0 AND t.tgnargs IN (2, 3)
	  AND t.tgfoid = 'fencing.guard()'::pg_catalog.regprocedure
	  AND s.mode IN ('monotonic', 'strict')
), marked AS (
	SELECT c.oid AS relid FROM pg_catalog.pg_class c
	WHERE c.relkind IN ('r', 'p')
	  AND c.oid IN (SELECT d.relid FROM fencing.deleted_keys d UNION SELECT f.relid FROM fencing.floors f)
	  AND c.oid NOT IN (SELECT g.relid FROM guarded g)
), known AS (
	SELECT g.relid, g.token_column, g.mode, true AS protected FROM guarded g
	UNION ALL
	SELECT m.relid, 'last_fencing_token', 'monotonic', false FROM marked m
	WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_partition_ancestors(m.relid) a
	                  WHERE a.relid OPERATOR(pg_catalog.<>) m.relid
	                    AND (a.relid IN (SELECT g.relid FROM guarded g)
	                         OR a.relid IN (SELECT n.relid FROM marked n)))
)
INSERT INTO fencing.registry (relid, token_column, mode, protected, key_columns, key_types, key_collations,
                              key_typmods)
SELECT k.relid, k.token_column, k.mode, k.protected, i.names, i.types, i.collations, i.typmods
FROM known k
LEFT JOIN LATERAL (
	SELECT pg_catalog.array_agg(a.attname ORDER BY n.n) AS names,
	       pg_catalog.array_agg(a.atttypid::pg_catalog.regtype ORDER BY n.n) AS types,
	       pg_catalog.array_agg(CASE WHEN x.indcollation[n.n - 1] OPERATOR(pg_catalog.=) 0 THEN ''
	                            ELSE pg_catalog.quote_ident(cn.nspname) OPERATOR(pg_catalog.||) '.'
	                                 OPERATOR(pg_catalog.||) pg_catalog.quote_ident(co.collname) END
	                            ORDER BY n.n) AS collations,
	       pg_catalog.array_agg(a.atttypmod ORDER BY n.n) AS typmods
	FROM pg_catalog.pg_index x
	CROSS JOIN pg_catalog.unnest(x.indkey::pg_catalog.int2[]) WITH ORDINALITY n(attnum, n)
	JOIN pg_catalog.pg_attribute a ON a.attrelid = k.relid AND a.attnum = n.attnum
	LEFT JOIN pg_catalog.pg_collation co ON co.oid = x.indcollation[n.n - 1]
	LEFT JOIN pg_catalog.pg_namespace cn ON cn.oid = co.collnamespace
	WHERE x.indrelid = k.relid AND x.indisprimary AND n.n <= x.indnkeyatts
) i ON true;

-- Tokens are ordered by generation first (src/tokens.cpp): every
-- (system, timeline) that issued tokens gets its generation - the one its
-- first token carries if this library issued it on 0.2.0's objects, else
-- base 1 (0.2.0's clock tokens are below every generation) - and the table
-- is now dumped.  (Here,
-- while 0.2.0's event triggers still find their helpers.)
ALTER TABLE fencing.token_timelines ADD COLUMN generation bigint;
UPDATE fencing.token_timelines SET generation = CASE
	WHEN first_token OPERATOR(pg_catalog.>=) (513::pg_catalog.int8 OPERATOR(pg_catalog.<<) 42)
	THEN pg_catalog.int8larger((first_token OPERATOR(pg_catalog.>>) 42) OPERATOR(pg_catalog.-) 512,
	                           timeline OPERATOR(pg_catalog.+) 1)
	ELSE timeline OPERATOR(pg_catalog.+) 1 END;
ALTER TABLE fencing.token_timelines ALTER COLUMN generation SET NOT NULL;
SELECT pg_catalog.pg_extension_config_dump('fencing.token_timelines', '');
COMMENT ON TABLE fencing.token_timelines IS
'(system identifier, timeline) pairs that issued tokens, with the first token and the generation of each';
COMMENT ON SEQUENCE fencing.token_seq IS
'a bound at or above every fencing token handed out, for every resource';

-- The guard's settings come from the registry, and the DDL the extension
-- follows is read in C: the helpers that read trigger arguments and
-- definitions go.
DROP FUNCTION fencing._guard_key_changes_near(regclass);
DROP FUNCTION fencing._check_guarded(regclass);
DROP FUNCTION fencing._keep_history(regclass, regclass);
DROP FUNCTION fencing._detached_partitions();

--@include sql/src/guard.sql

--@include sql/src/protect.sql

--@include sql/src/citus.sql

--@include sql/src/ddl.sql

--@include sql/src/leases.sql

--@include sql/src/stats.sql

--@include sql/src/compact.sql

--@include sql/src/views.sql

-- The helpers whose signature changed, and the one 0.2.0's protected_tables
-- read (replaced above by the view of the registry).
DROP FUNCTION fencing._guard_key_changes(regclass);
DROP FUNCTION fencing._guard_truncate(regclass);
DROP FUNCTION fencing._guard_settings(regclass);

-- The new event trigger (sql/src/event_triggers.sql has those of 0.2.0 too).
CREATE EVENT TRIGGER fencing_before_drop ON ddl_command_start
WHEN TAG IN ('DROP TABLE', 'DROP FOREIGN TABLE', 'DROP SCHEMA', 'DROP OWNED')
EXECUTE FUNCTION fencing._before_drop();
