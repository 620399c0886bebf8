-- fencing 0.1.0 -> 0.2.0
\echo Use "ALTER EXTENSION fencing UPDATE TO '0.2.0'" to load this file. \quit

-- Every protected table first (src/upgrade.cpp): running writes finish and
-- later ones wait for the update, instead of deadlocking with it.
CREATE FUNCTION fencing._lock_protected_tables() RETURNS void
AS 'MODULE_PATHNAME', 'lock_protected_tables' LANGUAGE C;
SELECT fencing._lock_protected_tables();
DROP FUNCTION fencing._lock_protected_tables();

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
	compacted bigint NOT NULL DEFAULT 0 CHECK (compacted <= token),
	raised_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
SELECT pg_catalog.pg_extension_config_dump('fencing.floors', '');
REVOKE ALL ON fencing.floors FROM PUBLIC;
COMMENT ON TABLE fencing.floors IS
'table floors: no new key below token (TRUNCATE, DETACH, compact()), no write at all below compacted (compact())';

-- Errors unless the table has an immediate primary key the guard can mark;
-- returns the condition "the key changed" for the AFTER UPDATE trigger.
CREATE FUNCTION fencing._key_change_condition(target regclass)
RETURNS text
AS 'MODULE_PATHNAME', 'key_change_condition'
LANGUAGE C STABLE;
COMMENT ON FUNCTION fencing._key_change_condition(regclass) IS
'internal: checks that protect() can guard the primary key of a table';

-- A table and, if it is partitioned, all of its partitions (pg_partition_tree
-- alone returns nothing for a table that is not partitioned).
CREATE FUNCTION fencing._tree(rel regclass, OUT relid regclass, OUT isleaf boolean)
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
CREATE FUNCTION fencing._drop_guard(target regclass)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	t record;
	protected boolean;
	restore boolean := false;
BEGIN
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
CREATE FUNCTION fencing._refuse_partition_guard(target regclass)
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
CREATE FUNCTION fencing._guard_truncate(target regclass)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	rel regclass;
BEGIN
	FOR rel IN
		SELECT t.relid FROM fencing._tree(target) t
		WHERE EXISTS (SELECT FROM pg_trigger g
		              WHERE g.tgrelid = t.relid AND g.tgname = 'fencing_guard'
		                AND g.tgfoid = 'fencing.guard()'::regprocedure)
		  -- a guard whose row triggers are all there (Citus recreates them one by one)
		  AND EXISTS (SELECT FROM pg_trigger g
		              WHERE g.tgrelid = t.relid AND g.tgname = 'fencing_guard_key_changes')
		  AND NOT EXISTS (SELECT FROM pg_trigger g
		                  WHERE g.tgrelid = t.relid AND g.tgname = 'fencing_guard_truncate')
	LOOP
		EXECUTE format('CREATE TRIGGER fencing_guard_truncate BEFORE TRUNCATE ON %s '
		               'FOR EACH STATEMENT EXECUTE FUNCTION fencing.guard()', rel);
	END LOOP;
END
$$;
COMMENT ON FUNCTION fencing._guard_truncate(regclass) IS
'internal: gives a protected table and each of its partitions a BEFORE TRUNCATE guard';

-- The guard's settings on a relation (its own or cloned from a partitioned
-- table), read from the fencing_guard trigger's arguments.
CREATE FUNCTION fencing._guard_settings(rel regclass, OUT token_column name, OUT mode text)
RETURNS record
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
	-- Arguments: token column, mode, and on a Citus distributed table the id
	-- of its marks table; each ends with a zero byte.
	SELECT convert_from(substring(t.tgargs, 1, a.first - 1), getdatabaseencoding())::name,
	       convert_from(substring(b.rest, 1, position('\x00'::bytea IN b.rest) - 1),
	                    getdatabaseencoding())
	FROM pg_trigger t,
	     LATERAL (SELECT position('\x00'::bytea IN t.tgargs) AS first) a,
	     LATERAL (SELECT substring(t.tgargs, a.first + 1) AS rest) b
	WHERE t.tgrelid = rel AND t.tgname = 'fencing_guard' AND t.tgnargs IN (2, 3)
	  AND t.tgfoid = 'fencing.guard()'::regprocedure
$$;
COMMENT ON FUNCTION fencing._guard_settings(regclass) IS
'internal: token column and mode of a relation''s guard';

