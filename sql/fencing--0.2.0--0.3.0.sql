-- fencing 0.2.0 -> 0.3.0
\echo Use "ALTER EXTENSION fencing UPDATE TO '0.3.0'" to load this file. \quit

-- Every protected table first (src/upgrade.cpp): running writes finish and
-- later ones wait for the update, instead of deadlocking with it.
CREATE FUNCTION fencing._lock_protected_tables() RETURNS void
AS 'MODULE_PATHNAME', 'lock_protected_tables' LANGUAGE C;
SELECT fencing._lock_protected_tables();
DROP FUNCTION fencing._lock_protected_tables();

-- compact_resources() moves to C (src/compact.cpp): one token domain, and
-- arithmetic that a fence at 2^63 - 1 cannot overflow.  Its ACL, owner and
-- comment stay.
CREATE OR REPLACE FUNCTION fencing.compact_resources(below bigint, prefix text DEFAULT '')
RETURNS bigint
AS 'MODULE_PATHNAME', 'compact_resources'
LANGUAGE C VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;

-- The registry: the tables fencing.protect() guards, with their settings and
-- the identity of the primary key their marks were made under (key columns
-- in order, their types, collations and type modifiers; collations by name,
-- since pg_upgrade keeps no collation OIDs).  Written only by protect(),
-- unprotect() and the DDL the extension follows (src/ddl.cpp), with the
-- extension owner's rights; the extension knows its tables from here, never
-- from trigger names.  An unprotected table keeps its row (protected =
-- false): protecting it again under another key identity raises its floor.
CREATE TABLE fencing.registry (
	relid regclass PRIMARY KEY,
	token_column name NOT NULL CHECK (token_column <> ''),
	mode text NOT NULL CHECK (mode IN ('monotonic', 'strict')),
	protected boolean NOT NULL,
	key_columns name[],
	key_types regtype[],
	key_collations text[],
	key_typmods integer[],
	recorded_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
SELECT pg_catalog.pg_extension_config_dump('fencing.registry', '');
REVOKE ALL ON fencing.registry FROM PUBLIC;
COMMENT ON TABLE fencing.registry IS
'tables protected by fencing.protect() (and formerly protected ones), with their settings and key identity';

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

-- The guard's settings come from the registry, and the DDL the extension
-- follows is read in C: the helpers that read trigger arguments and
-- definitions go.
DROP FUNCTION fencing._guard_key_changes_near(regclass);
DROP FUNCTION fencing._check_guarded(regclass);
DROP FUNCTION fencing._keep_history(regclass, regclass);
DROP FUNCTION fencing._detached_partitions();

-- TRUNCATE fires only statement triggers, which PostgreSQL does not clone to
-- partitions: every partition of a protected table gets its own.
CREATE OR REPLACE FUNCTION fencing._guard_truncate(target regclass, token_column name, mode text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	restore boolean := false;
BEGIN
	-- target only, run as its owner (a partition may have another owner than
	-- its protected table: protect() and the event trigger call this for
	-- every relation of the tree), if it has the guard and all its row
	-- triggers (Citus recreates them one by one), and no TRUNCATE trigger yet.
	IF EXISTS (SELECT FROM pg_trigger g
	           WHERE g.tgrelid = target AND g.tgname = 'fencing_guard'
	             AND g.tgfoid = 'fencing.guard()'::regprocedure)
	   AND EXISTS (SELECT FROM pg_trigger g
	               WHERE g.tgrelid = target AND g.tgname = 'fencing_guard_key_changes')
	   AND NOT EXISTS (SELECT FROM pg_trigger g
	                   WHERE g.tgrelid = target AND g.tgname = 'fencing_guard_truncate') THEN
		-- Citus refuses triggers on distributed tables unless told, for this
		-- transaction, that the guard's are fine.
		IF pg_catalog.current_setting('citus.enable_unsafe_triggers', true) = 'off' THEN
			PERFORM pg_catalog.set_config('citus.enable_unsafe_triggers', 'on', true);
			restore := true;
		END IF;
		EXECUTE format('CREATE TRIGGER fencing_guard_truncate BEFORE TRUNCATE ON %s '
		               'FOR EACH STATEMENT EXECUTE FUNCTION fencing.guard()', target);
		IF restore THEN
			PERFORM pg_catalog.set_config('citus.enable_unsafe_triggers', 'off', true);
		END IF;
	END IF;
END
$$;
COMMENT ON FUNCTION fencing._guard_truncate(regclass, name, text) IS
'internal: gives a protected table and each of its partitions a BEFORE TRUNCATE guard';


-- After CREATE or ALTER of a table or trigger: partitions created or attached
-- later get their TRUNCATE guard (their row triggers PostgreSQL clones),
-- partitions detached leave their history to the table, the guard follows
-- key changes and other BEFORE UPDATE triggers, and DDL that would leave a
-- protected table unguarded (or change its token column) is refused.  In C
-- (src/ddl.cpp): it reads the collected commands and the catalogs through C
-- APIs.  It fires for every role's DDL and runs with that role's rights; it
-- writes the extension's tables as the extension owner and changes a
-- table's triggers as the table's owner, with SECURITY_RESTRICTED_OPERATION.
CREATE OR REPLACE FUNCTION fencing._after_table_ddl()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'after_table_ddl'
LANGUAGE C;
COMMENT ON FUNCTION fencing._after_table_ddl() IS
'internal: event trigger keeping protected tables guarded through DDL';


-- Marks, floors and registrations of a dropped table go with it (its OID
-- could be reused).  Runs with the owner's rights; it can only be fired by
-- DROP, for objects really dropped, and reads nothing but catalogs and the
-- extension's own tables.
CREATE OR REPLACE FUNCTION fencing._forget_dropped_marks()
RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	coordinator boolean := false;
	dropped bigint[];
BEGIN
	-- A partition of a protected table dropped without its table: refused.
	PERFORM fencing._refuse_partition_drops();
	DELETE FROM fencing.deleted_keys d
	USING pg_event_trigger_dropped_objects() o
	WHERE o.classid = 'pg_class'::regclass AND o.objsubid = 0 AND d.relid = o.objid;
	DELETE FROM fencing.floors f
	USING pg_event_trigger_dropped_objects() o
	WHERE o.classid = 'pg_class'::regclass AND o.objsubid = 0 AND f.relid = o.objid;
	DELETE FROM fencing.registry r
	USING pg_event_trigger_dropped_objects() o
	WHERE o.classid = 'pg_class'::regclass AND o.objsubid = 0 AND r.relid = o.objid;
	-- Citus: a dropped distributed table's floor, from the coordinator (its
	-- marks table is in the same DROP TABLE: see src/citus.cpp).  Only with
	-- Citus installed and a schema fencing_citus the extension made: anyone
	-- with CREATE on the database can make a schema of that name.
	IF EXISTS (SELECT FROM pg_extension e WHERE e.extname = 'citus')
	   AND fencing._citus_schema_is_ours() THEN
		EXECUTE 'SELECT pg_catalog.citus_is_coordinator()' INTO coordinator;
	END IF;
	IF coordinator THEN
		-- The dropped tables first: the DELETE runs on the nodes, where no drop is.
		SELECT array_agg(o.objid::bigint) INTO dropped FROM pg_event_trigger_dropped_objects() o
		WHERE o.classid = 'pg_class'::regclass AND o.objsubid = 0 AND o.object_type = 'table';
		DELETE FROM fencing_citus.floors WHERE id = ANY (dropped);
	END IF;
END
$$;
COMMENT ON FUNCTION fencing._forget_dropped_marks() IS
'internal: event trigger removing the marks, floors and registrations of dropped tables';


-- Is schema fencing_citus, and its table floors, the extension owner's (made
-- by _citus_floors())?  Any role with CREATE on the database can make a
-- schema of that name first; the extension then never touches it.
CREATE OR REPLACE FUNCTION fencing._citus_schema_is_ours()
RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT EXISTS (SELECT FROM pg_namespace n, pg_class c, pg_class r
	               WHERE n.nspname = 'fencing_citus' AND c.relnamespace = n.oid
	                 AND c.relname = 'floors' AND c.relkind IN ('r', 'p')
	                 AND r.oid = 'fencing.registry'::regclass
	                 AND n.nspowner = r.relowner AND c.relowner = r.relowner)
