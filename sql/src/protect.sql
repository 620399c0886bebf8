-- protect(), unprotect() and the helpers that make and drop the guard's
-- triggers.  Definitions (CREATE OR REPLACE).

-- Errors unless the table has an immediate primary key the guard can mark;
-- returns the condition "the key changed" for the AFTER UPDATE trigger.
CREATE OR REPLACE FUNCTION fencing._key_change_condition(target regclass)
RETURNS text
AS 'MODULE_PATHNAME', 'key_change_condition'
LANGUAGE C STABLE;
COMMENT ON FUNCTION fencing._key_change_condition(regclass) IS
'internal: checks that protect() can guard the primary key of a table';

-- A table and, if it is partitioned, all of its partitions (pg_partition_tree
-- alone returns nothing for a table that is not partitioned).
CREATE OR REPLACE FUNCTION fencing._tree(rel regclass, OUT relid regclass, OUT isleaf boolean)
RETURNS SETOF record
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT rel, (SELECT c.relkind <> 'p' FROM pg_class c WHERE c.oid = rel)
	UNION
	SELECT t.relid, t.isleaf FROM pg_partition_tree(rel) t
$$;
COMMENT ON FUNCTION fencing._tree(regclass) IS 'internal: a table and its partitions';

-- Drops the guard's triggers from a table (and its TRUNCATE triggers from
-- its partitions); false if it had none.
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

-- Errors if a partition's guard is its protected table's (cloned with the
-- partition): protect() and unprotect() change it on that table only.
CREATE OR REPLACE FUNCTION fencing._refuse_partition_guard(target regclass)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	parent regclass;
BEGIN
	SELECT g.tgrelid::regclass INTO parent FROM pg_trigger c, pg_trigger g
	WHERE c.tgrelid = target AND c.tgname = 'fencing_guard' AND c.tgparentid <> 0
	  AND g.oid = c.tgparentid;
	IF FOUND THEN
		RAISE EXCEPTION 'relation "%" is a partition of protected table "%"', target, parent
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      HINT = 'Its guard comes from that table: change it there, or detach the partition.';
	END IF;
END
$$;
COMMENT ON FUNCTION fencing._refuse_partition_guard(regclass) IS
'internal: refuses to change the guard of a partition, which comes from its protected table';

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

-- Errors while a partition of the table is being detached concurrently:
-- triggers made on the table now would not reach it, and it would keep its
-- rows unguarded until the detach is finished.
CREATE OR REPLACE FUNCTION fencing._refuse_pending_detach(target regclass)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	pending regclass;
BEGIN
	SELECT i.inhrelid::regclass INTO pending FROM pg_inherits i
	WHERE i.inhdetachpending AND i.inhparent IN (SELECT t.relid FROM fencing._tree(target) t)
	LIMIT 1;
	IF FOUND THEN
		RAISE EXCEPTION 'partition "%" of protected table "%" is being detached', pending, target
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      HINT = 'Finish the detach first: ALTER TABLE ... DETACH PARTITION ... FINALIZE.';
	END IF;
END
$$;
COMMENT ON FUNCTION fencing._refuse_pending_detach(regclass) IS
'internal: refuses to remake the guard while a partition is being detached concurrently';

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
-- SECURITY_RESTRICTED_OPERATION (src/admin/protect.cpp), then the registry records
-- the table and its key identity (raising the floor for new keys if its
-- marks were made under another identity), and fencing.table_options its
-- rollout options: enforce => false reports the writes the guard would
-- refuse instead of refusing them, max_token refuses tokens above it.
CREATE OR REPLACE FUNCTION fencing.protect(
	target regclass,
	token_column name DEFAULT 'last_fencing_token',
	mode text DEFAULT 'monotonic',
	enforce boolean DEFAULT true,
	max_token bigint DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'fencing_protect'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION fencing.protect(regclass, name, text, boolean, bigint) IS
'guards a table: every write must present a fencing token no older than the row''s (monotonic) or newer (strict); enforce => false reports instead of refusing';

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