-- The partitions the current DDL command detached (only in a ddl_command_end
-- event trigger: the commands PostgreSQL collected can only be read in C).
CREATE FUNCTION fencing._detached_partitions(OUT parent oid, OUT partition oid)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'detached_partitions'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION fencing._detached_partitions() IS
'internal: partitions detached by the current DDL command';
REVOKE ALL ON FUNCTION fencing._detached_partitions() FROM PUBLIC;

-- A partition leaves a protected table: the table keeps what the partition
-- held.  Its marks (also those a table attached as a partition brought in)
-- are copied to the table and its ancestors, and the table's floor rises to
-- the partition's floor and to the highest token of the rows it takes away,
-- so that none of its keys can come back under an older token.
CREATE FUNCTION fencing._keep_history(parent regclass, partition regclass)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	settings record;
	scope oid[];
	highest bigint;
	rows_highest bigint;
	leaf regclass;
BEGIN
	SELECT * INTO settings FROM fencing._guard_settings(parent);
	IF settings.token_column IS NULL THEN
		RETURN;
	END IF;
	scope := ARRAY(SELECT a.relid FROM pg_partition_ancestors(parent) a);
	INSERT INTO fencing.deleted_keys (relid, key, token)
	SELECT s, d.key, max(d.token)
	FROM fencing.deleted_keys d, unnest(scope) s
	WHERE d.relid IN (SELECT t.relid FROM fencing._tree(partition) t)
	GROUP BY s, d.key
	ON CONFLICT (relid, key) DO UPDATE SET token = EXCLUDED.token, deleted_at = now()
	WHERE deleted_keys.token < EXCLUDED.token;
	SELECT max(f.token) INTO highest FROM fencing.floors f
	WHERE f.relid IN (SELECT t.relid FROM fencing._tree(partition) t);
	FOR leaf IN SELECT t.relid FROM fencing._tree(partition) t WHERE t.isleaf LOOP
		EXECUTE format('SELECT max(%I) FROM ONLY %s', settings.token_column, leaf) INTO rows_highest;
		highest := greatest(highest, rows_highest);
	END LOOP;
	IF highest > 0 THEN
		INSERT INTO fencing.floors (relid, token) SELECT s, highest FROM unnest(scope) s
		ON CONFLICT (relid) DO UPDATE SET token = EXCLUDED.token, raised_at = now()
		WHERE floors.token < EXCLUDED.token;
	END IF;
END
$$;
COMMENT ON FUNCTION fencing._keep_history(regclass, regclass) IS
'internal: what a partition detached from a protected table leaves the table';

-- What DDL may not do to a protected table, and what it must keep up to date.
CREATE FUNCTION fencing._check_guarded(rel regclass)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	settings record;
	parent regclass;
	own boolean;
	depends int2[];
	key int2[];