$$;
COMMENT ON FUNCTION fencing._citus_schema_is_ours() IS
'internal: is schema fencing_citus the one the extension made';


-- Citus: the schema fencing_citus and its reference table of TRUNCATE floors
-- (on every node, keyed by the marks id), made once, owned by the extension
-- owner, who alone writes floors.  Everyone may create a marks table there
-- (protect() does, as the table's owner) and read none but their own; anyone
-- who may protect a table may make both.  A schema of that name made by
-- another role is refused.
CREATE OR REPLACE FUNCTION fencing._citus_floors()
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF pg_catalog.to_regnamespace('fencing_citus') IS NULL THEN
		CREATE SCHEMA fencing_citus;
		GRANT USAGE, CREATE ON SCHEMA fencing_citus TO PUBLIC;
	ELSIF (SELECT n.nspowner FROM pg_namespace n WHERE n.nspname = 'fencing_citus')
	      <> (SELECT c.relowner FROM pg_class c WHERE c.oid = 'fencing.registry'::regclass) THEN
		RAISE EXCEPTION 'schema "fencing_citus" was not made by the fencing extension'
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      DETAIL = 'Another role owns it; the extension keeps the marks of distributed tables there.',
			      HINT = 'Drop or rename that schema, then protect the table again.';
	END IF;
	IF pg_catalog.to_regclass('fencing_citus.floors') IS NULL THEN
		CREATE TABLE fencing_citus.floors (id bigint PRIMARY KEY, token bigint NOT NULL);
		REVOKE ALL ON fencing_citus.floors FROM PUBLIC;
		COMMENT ON TABLE fencing_citus.floors IS 'TRUNCATE floors of protected distributed tables, by marks id';
		PERFORM create_reference_table('fencing_citus.floors');
	ELSIF NOT fencing._citus_schema_is_ours() THEN
		RAISE EXCEPTION 'table fencing_citus.floors was not made by the fencing extension'
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      HINT = 'Drop that table, then protect the table again.';
	END IF;
END
$$;
COMMENT ON FUNCTION fencing._citus_floors() IS
'internal: makes the schema fencing_citus and its table of floors on Citus';


-- The AFTER UPDATE trigger that checks a changed key against the marks of
-- its deletions and the table's floor.  It must run after the new key is in
-- the primary key index, so that a write racing the DELETE of that key waits
-- for it and then sees its mark.  When nothing but the UPDATE itself can
-- change a row's key, it is AFTER UPDATE OF the key columns, which costs a
-- statement nothing more than a column check; when the table or one of its
-- partitions has other BEFORE UPDATE row triggers, which can change the key
-- without the UPDATE naming it, AFTER UPDATE WHEN the key changed, which
-- costs a few microseconds a statement (the condition is read and compiled
-- for each execution).  Made by protect(), and again by the event trigger
-- when such a trigger is created; the guard refuses an UPDATE on a relation
-- whose other BEFORE UPDATE row triggers it finds without the WHEN form.
CREATE OR REPLACE FUNCTION fencing._guard_key_changes(target regclass, token_column name, mode text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	arguments text;
	nargs int2;
	by_triggers boolean;
	has_when boolean;
	key_columns text;
	unsafe_triggers text := pg_catalog.current_setting('citus.enable_unsafe_triggers', true);
BEGIN
	SELECT t.tgnargs INTO nargs FROM pg_trigger t
	WHERE t.tgrelid = target AND t.tgname = 'fencing_guard' AND t.tgparentid = 0
	  AND t.tgfoid = 'fencing.guard()'::regprocedure;
	IF NOT FOUND THEN
		RETURN;
	END IF;
	-- The guard's arguments, from the settings the registry holds (and on a
	-- Citus distributed table its marks id, its own OID): never read back
	-- from a trigger definition.
	arguments := format('fencing.guard(%L, %L%s)', token_column, mode,
	                    CASE WHEN nargs = 3 THEN format(', %L', target::oid) ELSE '' END);
	-- BEFORE (2) ROW (1) UPDATE (16) triggers that are not the guard's.
	by_triggers := EXISTS (SELECT FROM fencing._tree(target) tr JOIN pg_trigger t ON t.tgrelid = tr.relid
	                       WHERE t.tgfoid <> 'fencing.guard()'::regprocedure
	                         AND (t.tgtype::int & 19) = 19);
	SELECT t.tgqual IS NOT NULL INTO has_when FROM pg_trigger t
	WHERE t.tgrelid = target AND t.tgname = 'fencing_guard_key_changes';
	IF has_when = by_triggers THEN
		RETURN;
	END IF;
	PERFORM fencing._refuse_pending_detach(target);
	-- No primary key (a key column dropped with CASCADE): the error that says so.
	PERFORM fencing._key_change_condition(target);
	IF unsafe_triggers = 'off' THEN
		PERFORM pg_catalog.set_config('citus.enable_unsafe_triggers', 'on', true);
	END IF;
	IF has_when IS NOT NULL THEN
		EXECUTE format('DROP TRIGGER fencing_guard_key_changes ON %s', target);
	END IF;
	IF by_triggers THEN
		EXECUTE format('CREATE TRIGGER fencing_guard_key_changes AFTER UPDATE ON %s '
		               'FOR EACH ROW WHEN (%s) EXECUTE FUNCTION %s',
		               target, fencing._key_change_condition(target), arguments);
	ELSE
		SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY k.n) INTO key_columns
		FROM pg_index i, unnest(i.indkey) WITH ORDINALITY k(attnum, n), pg_attribute a
		WHERE i.indrelid = target AND i.indisprimary
		  AND a.attrelid = target AND a.attnum = k.attnum;
		EXECUTE format('CREATE TRIGGER fencing_guard_key_changes AFTER UPDATE OF %s ON %s '
		               'FOR EACH ROW EXECUTE FUNCTION %s',
		               key_columns, target, arguments);
	END IF;
	IF unsafe_triggers = 'off' THEN
		PERFORM pg_catalog.set_config('citus.enable_unsafe_triggers', 'off', true);
	END IF;
