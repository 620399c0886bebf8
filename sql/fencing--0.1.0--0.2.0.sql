-- fencing 0.1.0 -> 0.2.0
\echo Use "ALTER EXTENSION fencing UPDATE TO '0.2.0'" to load this file. \quit

-- 0.2.0 changes nothing outside the extension's own objects.  0.1.0 added
-- the module to this database's session_preload_libraries; take that back,
-- keeping any other entries.
DO $$
DECLARE
	entries text[];
	kept text[];
BEGIN
	SELECT pg_catalog.string_to_array(
	           pg_catalog.substr(c, pg_catalog.length('session_preload_libraries=') + 1), ',')
	INTO entries
	FROM pg_catalog.pg_db_role_setting s, pg_catalog.unnest(s.setconfig) c
	WHERE s.setrole = 0
	  AND s.setdatabase = (SELECT d.oid FROM pg_catalog.pg_database d
	                       WHERE d.datname = pg_catalog.current_database())
	  AND c LIKE 'session\_preload\_libraries=%';
	IF entries IS NULL THEN
		RETURN;
	END IF;
	SELECT pg_catalog.array_agg(e) INTO kept
	FROM pg_catalog.unnest(entries) e
	WHERE pg_catalog.btrim(e, ' "') NOT IN ('fencing', '$libdir/fencing');
	IF kept IS NOT DISTINCT FROM entries THEN
		RETURN;
	ELSIF kept IS NULL THEN
		EXECUTE pg_catalog.format('ALTER DATABASE %I RESET session_preload_libraries',
		                          pg_catalog.current_database());
	ELSE
		EXECUTE pg_catalog.format('ALTER DATABASE %I SET session_preload_libraries = %L',
		                          pg_catalog.current_database(),
		                          pg_catalog.array_to_string(kept, ','));
	END IF;
END
$$;

-- Helpers that are not API now start with an underscore.
DROP EVENT TRIGGER fencing_forget_dropped_marks;
DROP FUNCTION fencing.forget_dropped_marks();
DROP FUNCTION fencing.primary_key_columns(regclass);

-- Marks are named by the hash of the key's binary images instead of its
-- text (which depended on session settings) and have a bounded size.  A mark
-- whose table is gone, or whose key no longer reads as the table's primary
-- key, names no row that could come back and is dropped.
CREATE FUNCTION fencing._key_hash_0_1_0(relid regclass, key text[])
RETURNS bytea
AS 'MODULE_PATHNAME', 'key_hash_0_1_0'
LANGUAGE C STABLE;
ALTER TABLE fencing.deleted_keys RENAME TO deleted_keys_0_1_0;
ALTER TABLE fencing.deleted_keys_0_1_0 RENAME CONSTRAINT deleted_keys_pkey TO deleted_keys_0_1_0_pkey;
CREATE TABLE fencing.deleted_keys (
	relid regclass NOT NULL,
	key bytea NOT NULL CHECK (pg_catalog.length(key) = 32),
	token bigint NOT NULL CHECK (token > 0),
	deleted_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	PRIMARY KEY (relid, key)
);
SELECT pg_catalog.pg_extension_config_dump('fencing.deleted_keys', '');
REVOKE ALL ON fencing.deleted_keys FROM PUBLIC;
COMMENT ON TABLE fencing.deleted_keys IS
'deleted-key marks: a key deleted under a token cannot be inserted again under an older one';

INSERT INTO fencing.deleted_keys (relid, key, token, deleted_at)
SELECT relid, key, pg_catalog.max(token), pg_catalog.max(deleted_at)
FROM (SELECT relid, fencing._key_hash_0_1_0(relid, key) AS key, token, deleted_at
      FROM fencing.deleted_keys_0_1_0) converted
WHERE key IS NOT NULL
GROUP BY relid, key;
-- Out of the extension first, so that it also leaves pg_dump's list of
-- extension configuration tables.
ALTER EXTENSION fencing DROP TABLE fencing.deleted_keys_0_1_0;
DROP TABLE fencing.deleted_keys_0_1_0;
DROP FUNCTION fencing._key_hash_0_1_0(regclass, text[]);

CREATE TABLE fencing.floors (
	relid regclass PRIMARY KEY,
	token bigint NOT NULL CHECK (token > 0),
	raised_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
SELECT pg_catalog.pg_extension_config_dump('fencing.floors', '');
REVOKE ALL ON fencing.floors FROM PUBLIC;
COMMENT ON TABLE fencing.floors IS
'table floors: a table truncated under a token accepts no new key under an older one';

-- Errors unless the table has an immediate primary key the guard can mark;
-- returns the condition "the key changed" for the AFTER UPDATE trigger.
CREATE FUNCTION fencing._key_change_condition(target regclass)
RETURNS text
AS 'MODULE_PATHNAME', 'key_change_condition'
LANGUAGE C STABLE;
COMMENT ON FUNCTION fencing._key_change_condition(regclass) IS
'internal: checks that protect() can guard the primary key of a table';

-- Drops the guard's triggers from a table (and its TRUNCATE triggers from
-- its partitions); false if it had none.
CREATE FUNCTION fencing._drop_guard(target regclass)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	t record;
	dropped boolean := false;
