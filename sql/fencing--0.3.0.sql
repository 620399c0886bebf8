-- fencing: fencing tokens checked by the storage.  The install script of the
-- release, assembled by the Makefile from sql/src/*.sql; the upgrade scripts
-- take their definitions from the same files (docs/testing.md, "Where the SQL
-- lives").

\echo Use "CREATE EXTENSION fencing" to load this file. \quit

-- CREATE EXTENSION installs into a schema named fencing if one exists: it
-- must be the installing role's, empty, and let no other role create in it,
-- or another role could have planted objects there (or plant them later)
-- that the extension's own code or its callers would find.
DO $$
DECLARE
	schema oid := (SELECT n.oid FROM pg_catalog.pg_namespace n
	               WHERE n.nspname OPERATOR(pg_catalog.=) 'fencing');
BEGIN
	IF schema IS NULL THEN
		RETURN;
	END IF;
	IF (SELECT n.nspowner FROM pg_catalog.pg_namespace n WHERE n.oid OPERATOR(pg_catalog.=) schema)
	   OPERATOR(pg_catalog.<>) (SELECT r.oid FROM pg_catalog.pg_roles r
	                             WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER)
	   OR EXISTS (SELECT FROM pg_catalog.pg_namespace n, pg_catalog.aclexplode(n.nspacl) a
	              WHERE n.oid OPERATOR(pg_catalog.=) schema
	                AND a.privilege_type OPERATOR(pg_catalog.=) 'CREATE'
	                AND a.grantee OPERATOR(pg_catalog.<>) n.nspowner)
	   OR EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.relnamespace OPERATOR(pg_catalog.=) schema)
	   OR EXISTS (SELECT FROM pg_catalog.pg_proc p WHERE p.pronamespace OPERATOR(pg_catalog.=) schema)
	   OR EXISTS (SELECT FROM pg_catalog.pg_type t WHERE t.typnamespace OPERATOR(pg_catalog.=) schema)
	   OR EXISTS (SELECT FROM pg_catalog.pg_operator o
	              WHERE o.oprnamespace OPERATOR(pg_catalog.=) schema) THEN
		RAISE EXCEPTION 'schema "fencing" exists and is not an empty schema of the installing role'
			USING ERRCODE = 'insufficient_privilege',
			      DETAIL = 'Another role owns it, may create objects in it, or objects are already in it.',
			      HINT = 'Drop or rename that schema, then run CREATE EXTENSION fencing.';
	END IF;
END
$$;

-- Every object is schema-qualified and every function body pins search_path,
-- so nothing planted earlier in a caller's search_path is ever picked up.
-- Installing changes nothing outside the extension's own objects: no
-- database or server setting (README, "Installing").  Functions whose names
-- start with an underscore are internal helpers, not API.

-- The extension's tables and sequences, with their rights and what pg_dump
-- dumps: install script only (an upgrade creates a table its release adds
-- from a file of its own, as registry.sql).

-- High-water marks that outlive rows, written only by the guard with the
-- extension owner's rights.  A key is named by the SHA-256 hash of its
-- columns' binary images (src/keys.cpp), under the relation that held the
-- row and each of its partition ancestors.  Dumped by pg_dump.
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

-- PostgreSQL as the lock manager: leases and resource fences.

-- A bound at or above every token handed out, for every resource: the tokens
-- themselves (generation, then the clock in milliseconds: src/tokens.cpp) are
-- handed out below it.  A sequence, because it does not roll back with the
-- transaction that set it: a token is never issued twice.  Not dumped: a
-- database restored from a dump starts a new history, and its tokens go above
-- the dumped ones by their generation (fencing.token_timelines).
CREATE SEQUENCE fencing.token_seq;
SELECT pg_catalog.setval('fencing.token_seq',
                         (pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) * 1000000)::bigint);
REVOKE ALL ON SEQUENCE fencing.token_seq FROM PUBLIC;
COMMENT ON SEQUENCE fencing.token_seq IS
'a bound at or above every fencing token handed out, for every resource';

-- One row per resource: its current (or last) lease.
CREATE TABLE fencing.resources (
	resource text PRIMARY KEY CHECK (resource <> ''),
	holder text,
	token bigint,
	granted_at timestamptz,
	expires_at timestamptz,
	released boolean NOT NULL DEFAULT false
);
SELECT pg_catalog.pg_extension_config_dump('fencing.resources', '');
REVOKE ALL ON fencing.resources FROM PUBLIC;
COMMENT ON TABLE fencing.resources IS 'lease state, one row per resource; read it through fencing.leases';

-- One row per fenced resource: its high-water mark.  Apart from the leases, so
-- that a transaction holding a fence does not block renew() and acquire().
CREATE TABLE fencing.fences (
	resource text PRIMARY KEY CHECK (resource <> ''),
	token bigint NOT NULL CHECK (token > 0)
);
SELECT pg_catalog.pg_extension_config_dump('fencing.fences', '');
REVOKE ALL ON fencing.fences FROM PUBLIC;
COMMENT ON TABLE fencing.fences IS 'high-water marks of resources fenced with fencing.fence()';

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
-- token of each and its generation: the timeline plus a base fixed per
-- system, which a system seen for the first time takes one above every
-- generation recorded here.  Dumped, so that a database restored elsewhere
-- issues tokens of a higher generation than the dumped one's.
CREATE TABLE fencing.token_timelines (
	system_identifier bigint NOT NULL,
	timeline integer NOT NULL,
	first_token bigint NOT NULL,
	started_at timestamptz NOT NULL,
	generation bigint NOT NULL,
	PRIMARY KEY (system_identifier, timeline)
);
SELECT pg_catalog.pg_extension_config_dump('fencing.token_timelines', '');
REVOKE ALL ON fencing.token_timelines FROM PUBLIC;
COMMENT ON TABLE fencing.token_timelines IS
'(system identifier, timeline) pairs that issued tokens, with the first token and the generation of each';

CREATE TABLE fencing.resource_floors (
	prefix text PRIMARY KEY,
	token bigint NOT NULL CHECK (token > 0),
	raised_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
SELECT pg_catalog.pg_extension_config_dump('fencing.resource_floors', '');
REVOKE ALL ON fencing.resource_floors FROM PUBLIC;
COMMENT ON TABLE fencing.resource_floors IS
'floors of resources whose name starts with prefix: fence() refuses and acquire() issues no token below them';

-- In the install script, and in the 0.2.0 -> 0.3.0 upgrade, which adds it.

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

-- The check every write goes through: the token comparison, the guard
-- trigger and fenced_update().  Definitions (CREATE OR REPLACE): in the
-- install script and in every upgrade script.

-- The token comparison, as a predicate for SQL that fenced_update() builds.
CREATE OR REPLACE FUNCTION fencing.token_accepts(stored bigint, presented bigint, strict boolean)
RETURNS boolean
AS 'MODULE_PATHNAME', 'token_accepts'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION fencing.token_accepts(bigint, bigint, boolean) IS
'may a write presenting token "presented" follow the stored token? (strict: only a greater one; NULL stored counts as 0)';

-- The storage guard: the triggers installed by fencing.protect().
CREATE OR REPLACE FUNCTION fencing.guard()
RETURNS trigger
AS 'MODULE_PATHNAME', 'guard'
LANGUAGE C;
COMMENT ON FUNCTION fencing.guard() IS
'trigger function of the storage guard; installed by fencing.protect(), not called directly';

-- One fenced write: apply changes and advance the token iff the row accepts it.
CREATE OR REPLACE FUNCTION fencing.fenced_update(
	target regclass,
	key jsonb,
	token bigint,
	changes jsonb DEFAULT '{}',
	on_stale text DEFAULT 'error')
RETURNS boolean
AS 'MODULE_PATHNAME', 'fenced_update'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION fencing.fenced_update(regclass, jsonb, bigint, jsonb, text) IS
'updates one row, named by its primary key, iff its stored token accepts the token; true if applied';

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

-- Citus: the schema fencing_citus, its floors and the marks tables of
-- distributed tables.  Definitions (CREATE OR REPLACE).

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

-- Citus: the id of a distributed table's marks table, made if missing, with
-- the rights of the caller (protect() runs as the table's owner, and Citus
-- wants a transaction's work on co-located tables done by one user); NULL
-- for a table Citus does not distribute (a local table, a Citus local
-- table); 0A000 for the kinds the guard does not support.  The marks of a
-- shard's deleted keys live in the co-located shard of
-- fencing_citus.marks_<id>, on the same node, so they move, split and
-- rebalance with the rows; DROP TABLE of the protected table drops it too.
CREATE OR REPLACE FUNCTION fencing._citus_marks(target regclass)
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

-- The functions of the event triggers that follow DDL (the triggers
-- themselves: event_triggers.sql).  Definitions (CREATE OR REPLACE).

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

-- A partition of a protected table is not dropped while attached (its
-- rows' tokens would go with it); DETACH PARTITION first keeps its history.
-- Before a DROP that can drop tables, _before_drop() loads the module, whose
-- object access hook records every partition the command drops (whatever
-- the route: DROP TABLE, DROP SCHEMA ... CASCADE, DROP OWNED); at sql_drop,
-- _refuse_partition_drops() refuses those whose protected table stays.  In
-- C (src/ddl.cpp), with the dropping role's rights.
CREATE OR REPLACE FUNCTION fencing._before_drop()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'before_drop'
LANGUAGE C;
COMMENT ON FUNCTION fencing._before_drop() IS
'internal: event trigger loading the module before a DROP, so that it sees dropped partitions';

CREATE OR REPLACE FUNCTION fencing._refuse_partition_drops()
RETURNS void
AS 'MODULE_PATHNAME', 'refuse_partition_drops'
LANGUAGE C;
COMMENT ON FUNCTION fencing._refuse_partition_drops() IS
'internal: refuses a DROP that takes a partition of a protected table without the table';

-- PostgreSQL as the lock manager: leases, fences and the highest token the
-- storage holds.  Definitions (CREATE OR REPLACE).

-- The functions that write lease and fence state run with the extension
-- owner's rights, pin search_path and check their arguments themselves.
CREATE OR REPLACE FUNCTION fencing.acquire(resource text, holder text, ttl interval)
RETURNS bigint
AS 'MODULE_PATHNAME', 'acquire'
LANGUAGE C VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION fencing.acquire(text, text, interval) IS
'grants the lease on a resource if no live lease holds it and returns a new fencing token; NULL otherwise';

-- The token of acquire()'s grant, issued inside its UPDATE once the row is
-- locked (src/leases.cpp); refused outside that statement, and to any call
-- without the random nonce that acquire() passes that statement alone (a
-- trigger on fencing.resources runs inside it, in the same transaction).
CREATE OR REPLACE FUNCTION fencing._grant_token(floor bigint, nonce bigint DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'grant_token'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION fencing._grant_token(bigint, bigint) FROM PUBLIC;
COMMENT ON FUNCTION fencing._grant_token(bigint, bigint) IS
'internal: the token of fencing.acquire()''s grant, for its UPDATE only';

CREATE OR REPLACE FUNCTION fencing.renew(resource text, holder text, token bigint, ttl interval)
RETURNS boolean
AS 'MODULE_PATHNAME', 'renew'
LANGUAGE C VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION fencing.renew(text, text, bigint, interval) IS
'extends a live lease held by (holder, token); false if it was lost';

CREATE OR REPLACE FUNCTION fencing.release(resource text, holder text, token bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'release'
LANGUAGE C VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION fencing.release(text, text, bigint) IS
'ends a live lease held by (holder, token); false if it was lost';

CREATE OR REPLACE FUNCTION fencing.fence(resource text, token bigint)
RETURNS bigint
AS 'MODULE_PATHNAME', 'fence'
LANGUAGE C VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION fencing.fence(text, bigint) IS
'compares and advances a resource''s high-water mark, holding its lock until the transaction ends; returns the previous mark';

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

-- The lowest token this server's lock manager issues at a moment, in its
-- current generation: a compaction floor for "every grant older than ...".
-- Tokens of earlier generations (before the last promotion) are all below
-- it.  For the owner, as compaction is.
CREATE OR REPLACE FUNCTION fencing.token_at(at timestamptz)
RETURNS bigint
AS 'MODULE_PATHNAME', 'token_at'
LANGUAGE C STABLE STRICT;
REVOKE ALL ON FUNCTION fencing.token_at(timestamptz) FROM PUBLIC;
COMMENT ON FUNCTION fencing.token_at(timestamptz) IS
'the lowest token this server issues at that moment in its current generation (a floor for compaction)';

-- The highest value of a bigint column over a table and its partitions, read
-- in C (src/ddl.cpp); for high_water_mark().
CREATE OR REPLACE FUNCTION fencing._highest_token(rel regclass, token_column name)
RETURNS bigint
AS 'MODULE_PATHNAME', 'highest_token'
LANGUAGE C STABLE;
COMMENT ON FUNCTION fencing._highest_token(regclass, name) IS
'internal: the highest value of a bigint column of a table and its partitions, read in C';
REVOKE ALL ON FUNCTION fencing._highest_token(regclass, name) FROM PUBLIC;

-- fencing.stats: the functions behind the view (views.sql).  Definitions
-- (CREATE OR REPLACE).

-- Observability: counters in shared memory (shared_preload_libraries =
-- 'fencing'), one row per protected relation and per fenced resource of this
-- database.  The last rejection's key may show values a reader may not
-- otherwise see, so reading is for the owner and pg_read_all_stats.
CREATE OR REPLACE FUNCTION fencing._stats(
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

CREATE OR REPLACE FUNCTION fencing.stats_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'stats_reset'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION fencing.stats_reset() IS 'zeroes the counters of fencing.stats for this database';
REVOKE ALL ON FUNCTION fencing.stats_reset() FROM PUBLIC;

-- compact() and compact_resources().  Definitions (CREATE OR REPLACE).

-- Compaction: the state that only grows - a mark for every deleted key, a
-- row for every resource ever acquired or fenced - bounded by floors.  Safe
-- only when every token still in use is at or above the floor: tokens from
-- one source that only goes up (fencing.acquire(), or one counter for all
-- keys and resources), with the floor below every live holder's token; not
-- with per-resource counters that start at 1.
CREATE OR REPLACE FUNCTION fencing.compact(target regclass, below bigint)
RETURNS bigint
AS 'MODULE_PATHNAME', 'compact'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION fencing.compact(regclass, bigint) IS
'raises a protected table''s floor to below (no write may present a lower token) and removes the deleted-key marks under it; returns how many';

-- compact() a batch per transaction (src/compact.cpp): the floor is raised
-- and committed first (writers wait for that moment only), then the marks go
-- a batch per transaction.  CALLed on its own.
CREATE OR REPLACE PROCEDURE fencing.compact_in_batches(target regclass, below bigint,
                                                       batch_size integer DEFAULT 1000,
                                                       INOUT removed bigint DEFAULT NULL)
AS 'MODULE_PATHNAME', 'compact_in_batches'
LANGUAGE C;
COMMENT ON PROCEDURE fencing.compact_in_batches(regclass, bigint, integer, bigint) IS
'compact() without holding writers off: raises the floor, then removes the marks under it batch_size at a time, committing each batch';

-- In C (src/compact.cpp), SECURITY DEFINER: the tables it writes are the
-- extension owner's.  A floor is a token: not more than one above every token
-- the lock manager issued for the resources and what it can issue by now
-- (not the fences' tokens, which any caller picks: the floor is also
-- acquire()'s least token), with arithmetic that cannot overflow.
CREATE OR REPLACE FUNCTION fencing.compact_resources(below bigint, prefix text DEFAULT '')
RETURNS bigint
AS 'MODULE_PATHNAME', 'compact_resources'
LANGUAGE C VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION fencing.compact_resources(bigint, text) FROM PUBLIC;
COMMENT ON FUNCTION fencing.compact_resources(bigint, text) IS
'raises the floor of resources named prefix...: removes their idle leases and fences below it; returns how many';

-- compact_resources() a batch per transaction.  Not SECURITY DEFINER, which
-- would forbid its commits: revoked from PUBLIC, it works on the extension's
-- tables as their owner, in C.
CREATE OR REPLACE PROCEDURE fencing.compact_resources_in_batches(below bigint, prefix text DEFAULT '',
                                                                 batch_size integer DEFAULT 1000,
                                                                 INOUT removed bigint DEFAULT NULL)
AS 'MODULE_PATHNAME', 'compact_resources_in_batches'
LANGUAGE C;
REVOKE ALL ON PROCEDURE fencing.compact_resources_in_batches(bigint, text, integer, bigint) FROM PUBLIC;
COMMENT ON PROCEDURE fencing.compact_resources_in_batches(bigint, text, integer, bigint) IS
'compact_resources() a batch per transaction, the floor committed first; returns how many it removed';

-- The views, after the tables and functions they read.  Definitions (CREATE
-- OR REPLACE VIEW: an upgrade may only add columns at the end).

-- The protected tables and their settings, from the registry.
CREATE OR REPLACE VIEW fencing.protected_tables AS
SELECT r.relid AS relation, r.token_column, r.mode
FROM fencing.registry r
WHERE r.protected;
GRANT SELECT ON fencing.protected_tables TO PUBLIC;
COMMENT ON VIEW fencing.protected_tables IS
'tables guarded by fencing.protect(): token column and mode';

-- Leases as users see them; live is judged by the server's clock now.
CREATE OR REPLACE VIEW fencing.leases AS
SELECT r.resource, r.holder, r.token, r.granted_at, r.expires_at,
       (NOT r.released AND r.expires_at > pg_catalog.clock_timestamp()) AS live
FROM fencing.resources r
WHERE r.token IS NOT NULL;
GRANT SELECT ON fencing.leases TO PUBLIC;
COMMENT ON VIEW fencing.leases IS 'leases granted by fencing.acquire(); live by the server''s clock now';

CREATE OR REPLACE VIEW fencing.stats AS
SELECT s.relid::regclass AS relation, s.resource, s.writes_accepted, s.stale_rejections,
       s.missing_token_rejections, s.last_rejection_at, s.last_rejection_kind,
       s.last_rejection_key, s.last_rejection_presented, s.last_rejection_stored, s.stats_reset
FROM fencing._stats() s
WHERE s.relid IS NULL OR EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid = s.relid);
COMMENT ON VIEW fencing.stats IS
'accepted and rejected writes per protected relation and fenced resource, since stats_reset';
REVOKE ALL ON fencing.stats FROM PUBLIC;
GRANT SELECT ON fencing.stats TO pg_read_all_stats;

-- The event triggers on the functions of ddl.sql: install script only, since
-- CREATE EVENT TRIGGER has no OR REPLACE (an upgrade creates those its
-- release adds).

CREATE EVENT TRIGGER fencing_after_table_ddl ON ddl_command_end
WHEN TAG IN ('CREATE TABLE', 'ALTER TABLE', 'CREATE SCHEMA', 'CREATE FOREIGN TABLE', 'ALTER TRIGGER',
              'CREATE TRIGGER')
EXECUTE FUNCTION fencing._after_table_ddl();

CREATE EVENT TRIGGER fencing_forget_dropped_marks ON sql_drop
EXECUTE FUNCTION fencing._forget_dropped_marks();

CREATE EVENT TRIGGER fencing_before_drop ON ddl_command_start
WHEN TAG IN ('DROP TABLE', 'DROP FOREIGN TABLE', 'DROP SCHEMA', 'DROP OWNED')
EXECUTE FUNCTION fencing._before_drop();