END
$$;
COMMENT ON FUNCTION fencing._guard_key_changes(regclass, name, text) IS
'internal: (re)makes the guard''s AFTER UPDATE trigger for key changes in the form the table''s triggers need';


-- Protect a table: token column, guard triggers and the registry.  For the
-- table's owner; the guard is made by _protect() running as the owner with
-- SECURITY_RESTRICTED_OPERATION (src/ddl.cpp), then the registry records
-- the table and its key identity (raising the floor for new keys if its
-- marks were made under another identity).
CREATE OR REPLACE FUNCTION fencing.protect(
	target regclass,
	token_column name DEFAULT 'last_fencing_token',
	mode text DEFAULT 'monotonic')
RETURNS void
AS 'MODULE_PATHNAME', 'protect'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION fencing.protect(regclass, name, text) IS
'guards a table: every write must present a fencing token no older than the row''s (monotonic) or newer (strict)';


-- Whether a column's default is absent or the bigint constant 0, read from
-- the catalog's expression tree in C.
CREATE OR REPLACE FUNCTION fencing._default_is_zero(target regclass, column_name name)
RETURNS boolean
AS 'MODULE_PATHNAME', 'default_is_zero'
LANGUAGE C STABLE STRICT;
COMMENT ON FUNCTION fencing._default_is_zero(regclass, name) IS
'internal: is a column''s default absent or the constant 0';