BEGIN
	FOR t IN
		SELECT g.tgrelid::regclass AS rel, g.tgname FROM pg_trigger g
		WHERE g.tgparentid = 0
		  AND ((g.tgrelid = target
		        AND g.tgname IN ('fencing_guard', 'fencing_guard_keys', 'fencing_guard_new_keys',
		                         'fencing_guard_key_changes', 'fencing_guard_truncate'))
		       OR (g.tgname = 'fencing_guard_truncate'
		           AND g.tgrelid IN (SELECT p.relid FROM pg_partition_tree(target) p)))
	LOOP
		EXECUTE format('DROP TRIGGER %I ON %s', t.tgname, t.rel);
		dropped := dropped OR t.rel = target;
	END LOOP;
	RETURN dropped;
END
$$;
COMMENT ON FUNCTION fencing._drop_guard(regclass) IS
'internal: drops the guard''s triggers; used by protect() and unprotect()';

-- TRUNCATE fires only statement triggers, which PostgreSQL does not clone to
-- partitions: every partition of a protected table gets its own.
CREATE FUNCTION fencing._guard_truncate(target regclass)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	rel regclass;
BEGIN
	FOR rel IN
		SELECT r FROM (SELECT target UNION SELECT p.relid FROM pg_partition_tree(target) p) t(r)
		WHERE EXISTS (SELECT FROM pg_trigger g
		              WHERE g.tgrelid = t.r AND g.tgname = 'fencing_guard'
		                AND g.tgfoid = 'fencing.guard()'::regprocedure)
		  AND NOT EXISTS (SELECT FROM pg_trigger g
		                  WHERE g.tgrelid = t.r AND g.tgname = 'fencing_guard_truncate')
	LOOP
		EXECUTE format('CREATE TRIGGER fencing_guard_truncate BEFORE TRUNCATE ON %s '
		               'FOR EACH STATEMENT EXECUTE FUNCTION fencing.guard()', rel);
	END LOOP;
END
$$;
COMMENT ON FUNCTION fencing._guard_truncate(regclass) IS
'internal: gives a protected table and each of its partitions a BEFORE TRUNCATE guard';

-- Partitions created or attached later get their TRUNCATE guard here (their
-- row triggers are cloned by PostgreSQL).  It fires for every role's CREATE
-- and ALTER TABLE, also roles without USAGE on schema fencing, so it runs
-- with the extension owner's rights; all it can do is add the guard's own
-- TRUNCATE trigger to partitions that already carry the guard.
CREATE FUNCTION fencing._guard_new_partitions()
RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	rel regclass;
BEGIN
	FOR rel IN
		SELECT DISTINCT c.objid::regclass FROM pg_event_trigger_ddl_commands() c
		JOIN pg_class r ON r.oid = c.objid
		WHERE c.classid = 'pg_class'::regclass AND r.relkind IN ('r', 'p')
	LOOP
		PERFORM fencing._guard_truncate(rel);
	END LOOP;
END
$$;
COMMENT ON FUNCTION fencing._guard_new_partitions() IS
'internal: event trigger giving new partitions of protected tables their TRUNCATE guard';
CREATE EVENT TRIGGER fencing_guard_new_partitions ON ddl_command_end
WHEN TAG IN ('CREATE TABLE', 'ALTER TABLE')
EXECUTE FUNCTION fencing._guard_new_partitions();

-- Marks and floors of a dropped table go with it (its OID could be reused).
-- Runs with the owner's rights; it can only be fired by DROP, for objects
-- really dropped.
CREATE FUNCTION fencing._forget_dropped_marks()
RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	DELETE FROM fencing.deleted_keys d
	USING pg_event_trigger_dropped_objects() o
	WHERE o.classid = 'pg_class'::regclass AND o.objsubid = 0 AND d.relid = o.objid;
	DELETE FROM fencing.floors f
	USING pg_event_trigger_dropped_objects() o
	WHERE o.classid = 'pg_class'::regclass AND o.objsubid = 0 AND f.relid = o.objid;
END
$$;
COMMENT ON FUNCTION fencing._forget_dropped_marks() IS
'internal: event trigger removing the marks and floors of dropped tables';
CREATE EVENT TRIGGER fencing_forget_dropped_marks ON sql_drop
EXECUTE FUNCTION fencing._forget_dropped_marks();