BEGIN
	-- An inheritance child of a protected table: its rows are the table's,
	-- and it has no guard.
	SELECT i.inhparent::regclass INTO parent
	FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhparent
	WHERE i.inhrelid = rel AND p.relkind <> 'p'
	  AND (fencing._guard_settings(i.inhparent)).token_column IS NOT NULL;
	IF FOUND THEN
		RAISE EXCEPTION 'relation "%" cannot inherit from protected table "%"', rel, parent
			USING ERRCODE = 'feature_not_supported',
			      DETAIL = 'Writes through the table reach the child, which has no guard.',
			      HINT = 'Use declarative partitioning, whose partitions take the guard.';
	END IF;
	SELECT * INTO settings FROM fencing._guard_settings(rel);
	IF settings.token_column IS NULL THEN
		RETURN;
	END IF;
	IF EXISTS (SELECT FROM pg_class c WHERE c.oid = rel AND c.relpersistence = 'u') THEN
		RAISE EXCEPTION 'protected relation "%" cannot be unlogged', rel
			USING ERRCODE = 'feature_not_supported',
			      DETAIL = 'An unlogged table loses its rows in a crash, and with them their tokens.';
	END IF;
	-- The token column stays, a bigint: the guard reads it by name.
	IF NOT EXISTS (SELECT FROM pg_attribute a
	               WHERE a.attrelid = rel AND a.attname = settings.token_column
	                 AND a.atttypid = 'pg_catalog.int8'::regtype AND NOT a.attisdropped) THEN
		RAISE EXCEPTION 'fencing token column "%" of protected relation "%" must stay a bigint column',
			settings.token_column, rel
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      HINT = 'Run fencing.unprotect() first to remove the guard.';
	END IF;
	SELECT t.tgparentid = 0 INTO own FROM pg_trigger t
	WHERE t.tgrelid = rel AND t.tgname = 'fencing_guard';
	IF NOT own THEN
		RETURN;
	END IF;
	-- A guard whose triggers are not all there is being made, by protect()
	-- or by Citus (which recreates them one by one when it rebuilds a table
	-- or syncs a node): not this trigger's business.
	IF NOT EXISTS (SELECT FROM pg_trigger t
	               WHERE t.tgrelid = rel AND t.tgname = 'fencing_guard_key_changes') THEN
		RETURN;
	END IF;
	-- The primary key changed, its columns or their order: the guard must
	-- follow it (and refuse a key it cannot mark).  The key-change trigger
	-- names the key columns it was made for, in order: UPDATE OF them, or
	-- in its WHEN condition, each as OLD.c then NEW.c.
	SELECT CASE WHEN cardinality(t.tgattr::int2[]) > 0 THEN ARRAY(SELECT unnest(t.tgattr::int2[]))
	            ELSE ARRAY(SELECT m.v[1]::int2 FROM regexp_matches(t.tgqual, ':varattno (\d+)', 'g')
	                                                WITH ORDINALITY m(v, n)
	                       WHERE m.n % 2 = 1 ORDER BY m.n) END INTO depends
	FROM pg_trigger t
	WHERE t.tgrelid = rel AND t.tgname = 'fencing_guard_key_changes';
	SELECT ARRAY(SELECT k.a FROM unnest(i.indkey::int2[]) WITH ORDINALITY k(a, n)
	             WHERE k.n <= i.indnkeyatts ORDER BY k.n) INTO key
	FROM pg_index i WHERE i.indrelid = rel AND i.indisprimary;
	IF depends IS DISTINCT FROM key THEN
		-- Marks name deleted keys by the old key's values in its column
		-- order, which the new key cannot look up: their highest token
		-- becomes the floor for new keys, as after a TRUNCATE.
		INSERT INTO fencing.floors (relid, token)
		SELECT rel, max(d.token) FROM fencing.deleted_keys d
		WHERE d.relid IN (SELECT t.relid FROM fencing._tree(rel) t)
		HAVING max(d.token) IS NOT NULL
		ON CONFLICT (relid) DO UPDATE SET token = EXCLUDED.token, raised_at = now()
		WHERE floors.token < EXCLUDED.token;
		PERFORM fencing.protect(rel, settings.token_column, settings.mode);
	END IF;
END
$$;
COMMENT ON FUNCTION fencing._check_guarded(regclass) IS
'internal: refuses DDL that would leave a protected table unguarded, and follows key changes';

-- After CREATE or ALTER of a table: partitions created or attached later get
-- their TRUNCATE guard (their row triggers PostgreSQL clones), partitions
-- detached leave their history to the table, and DDL that would leave rows
-- of a protected table unguarded is refused.  It fires for every role's DDL,
-- also roles without USAGE on schema fencing, so it runs with the extension
-- owner's rights; all it can change is the guard of protected tables.
CREATE FUNCTION fencing._after_table_ddl()
RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	rel regclass;
	detached record;
BEGIN
	-- Citus' own connections (shard and metadata work it sends to a node)
	-- rebuild tables as they were, guard included: not this trigger's business.
	IF pg_catalog.current_setting('application_name') LIKE 'citus\_internal%' THEN
		RETURN;
	END IF;
	FOR detached IN SELECT * FROM fencing._detached_partitions() LOOP
		PERFORM fencing._keep_history(detached.parent, detached.partition);
	END LOOP;
	-- The guard's triggers keep their names: they are how the extension
	-- (fencing.protected_tables, high_water_mark(), the guard itself) finds
	-- them.
	IF TG_TAG = 'ALTER TRIGGER' AND EXISTS (SELECT FROM pg_event_trigger_ddl_commands() c
	           JOIN pg_trigger t ON c.classid = 'pg_trigger'::regclass AND t.oid = c.objid
	           WHERE t.tgfoid = 'fencing.guard()'::regprocedure
	             AND t.tgname NOT IN ('fencing_guard', 'fencing_guard_new_keys',
	                                  'fencing_guard_key_changes', 'fencing_guard_truncate')) THEN
		RAISE EXCEPTION 'the guard''s triggers cannot be renamed'
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      HINT = 'Run fencing.unprotect() to remove the guard.';
	END IF;
	FOR rel IN
		SELECT DISTINCT c.objid::regclass FROM pg_event_trigger_ddl_commands() c
		JOIN pg_class r ON r.oid = c.objid
		WHERE c.classid = 'pg_class'::regclass AND r.relkind IN ('r', 'p', 'f')
	LOOP
		PERFORM fencing._check_guarded(rel);
		PERFORM fencing._guard_truncate(rel);
		PERFORM fencing._guard_key_changes_near(rel);
	END LOOP;
	-- A BEFORE UPDATE row trigger (tgtype 19) on a protected table, above or
	-- below one, can change keys the UPDATE does not name: the guard's key
	-- check takes the form that sees them.
	FOR rel IN
		SELECT DISTINCT t.tgrelid::regclass FROM pg_event_trigger_ddl_commands() c
		JOIN pg_trigger t ON c.classid = 'pg_trigger'::regclass AND t.oid = c.objid
		WHERE t.tgfoid <> 'fencing.guard()'::regprocedure AND (t.tgtype::int & 19) = 19
	LOOP
		PERFORM fencing._guard_key_changes_near(rel);
	END LOOP;