-- The guard's triggers and token column, made by protect() as the table's owner.
CREATE OR REPLACE FUNCTION fencing._protect(target regclass, token_column name, mode text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	kind "char";
	col record;
	parent regclass;
	citus_id bigint;
	arguments text;
	unsafe_triggers text := current_setting('citus.enable_unsafe_triggers', true);
BEGIN
	IF target IS NULL OR token_column IS NULL OR mode IS NULL THEN
		RAISE EXCEPTION 'fencing.protect() arguments must not be null'
			USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF mode NOT IN ('monotonic', 'strict') THEN
		RAISE EXCEPTION 'mode must be ''monotonic'' or ''strict'', got ''%''', mode
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF token_column = '' THEN
		RAISE EXCEPTION 'token column name must not be empty'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	SELECT c.relkind INTO kind FROM pg_class c WHERE c.oid = target;
	IF kind IS NULL THEN
		RAISE EXCEPTION 'relation with OID % does not exist', target::oid
			USING ERRCODE = 'undefined_table';
	END IF;
	IF kind NOT IN ('r', 'p') THEN
		RAISE EXCEPTION '"%" is not a table', target
			USING ERRCODE = 'wrong_object_type';
	END IF;
	IF (SELECT c.relnamespace FROM pg_class c WHERE c.oid = target) = 'fencing'::regnamespace THEN
		RAISE EXCEPTION 'relation "%" belongs to the fencing extension', target
			USING ERRCODE = 'wrong_object_type';
	END IF;
	PERFORM fencing._refuse_partition_guard(target);
	PERFORM fencing._refuse_pending_detach(target);
	SELECT p.relation INTO parent FROM pg_partition_tree(target) t
	JOIN fencing.protected_tables p ON p.relation = t.relid
	WHERE t.relid <> target;
	IF FOUND THEN
		RAISE EXCEPTION 'partition "%" of relation "%" is protected on its own', parent, target
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      HINT = 'Run fencing.unprotect() on the partition first; its marks stay.';
	END IF;
	IF EXISTS (SELECT FROM pg_inherits i WHERE i.inhparent = target) AND kind <> 'p' THEN
		RAISE EXCEPTION 'relation "%" has inheritance children', target
			USING ERRCODE = 'feature_not_supported',
			      DETAIL = 'Writes through the table reach its children, which the guard would not cover.',
			      HINT = 'Use declarative partitioning, whose partitions take the guard.';
	END IF;
	IF EXISTS (SELECT FROM fencing._tree(target) t JOIN pg_class c ON c.oid = t.relid
	           WHERE c.relpersistence = 'u') THEN
		RAISE EXCEPTION 'relation "%" is unlogged', target
			USING ERRCODE = 'feature_not_supported',
			      DETAIL = 'An unlogged table loses its rows in a crash, and with them their tokens.';
	END IF;
	PERFORM fencing._key_change_condition(target);
	-- A Citus distributed table: its marks table, made before any change to
	-- the table (Citus makes it only before parallel work in a transaction),
	-- and below, Citus' consent to triggers on it for this transaction only:
	-- they run on its shards, where the guard keeps the marks co-located.
	citus_id := fencing._citus_marks(target);

	SELECT a.attnum, a.atttypid, a.attgenerated, a.attidentity INTO col
	FROM pg_attribute a
	WHERE a.attrelid = target AND a.attname = token_column AND a.attnum > 0 AND NOT a.attisdropped;
	IF NOT FOUND THEN
		EXECUTE format('ALTER TABLE %s ADD COLUMN %I bigint NOT NULL DEFAULT 0', target, token_column);
	ELSIF col.atttypid <> 'pg_catalog.int8'::regtype THEN
		RAISE EXCEPTION 'fencing token column "%" of relation "%" must be of type bigint, not %',
			token_column, target, format_type(col.atttypid, NULL)
			USING ERRCODE = 'datatype_mismatch';
	ELSIF col.attgenerated <> '' THEN
		RAISE EXCEPTION 'fencing token column "%" of relation "%" must not be a generated column',
			token_column, target
			USING ERRCODE = 'invalid_column_definition';
	ELSIF col.attidentity <> '' OR NOT fencing._default_is_zero(target, token_column) THEN
		-- An INSERT that names no token would present the default as its own.
		RAISE EXCEPTION 'fencing token column "%" of relation "%" must have no default but 0',
			token_column, target
			USING ERRCODE = 'invalid_column_definition';
	ELSIF EXISTS (SELECT FROM pg_index i
	              WHERE i.indrelid = target AND i.indisprimary AND col.attnum = ANY (i.indkey)) THEN
		RAISE EXCEPTION 'fencing token column "%" of relation "%" must not be part of the primary key',
			token_column, target
			USING ERRCODE = 'invalid_parameter_value';
	END IF;

	arguments := format('%L, %L', token_column, mode);
	IF citus_id IS NOT NULL THEN
		arguments := arguments || format(', %L', citus_id);
		PERFORM set_config('citus.enable_unsafe_triggers', 'on', true);
	END IF;

	-- BEFORE: every write against its row.  AFTER INSERT, and AFTER UPDATE
	-- of the key (_guard_key_changes: also by another trigger): the new key
	-- against the marks of its deletions and the table's floor.  BEFORE TRUNCATE: the
	-- statement's token against every row, then the floor.
	PERFORM fencing._drop_guard(target);
	EXECUTE format('CREATE TRIGGER fencing_guard BEFORE INSERT OR UPDATE OR DELETE ON %s '
	               'FOR EACH ROW EXECUTE FUNCTION fencing.guard(%s)',
	               target, arguments);
	EXECUTE format('CREATE TRIGGER fencing_guard_new_keys AFTER INSERT ON %s '
	               'FOR EACH ROW EXECUTE FUNCTION fencing.guard(%s)',
	               target, arguments);
	PERFORM fencing._guard_key_changes(target, token_column, mode);
	-- The TRUNCATE triggers: protect() makes them next, on each relation of
	-- the tree as its owner.
	IF citus_id IS NOT NULL THEN
		PERFORM set_config('citus.enable_unsafe_triggers', unsafe_triggers, true);
	END IF;
END
$$;
COMMENT ON FUNCTION fencing._protect(regclass, name, text) IS
'internal: installs the guard''s triggers; called by protect() as the table''s owner';


-- Unprotect a table: the guard goes; the token column, its values, the marks
-- and the registry's record of its key identity stay.
CREATE OR REPLACE FUNCTION fencing.unprotect(target regclass)
RETURNS void
AS 'MODULE_PATHNAME', 'unprotect'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION fencing.unprotect(regclass) IS
'removes the guard from a table; its token column, values and marks stay';


-- The guard's triggers go, dropped by unprotect() as the table's owner.
CREATE OR REPLACE FUNCTION fencing._unprotect(target regclass)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF target IS NULL THEN
		RAISE EXCEPTION 'target must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	PERFORM fencing._refuse_partition_guard(target);
	IF NOT fencing._drop_guard(target) THEN
		RAISE NOTICE 'relation "%" is not protected, skipping', target;
	END IF;
END
$$;
COMMENT ON FUNCTION fencing._unprotect(regclass) IS
'internal: drops the guard''s triggers; called by unprotect() as the table''s owner';


-- The protected tables and their settings, from the registry.
CREATE OR REPLACE VIEW fencing.protected_tables AS
SELECT r.relid AS relation, r.token_column, r.mode
FROM fencing.registry r
WHERE r.protected;
GRANT SELECT ON fencing.protected_tables TO PUBLIC;
COMMENT ON VIEW fencing.protected_tables IS
'tables guarded by fencing.protect(): token column and mode';


-- The highest token the storage holds: every protected table's token column,
-- deleted-key mark, truncate floor, fence and lease.  The number to reseed an
-- external token source (a Redis counter, an etcd revision offset) with after
-- it lost its state.  It reads every protected table, so it runs with the
-- owner's rights and is for the owner, or roles the owner grants it to.
-- Temporary tables are skipped: they are not storage that outlives a session
-- (and other sessions' cannot be read).
CREATE OR REPLACE FUNCTION fencing.high_water_mark()
RETURNS bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET row_security = off
AS $$
DECLARE
	t record;
	m bigint;
	result bigint;
BEGIN
	SELECT pg_catalog.max(x) INTO result FROM (
		SELECT pg_catalog.max(token) FROM fencing.deleted_keys
		UNION ALL SELECT pg_catalog.max(token) FROM fencing.floors
		UNION ALL SELECT pg_catalog.max(token) FROM fencing.fences
		UNION ALL SELECT pg_catalog.max(token) FROM fencing.resources
		UNION ALL SELECT pg_catalog.max(token) FROM fencing.resource_floors) s(x);
	-- Every protected table's token column and the Citus marks tables, read
	-- in C (_highest_token): no operator, cast or function of the tables'
	-- owners is looked up, so nothing they defined runs with these rights.
	FOR t IN SELECT r.relid AS relation, r.token_column
	         FROM fencing.registry r JOIN pg_catalog.pg_class c ON c.oid = r.relid
	         WHERE r.protected AND c.relpersistence <> 't'
	         UNION ALL
	         SELECT c.oid::regclass, 'token' FROM pg_catalog.pg_class c
	         WHERE fencing._citus_schema_is_ours()
	           AND c.relnamespace = pg_catalog.to_regnamespace('fencing_citus')
	           AND c.relkind = 'r' AND c.relname ~ '^(marks_[0-9]+|floors)$' LOOP
		m := fencing._highest_token(t.relation, t.token_column);
		IF m > result OR result IS NULL THEN
			result := m;
		END IF;
	END LOOP;
	IF result > 9007199254740991 THEN
		RAISE WARNING 'the highest stored token, %, is above 2^53 - 1', result
			USING DETAIL = 'A table owner stored it; clients that read numbers as doubles (JavaScript, JSON) cannot use it exactly.',
			      HINT = 'Find it with SELECT max(<token column>) on the protected tables before reseeding from it.';
	END IF;
	RETURN COALESCE(result, 0);
END
$$;
REVOKE ALL ON FUNCTION fencing.high_water_mark() FROM PUBLIC;
COMMENT ON FUNCTION fencing.high_water_mark() IS
'the highest token held by protected tables, deleted-key marks, truncate floors, fences and leases; 0 if none';

-- The highest value of a bigint column over a table and its partitions, read
-- in C (src/ddl.cpp); for high_water_mark().
CREATE FUNCTION fencing._highest_token(rel regclass, token_column name)
RETURNS bigint
AS 'MODULE_PATHNAME', 'highest_token'
LANGUAGE C STABLE;
COMMENT ON FUNCTION fencing._highest_token(regclass, name) IS
'internal: the highest value of a bigint column of a table and its partitions, read in C';
REVOKE ALL ON FUNCTION fencing._highest_token(regclass, name) FROM PUBLIC;



-- A partition of a protected table is not dropped while attached (its
-- rows' tokens would go with it); DETACH PARTITION first keeps its history.
-- Before a DROP that can drop tables, _before_drop() loads the module, whose
-- object access hook records every partition the command drops (whatever
-- the route: DROP TABLE, DROP SCHEMA ... CASCADE, DROP OWNED); at sql_drop,
-- _refuse_partition_drops() refuses those whose protected table stays.  In
-- C (src/ddl.cpp), with the dropping role's rights.
CREATE FUNCTION fencing._before_drop()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'before_drop'
LANGUAGE C;
COMMENT ON FUNCTION fencing._before_drop() IS
'internal: event trigger loading the module before a DROP, so that it sees dropped partitions';
CREATE EVENT TRIGGER fencing_before_drop ON ddl_command_start
WHEN TAG IN ('DROP TABLE', 'DROP FOREIGN TABLE', 'DROP SCHEMA', 'DROP OWNED')
EXECUTE FUNCTION fencing._before_drop();

CREATE FUNCTION fencing._refuse_partition_drops()
RETURNS void
AS 'MODULE_PATHNAME', 'refuse_partition_drops'
LANGUAGE C;
COMMENT ON FUNCTION fencing._refuse_partition_drops() IS
'internal: refuses a DROP that takes a partition of a protected table without the table';

DROP FUNCTION fencing._guard_key_changes(regclass);
DROP FUNCTION fencing._guard_truncate(regclass);
DROP FUNCTION fencing._guard_settings(regclass);

-- A partition's guard is its protected table's: _drop_guard() refuses it.
CREATE OR REPLACE FUNCTION fencing._drop_guard(target regclass)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	t record;
	protected boolean;
	restore boolean := false;
BEGIN
	-- A partition's guard is its protected table's: never dropped here.
	PERFORM fencing._refuse_partition_guard(target);
	-- The TRUNCATE triggers of its partitions belong to a protected table; an
	-- unprotected one (say, the parent of a partition protected on its own)
	-- has none to drop there.
	protected := EXISTS (SELECT FROM pg_trigger g
	                     WHERE g.tgrelid = target AND g.tgname = 'fencing_guard' AND g.tgparentid = 0);
	-- Citus refuses trigger DDL on distributed tables unless told, for this
	-- transaction, that the guard's triggers are fine.
	IF pg_catalog.current_setting('citus.enable_unsafe_triggers', true) = 'off' THEN
		PERFORM pg_catalog.set_config('citus.enable_unsafe_triggers', 'on', true);
		restore := true;
	END IF;
	FOR t IN
		SELECT g.tgrelid::regclass AS rel, g.tgname FROM pg_trigger g
		WHERE g.tgparentid = 0
		  AND ((g.tgrelid = target
		        AND g.tgname IN ('fencing_guard', 'fencing_guard_keys', 'fencing_guard_new_keys',
		                         'fencing_guard_key_changes', 'fencing_guard_truncate'))
		       OR (protected AND g.tgname = 'fencing_guard_truncate'
		           AND g.tgrelid IN (SELECT tr.relid FROM fencing._tree(target) tr)))
	LOOP
		EXECUTE format('DROP TRIGGER %I ON %s', t.tgname, t.rel);
	END LOOP;
	IF restore THEN
		PERFORM pg_catalog.set_config('citus.enable_unsafe_triggers', 'off', true);
	END IF;
	RETURN protected;
END
$$;
COMMENT ON FUNCTION fencing._drop_guard(regclass) IS
'internal: drops the guard''s triggers; used by protect() and unprotect()';