-- The guard's triggers changed (AFTER UPDATE when the key changed, instead of
-- UPDATE OF the key columns; BEFORE TRUNCATE): protect every protected table
-- again with its own settings.
DROP FUNCTION fencing.drop_guard(regclass);
-- Protect a table: token column, guard triggers, settings (in the triggers' arguments).
CREATE OR REPLACE FUNCTION fencing.protect(
	target regclass,
	token_column name DEFAULT 'last_fencing_token',
	mode text DEFAULT 'monotonic')
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	kind "char";
	col record;
	key_changed text;
	parent regclass;
BEGIN
	IF target IS NULL OR token_column IS NULL OR mode IS NULL THEN
		RAISE EXCEPTION 'fencing.protect() arguments must not be null'
			USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF mode NOT IN ('monotonic', 'strict') THEN
		RAISE EXCEPTION 'mode must be ''monotonic'' or ''strict'', got ''%''', mode
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
	SELECT g.tgrelid::regclass INTO parent FROM pg_trigger c, pg_trigger g
	WHERE c.tgrelid = target AND c.tgname = 'fencing_guard' AND c.tgparentid <> 0
	  AND g.oid = c.tgparentid;
	IF FOUND THEN
		RAISE EXCEPTION 'relation "%" is a partition of protected table "%"', target, parent
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      HINT = 'Its guard comes from that table; change it there.';
	END IF;
	key_changed := fencing._key_change_condition(target);

	SELECT a.attnum, a.atttypid, a.attgenerated INTO col
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
	ELSIF EXISTS (SELECT FROM pg_index i
	              WHERE i.indrelid = target AND i.indisprimary AND col.attnum = ANY (i.indkey)) THEN
		RAISE EXCEPTION 'fencing token column "%" of relation "%" must not be part of the primary key',
			token_column, target
			USING ERRCODE = 'invalid_parameter_value';
	END IF;

	-- BEFORE: every write against its row.  AFTER INSERT, and AFTER UPDATE
	-- when the key changed (also by another trigger): the new key against the
	-- marks of its deletions and the table's floor.  BEFORE TRUNCATE: the
	-- statement's token against every row, then the floor.
	PERFORM fencing._drop_guard(target);
	EXECUTE format('CREATE TRIGGER fencing_guard BEFORE INSERT OR UPDATE OR DELETE ON %s '
	               'FOR EACH ROW EXECUTE FUNCTION fencing.guard(%L, %L)',
	               target, token_column, mode);
	EXECUTE format('CREATE TRIGGER fencing_guard_new_keys AFTER INSERT ON %s '
	               'FOR EACH ROW EXECUTE FUNCTION fencing.guard(%L, %L)',
	               target, token_column, mode);
	EXECUTE format('CREATE TRIGGER fencing_guard_key_changes AFTER UPDATE ON %s '
	               'FOR EACH ROW WHEN (%s) EXECUTE FUNCTION fencing.guard(%L, %L)',
	               target, key_changed, token_column, mode);
	PERFORM fencing._guard_truncate(target);
END
$$;
COMMENT ON FUNCTION fencing.protect(regclass, name, text) IS
'guards a table: every write must present a fencing token no older than the row''s (monotonic) or newer (strict)';

-- Unprotect a table: the guard goes, the token column, its values and the marks stay.
CREATE OR REPLACE FUNCTION fencing.unprotect(target regclass)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF target IS NULL THEN
		RAISE EXCEPTION 'target must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF NOT fencing._drop_guard(target) THEN
		RAISE NOTICE 'relation "%" is not protected, skipping', target;
	END IF;
END
$$;
COMMENT ON FUNCTION fencing.unprotect(regclass) IS
'removes the guard from a table; its token column, values and marks stay';

SELECT fencing.protect(relation, token_column, mode) FROM fencing.protected_tables;

-- Comments on what did not change.
COMMENT ON FUNCTION fencing.token_accepts(bigint, bigint, boolean) IS
'may a write presenting token "presented" follow the stored token? (strict: only a greater one; NULL stored counts as 0)';
COMMENT ON FUNCTION fencing.guard() IS
'trigger function of the storage guard; installed by fencing.protect(), not called directly';
COMMENT ON VIEW fencing.protected_tables IS
'tables guarded by fencing.protect(): token column and mode';
COMMENT ON FUNCTION fencing.fenced_update(regclass, jsonb, bigint, jsonb, text) IS
'updates one row, named by its primary key, iff its stored token accepts the token; true if applied';
COMMENT ON SEQUENCE fencing.token_seq IS 'fencing tokens of every grant, for every resource';
COMMENT ON TABLE fencing.resources IS 'lease state, one row per resource; read it through fencing.leases';
COMMENT ON TABLE fencing.fences IS 'high-water marks of resources fenced with fencing.fence()';
COMMENT ON VIEW fencing.leases IS 'leases granted by fencing.acquire(); live by the server''s clock now';
COMMENT ON FUNCTION fencing.acquire(text, text, interval) IS
'grants the lease on a resource if no live lease holds it and returns a new fencing token; NULL otherwise';
COMMENT ON FUNCTION fencing.renew(text, text, bigint, interval) IS
'extends a live lease held by (holder, token); false if it was lost';
COMMENT ON FUNCTION fencing.release(text, text, bigint) IS
'ends a live lease held by (holder, token); false if it was lost';
COMMENT ON FUNCTION fencing.fence(text, bigint) IS
'compares and advances a resource''s high-water mark, holding its lock until the transaction ends; returns the previous mark';