END
$$;
COMMENT ON FUNCTION fencing._after_table_ddl() IS
'internal: event trigger keeping protected tables guarded through DDL';
CREATE EVENT TRIGGER fencing_after_table_ddl ON ddl_command_end
WHEN TAG IN ('CREATE TABLE', 'ALTER TABLE', 'CREATE SCHEMA', 'CREATE FOREIGN TABLE', 'ALTER TRIGGER',
              'CREATE TRIGGER')
EXECUTE FUNCTION fencing._after_table_ddl();

-- Marks and floors of a dropped table go with it (its OID could be reused).
-- Runs with the owner's rights; it can only be fired by DROP, for objects
-- really dropped.
CREATE FUNCTION fencing._forget_dropped_marks()
RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	coordinator boolean := false;
	dropped bigint[];
BEGIN
	DELETE FROM fencing.deleted_keys d
	USING pg_event_trigger_dropped_objects() o
	WHERE o.classid = 'pg_class'::regclass AND o.objsubid = 0 AND d.relid = o.objid;
	DELETE FROM fencing.floors f
	USING pg_event_trigger_dropped_objects() o
	WHERE o.classid = 'pg_class'::regclass AND o.objsubid = 0 AND f.relid = o.objid;
	-- Citus: a dropped distributed table's floor, from the coordinator (its
	-- marks table is in the same DROP TABLE: see src/citus.cpp).
	IF pg_catalog.to_regclass('fencing_citus.floors') IS NOT NULL THEN
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
'internal: event trigger removing the marks and floors of dropped tables';
CREATE EVENT TRIGGER fencing_forget_dropped_marks ON sql_drop
EXECUTE FUNCTION fencing._forget_dropped_marks();

-- Citus: the schema fencing_citus and its reference table of TRUNCATE floors
-- (on every node, keyed by the marks id), made once, owned by the extension
-- owner, who alone writes floors.  Everyone may create a marks table there
-- (protect() does, as the table's owner) and read none but their own; anyone
-- who may protect a table may make both.
CREATE FUNCTION fencing._citus_floors()
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF pg_catalog.to_regnamespace('fencing_citus') IS NULL THEN
		CREATE SCHEMA fencing_citus;
		GRANT USAGE, CREATE ON SCHEMA fencing_citus TO PUBLIC;
	END IF;
	IF pg_catalog.to_regclass('fencing_citus.floors') IS NULL THEN
		CREATE TABLE fencing_citus.floors (id bigint PRIMARY KEY, token bigint NOT NULL);
		REVOKE ALL ON fencing_citus.floors FROM PUBLIC;
		COMMENT ON TABLE fencing_citus.floors IS 'TRUNCATE floors of protected distributed tables, by marks id';
		PERFORM create_reference_table('fencing_citus.floors');
	END IF;
END
$$;
COMMENT ON FUNCTION fencing._citus_floors() IS
'internal: makes the schema fencing_citus and its table of floors on Citus';

-- Citus: the id of a distributed table's marks table, made if missing, with
-- the rights of the caller (protect() runs as the table's owner, and Citus
-- wants a transaction's work on co-located tables done by one user); NULL
-- for a table Citus does not distribute (a local table, a Citus local
-- table); 0A000 for the kinds the guard does not support.  The marks of a
-- shard's deleted keys live in the co-located shard of
-- fencing_citus.marks_<id>, on the same node, so they move, split and
-- rebalance with the rows; DROP TABLE of the protected table drops it too.
CREATE FUNCTION fencing._citus_marks(target regclass)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	dist record;
	marks text := format('fencing_citus.marks_%s', target::oid);
	marks_owner regrole;
	marks_owner_of_extension regrole;
BEGIN
	IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
		RETURN NULL;
	END IF;
	EXECUTE $q$
		SELECT p.partmethod, p.repmodel, p.colocationid,
		       CASE WHEN p.partmethod = 'h' THEN column_to_column_name(p.logicalrelid, p.partkey) END AS col
		FROM pg_dist_partition p WHERE p.logicalrelid = $1$q$
	INTO dist USING target;
	IF dist IS NULL OR (dist.partmethod = 'n' AND dist.repmodel = 's' AND dist.colocationid = 0) THEN
		RETURN NULL;  -- not a Citus table, or a Citus local table: guarded like any table
	END IF;
	IF dist.partmethod = 'n' AND dist.repmodel = 't' THEN
		RAISE EXCEPTION 'relation "%" is a Citus reference table', target
			USING ERRCODE = 'feature_not_supported',
			      DETAIL = 'Its writes run on every node, each with its own marks.',
			      HINT = 'Protect a hash-distributed table, or keep the table local to the coordinator.';
	END IF;
	IF dist.partmethod <> 'h' THEN
		RAISE EXCEPTION 'relation "%" is not hash-distributed', target
			USING ERRCODE = 'feature_not_supported',
			      HINT = 'fencing.protect() supports Citus tables distributed by hash (create_distributed_table with a distribution column).';
	END IF;
	IF (SELECT c.relkind FROM pg_class c WHERE c.oid = target) = 'p' THEN
		RAISE EXCEPTION 'relation "%" is a distributed partitioned table', target
			USING ERRCODE = 'feature_not_supported',
			      HINT = 'Protect a distributed table that is not partitioned.';
	END IF;
	PERFORM fencing._citus_floors();
	IF pg_catalog.to_regclass(marks) IS NOT NULL THEN
		-- Only the one protect() made: the table's owner's, co-located with it.
		SELECT c.relowner::regrole INTO marks_owner FROM pg_class c WHERE c.oid = marks::regclass;
		IF marks_owner <> (SELECT c.relowner FROM pg_class c WHERE c.oid = target) THEN
			RAISE EXCEPTION 'table % belongs to role %, not to the owner of "%"', marks, marks_owner, target
				USING ERRCODE = 'object_not_in_prerequisite_state',
				      HINT = 'Drop it; fencing.protect() makes it again.';
		END IF;
		IF NOT EXISTS (SELECT FROM pg_dist_partition p
		               WHERE p.logicalrelid = marks::regclass AND p.colocationid = dist.colocationid) THEN
			RAISE EXCEPTION 'table % is not co-located with "%"', marks, target
				USING ERRCODE = 'object_not_in_prerequisite_state',
				      DETAIL = 'A shard''s deleted-key marks must live on the shard''s node.',
				      HINT = format('Move its shards to the nodes of the table''s shards and run SELECT update_distributed_table_colocation(%L, colocate_with => %L).',
				                    marks, target::text);
		END IF;
		RETURN target::oid;
	END IF;
	EXECUTE format('CREATE TABLE %s (dist %s%s NOT NULL, key bytea NOT NULL, token bigint NOT NULL, '
	               'deleted_at timestamptz NOT NULL, PRIMARY KEY (key, dist))',
	               marks, format_type(a.atttypid, a.atttypmod),
	               CASE WHEN a.attcollation <> 0 AND a.attcollation <> t.typcollation
	                    THEN ' COLLATE ' || a.attcollation::regcollation::text ELSE '' END)
	FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
	WHERE a.attrelid = target AND a.attname = dist.col;
	EXECUTE format('COMMENT ON TABLE %s IS %L', marks,
	               format('deleted-key marks of %s, co-located with its shards', target));
	-- The shards' guards write marks as the extension owner.
	SELECT c.relowner::regrole INTO marks_owner_of_extension
	FROM pg_class c WHERE c.oid = 'fencing.deleted_keys'::regclass;
	EXECUTE format('GRANT SELECT, INSERT, UPDATE ON %s TO %s', marks, marks_owner_of_extension);
	PERFORM create_distributed_table(marks, 'dist', colocate_with => target::text);
	RETURN target::oid;
END
$$;
COMMENT ON FUNCTION fencing._citus_marks(regclass) IS
'internal: the marks table of a Citus distributed table, made if missing; NULL for local tables';

-- Errors while a partition of the table is being detached concurrently:
-- triggers made on the table now would not reach it, and it would keep its
-- rows unguarded until the detach is finished.
CREATE FUNCTION fencing._refuse_pending_detach(target regclass)
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

-- _guard_key_changes() for every protected table whose tree a change to
-- `rel` (a trigger on it, a partition attached to it) reaches: rel itself,
-- the partitioned tables above it and the partitions below it.
CREATE FUNCTION fencing._guard_key_changes_near(rel regclass)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	protected regclass;
BEGIN
	FOR protected IN
		SELECT DISTINCT g.tgrelid::regclass FROM pg_trigger g
		WHERE g.tgname = 'fencing_guard' AND g.tgparentid = 0
		  AND g.tgfoid = 'fencing.guard()'::regprocedure
		  AND (g.tgrelid IN (SELECT a.relid FROM pg_partition_ancestors(rel) a)
		       OR g.tgrelid IN (SELECT t.relid FROM fencing._tree(rel) t))
	LOOP
		PERFORM fencing._guard_key_changes(protected);
	END LOOP;
END
$$;
COMMENT ON FUNCTION fencing._guard_key_changes_near(regclass) IS
'internal: _guard_key_changes() for the protected tables above and below a relation';

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
CREATE FUNCTION fencing._guard_key_changes(target regclass)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	definition text;
	arguments text;
	by_triggers boolean;
	has_when boolean;
	key_columns text;
	unsafe_triggers text := pg_catalog.current_setting('citus.enable_unsafe_triggers', true);
BEGIN
	SELECT pg_catalog.pg_get_triggerdef(t.oid) INTO definition FROM pg_trigger t
	WHERE t.tgrelid = target AND t.tgname = 'fencing_guard' AND t.tgparentid = 0
	  AND t.tgfoid = 'fencing.guard()'::regprocedure;
	IF NOT FOUND THEN
		RETURN;
	END IF;
	arguments := substring(definition FROM 'EXECUTE FUNCTION (fencing\.guard\(.*\))$');
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
COMMENT ON FUNCTION fencing._guard_key_changes(regclass) IS
'internal: (re)makes the guard''s AFTER UPDATE trigger for key changes in the form the table''s triggers need';

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
	SELECT t.tgrelid::regclass INTO parent FROM pg_partition_tree(target) p
	JOIN pg_trigger t ON t.tgrelid = p.relid
	WHERE p.relid <> target AND t.tgname = 'fencing_guard' AND t.tgparentid = 0;
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

	SELECT a.attnum, a.atttypid, a.attgenerated, a.attidentity,
	       pg_get_expr(d.adbin, d.adrelid) AS default_value INTO col
	FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
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
	ELSIF col.attidentity <> '' OR coalesce(col.default_value, '0') NOT IN ('0', '0::bigint') THEN
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
	PERFORM fencing._guard_key_changes(target);
	PERFORM fencing._guard_truncate(target);
	IF citus_id IS NOT NULL THEN
		PERFORM set_config('citus.enable_unsafe_triggers', unsafe_triggers, true);
	END IF;
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
	PERFORM fencing._refuse_partition_guard(target);
	IF NOT fencing._drop_guard(target) THEN
		RAISE NOTICE 'relation "%" is not protected, skipping', target;
	END IF;
END
$$;
COMMENT ON FUNCTION fencing.unprotect(regclass) IS
'removes the guard from a table; its token column, values and marks stay';

-- The protected tables and their settings, read from the guard triggers.
-- Its column types changed (collation): made again.
DROP VIEW fencing.protected_tables;
CREATE VIEW fencing.protected_tables AS
SELECT t.tgrelid::regclass AS relation, s.token_column, s.mode
FROM pg_catalog.pg_trigger t
CROSS JOIN LATERAL fencing._guard_settings(t.tgrelid) s
WHERE t.tgname = 'fencing_guard'
  AND t.tgparentid = 0
  AND t.tgnargs IN (2, 3)
  AND t.tgfoid = 'fencing.guard()'::pg_catalog.regprocedure;
GRANT SELECT ON fencing.protected_tables TO PUBLIC;
COMMENT ON VIEW fencing.protected_tables IS
'tables guarded by fencing.protect(): token column and mode';

SELECT fencing.protect(relation, token_column, mode) FROM fencing.protected_tables;

-- The history tokens were last issued on: a key of (system identifier,
-- timeline).  The first grant on another one - after a promotion, a
-- point-in-time restore, a restore from a dump - sets tokens
-- fencing.failover_margin ahead of the server clock and sets this sequence.
-- A sequence, because setting it is neither rolled back nor hidden from other
-- sessions by an open transaction: one margin per history.  Not dumped: a
-- database restored from a dump is a new history too, even in the same
-- cluster.
CREATE SEQUENCE fencing.token_history;
REVOKE ALL ON SEQUENCE fencing.token_history FROM PUBLIC;
COMMENT ON SEQUENCE fencing.token_history IS
'internal: the (system, timeline) tokens were last issued on, as a key';

-- The (system, timeline) pairs on which tokens were issued, with the first
-- token of each, for people to read (the history sequence is what counts).
CREATE TABLE fencing.token_timelines (
	system_identifier bigint NOT NULL,
	timeline integer NOT NULL,
	first_token bigint NOT NULL,
	started_at timestamptz NOT NULL,
	PRIMARY KEY (system_identifier, timeline)
);
REVOKE ALL ON fencing.token_timelines FROM PUBLIC;
COMMENT ON TABLE fencing.token_timelines IS
'(system identifier, timeline) pairs that issued tokens, with the first token of each';


-- The highest token the storage holds: every protected table's token column,
-- deleted-key mark, truncate floor, fence and lease.  The number to reseed an
-- external token source (a Redis counter, an etcd revision offset) with after
-- it lost its state.  It reads every protected table, so it runs with the
-- owner's rights and is for the owner, or roles the owner grants it to.
-- Temporary tables are skipped: they are not storage that outlives a session
-- (and other sessions' cannot be read).
CREATE FUNCTION fencing.high_water_mark()
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
	FOR t IN SELECT p.relation, p.token_column
	         FROM fencing.protected_tables p
	         JOIN pg_catalog.pg_class c ON c.oid = p.relation
	         WHERE c.relpersistence <> 't'
	           AND EXISTS (SELECT FROM pg_catalog.pg_attribute a
	                       WHERE a.attrelid = p.relation AND a.attname = p.token_column
	                         AND NOT a.attisdropped) LOOP
		EXECUTE pg_catalog.format('SELECT pg_catalog.max(%I) FROM %s', t.token_column, t.relation)
		INTO m;
		IF m > result OR result IS NULL THEN
			result := m;
		END IF;
	END LOOP;
	-- Citus: the marks tables of distributed tables, and their floors.
	FOR t IN SELECT c.oid::regclass AS marks FROM pg_catalog.pg_class c
	         WHERE c.relnamespace = pg_catalog.to_regnamespace('fencing_citus')
	           AND c.relkind = 'r' AND c.relname ~ '^(marks_[0-9]+|floors)$' LOOP
		EXECUTE pg_catalog.format('SELECT pg_catalog.max(token) FROM %s', t.marks) INTO m;
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

-- Observability: counters in shared memory (shared_preload_libraries =
-- 'fencing'), one row per protected relation and per fenced resource of this
-- database.  The last rejection's key may show values a reader may not
-- otherwise see, so reading is for the owner and pg_read_all_stats.
CREATE FUNCTION fencing._stats(
	OUT relid oid, OUT resource text, OUT writes_accepted bigint, OUT stale_rejections bigint,
	OUT missing_token_rejections bigint, OUT last_rejection_at timestamptz,
	OUT last_rejection_kind text, OUT last_rejection_key text,
	OUT last_rejection_presented bigint, OUT last_rejection_stored bigint,
	OUT stats_reset timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'stats'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION fencing._stats() IS 'internal: reads the counters behind fencing.stats';
REVOKE ALL ON FUNCTION fencing._stats() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fencing._stats() TO pg_read_all_stats;

CREATE VIEW fencing.stats AS
SELECT s.relid::regclass AS relation, s.resource, s.writes_accepted, s.stale_rejections,
       s.missing_token_rejections, s.last_rejection_at, s.last_rejection_kind,
       s.last_rejection_key, s.last_rejection_presented, s.last_rejection_stored, s.stats_reset
FROM fencing._stats() s
WHERE s.relid IS NULL OR EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid = s.relid);
COMMENT ON VIEW fencing.stats IS
'accepted and rejected writes per protected relation and fenced resource, since stats_reset';
REVOKE ALL ON fencing.stats FROM PUBLIC;
GRANT SELECT ON fencing.stats TO pg_read_all_stats;

CREATE FUNCTION fencing.stats_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'stats_reset'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION fencing.stats_reset() IS 'zeroes the counters of fencing.stats for this database';
REVOKE ALL ON FUNCTION fencing.stats_reset() FROM PUBLIC;

-- Compaction: the state that only grows - a mark for every deleted key, a
-- row for every resource ever acquired or fenced - bounded by floors.  Safe
-- only when every token still in use is at or above the floor: tokens from
-- one source that only goes up (fencing.acquire(), or one counter for all
-- keys and resources), with the floor below every live holder's token; not
-- with per-resource counters that start at 1.
CREATE FUNCTION fencing.compact(target regclass, below bigint)
RETURNS bigint
AS 'MODULE_PATHNAME', 'compact'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION fencing.compact(regclass, bigint) IS
'raises a protected table''s floor to below (no write may present a lower token) and removes the deleted-key marks under it; returns how many';

CREATE TABLE fencing.resource_floors (
	prefix text PRIMARY KEY,
	token bigint NOT NULL CHECK (token > 0),
	raised_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
SELECT pg_catalog.pg_extension_config_dump('fencing.resource_floors', '');
REVOKE ALL ON fencing.resource_floors FROM PUBLIC;
COMMENT ON TABLE fencing.resource_floors IS
'floors of resources whose name starts with prefix: fence() refuses and acquire() issues no token below them';

CREATE FUNCTION fencing.compact_resources(below bigint, prefix text DEFAULT '')
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	leases bigint;
	fences bigint;
BEGIN
	IF below IS NULL OR prefix IS NULL THEN
		RAISE EXCEPTION 'below and prefix must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF below <= 0 THEN
		RAISE EXCEPTION 'below must be a positive token, got %', below
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	-- A floor never comes down: not more than one above every token these
	-- resources have seen and above the clock (the tokens of acquire()).
	IF below > 9007199254740991 OR below > 1 + greatest(
	       (extract(epoch FROM clock_timestamp()) * 1000000)::bigint,
	       (SELECT max(r.token) FROM fencing.resources r WHERE starts_with(r.resource, compact_resources.prefix)),
	       (SELECT max(f.token) FROM fencing.fences f WHERE starts_with(f.resource, compact_resources.prefix))) THEN
		RAISE EXCEPTION 'floor % is above every token the resources have seen', below
			USING ERRCODE = 'invalid_parameter_value',
			      HINT = 'Pick a floor below the token of every holder still working.';
	END IF;
	INSERT INTO fencing.resource_floors AS f (prefix, token)
	VALUES (compact_resources.prefix, compact_resources.below)
	ON CONFLICT ON CONSTRAINT resource_floors_pkey
	DO UPDATE SET token = EXCLUDED.token, raised_at = now()
	WHERE f.token < EXCLUDED.token;
	-- Idle leases below the floor (a live one is someone's), and fences below it.
	DELETE FROM fencing.resources r
	WHERE starts_with(r.resource, compact_resources.prefix)
	  AND coalesce(r.token, 0) < compact_resources.below
	  AND NOT (NOT r.released AND r.expires_at > clock_timestamp());
	GET DIAGNOSTICS leases = ROW_COUNT;
	DELETE FROM fencing.fences f
	WHERE starts_with(f.resource, compact_resources.prefix) AND f.token < compact_resources.below;
	GET DIAGNOSTICS fences = ROW_COUNT;
	RETURN leases + fences;
END
$$;
REVOKE ALL ON FUNCTION fencing.compact_resources(bigint, text) FROM PUBLIC;
COMMENT ON FUNCTION fencing.compact_resources(bigint, text) IS
'raises the floor of resources named prefix...: removes their idle leases and fences below it; returns how many';

-- Comments on what did not change.
COMMENT ON FUNCTION fencing.token_accepts(bigint, bigint, boolean) IS
'may a write presenting token "presented" follow the stored token? (strict: only a greater one; NULL stored counts as 0)';
COMMENT ON FUNCTION fencing.guard() IS
'trigger function of the storage guard; installed by fencing.protect(), not called directly';
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
