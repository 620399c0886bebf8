-- fencing 0.1.0: fencing tokens checked by the storage.
\echo Use "CREATE EXTENSION fencing" to load this file. \quit

-- Every object is schema-qualified and every function body pins search_path,
-- so nothing planted earlier in a caller's search_path is ever picked up.

-- PostgreSQL checks a module's settings only once the module is loaded.  So
-- that SET fencing.token = 'abc' fails in every new session of this database,
-- unless the server already preloads the module, add it to this database's
-- session_preload_libraries (ALTER DATABASE ... RESET session_preload_libraries
-- undoes it; README, "Installing").
DO $$
DECLARE
	libraries text;
BEGIN
	IF pg_catalog.current_setting('shared_preload_libraries') ~ '(^|[\s,"])fencing($|[\s,"])' THEN
		RETURN;
	END IF;
	SELECT pg_catalog.substr(c, pg_catalog.length('session_preload_libraries=') + 1) INTO libraries
	FROM pg_catalog.pg_db_role_setting s, pg_catalog.unnest(s.setconfig) c
	WHERE s.setrole = 0
	  AND s.setdatabase = (SELECT d.oid FROM pg_catalog.pg_database d
	                       WHERE d.datname = pg_catalog.current_database())
	  AND c LIKE 'session\_preload\_libraries=%';
	-- Without a database-level value, start from the server's, so that nothing is shadowed.
	libraries := coalesce(libraries, pg_catalog.current_setting('session_preload_libraries'));
	IF libraries ~ '(^|[\s,"])fencing($|[\s,"])' THEN
		RETURN;
	END IF;
	libraries := CASE WHEN libraries = '' THEN 'fencing' ELSE libraries || ', fencing' END;
	EXECUTE pg_catalog.format('ALTER DATABASE %I SET session_preload_libraries = %s',
	                          pg_catalog.current_database(), libraries);
END
$$;

-- The token comparison, as a predicate for SQL that fenced_update() builds.
CREATE FUNCTION fencing.token_accepts(stored bigint, presented bigint, strict boolean)
RETURNS boolean
AS 'MODULE_PATHNAME', 'token_accepts'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

-- The storage guard: a BEFORE ROW trigger installed by fencing.protect().
CREATE FUNCTION fencing.guard()
RETURNS trigger
AS 'MODULE_PATHNAME', 'guard'
LANGUAGE C;

-- High-water marks of deleted keys; written only by the guard, with the
-- extension owner's rights.  Dumped by pg_dump with the extension.
CREATE TABLE fencing.deleted_keys (
	relid regclass NOT NULL,
	key text[] NOT NULL,
	token bigint NOT NULL CHECK (token > 0),
	deleted_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	PRIMARY KEY (relid, key)
);
SELECT pg_catalog.pg_extension_config_dump('fencing.deleted_keys', '');
REVOKE ALL ON fencing.deleted_keys FROM PUBLIC;

-- The quoted primary key columns of a table the guard can protect; errors if
-- it has no immediate primary key, or one whose equal values print differently.
CREATE FUNCTION fencing.primary_key_columns(target regclass)
RETURNS text
AS 'MODULE_PATHNAME', 'primary_key_columns'
LANGUAGE C STABLE;

-- Drops the guard's triggers from a table; false if it had none.
CREATE FUNCTION fencing.drop_guard(target regclass)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	trigger_name name;
	dropped boolean := false;
BEGIN
	FOR trigger_name IN
		SELECT t.tgname FROM pg_trigger t
		WHERE t.tgrelid = target AND t.tgparentid = 0
		  AND t.tgname IN ('fencing_guard', 'fencing_guard_keys')
	LOOP
		EXECUTE format('DROP TRIGGER %I ON %s', trigger_name, target);
		dropped := true;
	END LOOP;
	RETURN dropped;
END
$$;

-- Marks of a dropped table go with it (its OID could be reused).  Runs with
-- the owner's rights; it can only be fired by DROP, for objects really dropped.
CREATE FUNCTION fencing.forget_dropped_marks()
RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	DELETE FROM fencing.deleted_keys d
	USING pg_event_trigger_dropped_objects() o
	WHERE o.classid = 'pg_class'::regclass AND o.objsubid = 0 AND d.relid = o.objid;
END
$$;
CREATE EVENT TRIGGER fencing_forget_dropped_marks ON sql_drop
EXECUTE FUNCTION fencing.forget_dropped_marks();

-- Protect a table: token column, guard triggers, settings (in the triggers' arguments).
CREATE FUNCTION fencing.protect(
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
	key_columns text;
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
	key_columns := fencing.primary_key_columns(target);

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

	-- The BEFORE trigger checks every write against its row; the AFTER one
	-- checks a key that appears against the mark of its last deletion.
	PERFORM fencing.drop_guard(target);
	EXECUTE format('CREATE TRIGGER fencing_guard BEFORE INSERT OR UPDATE OR DELETE ON %s '
	               'FOR EACH ROW EXECUTE FUNCTION fencing.guard(%L, %L)',
	               target, token_column, mode);
	EXECUTE format('CREATE TRIGGER fencing_guard_keys AFTER INSERT OR UPDATE OF %s ON %s '
	               'FOR EACH ROW EXECUTE FUNCTION fencing.guard(%L, %L)',
	               key_columns, target, token_column, mode);
END
$$;

-- Unprotect a table: the guard goes, the token column and its values stay.
CREATE FUNCTION fencing.unprotect(target regclass)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF target IS NULL THEN
		RAISE EXCEPTION 'target must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF NOT fencing.drop_guard(target) THEN
		RAISE NOTICE 'relation "%" is not protected, skipping', target;
	END IF;
END
$$;

-- The protected tables and their settings, read from the guard triggers.
CREATE VIEW fencing.protected_tables AS
SELECT t.tgrelid::regclass AS relation,
       pg_catalog.convert_from(
           pg_catalog.substring(t.tgargs, 1, pg_catalog.position(t.tgargs, '\x00'::bytea) - 1),
           pg_catalog.getdatabaseencoding())::name AS token_column,
       pg_catalog.convert_from(
           pg_catalog.substring(t.tgargs, pg_catalog.position(t.tgargs, '\x00'::bytea) + 1,
                                pg_catalog.length(t.tgargs)
                                - pg_catalog.position(t.tgargs, '\x00'::bytea) - 1),
           pg_catalog.getdatabaseencoding()) AS mode
FROM pg_catalog.pg_trigger t
WHERE t.tgname = 'fencing_guard'
  AND t.tgparentid = 0
  AND t.tgfoid = 'fencing.guard()'::pg_catalog.regprocedure;
GRANT SELECT ON fencing.protected_tables TO PUBLIC;

-- One fenced write: apply changes and advance the token iff the row accepts it.
CREATE FUNCTION fencing.fenced_update(
	target regclass,
	key jsonb,
	token bigint,
	changes jsonb DEFAULT '{}',
	on_stale text DEFAULT 'error')
RETURNS boolean
AS 'MODULE_PATHNAME', 'fenced_update'
LANGUAGE C VOLATILE;

-- PostgreSQL as the lock manager: leases and resource fences.

-- Tokens of every grant, for every resource.  A sequence, because it does not
-- roll back with the transaction that used it: a token is never issued twice.
-- It starts at the current time in microseconds since 1970, which no earlier
-- token of this database can have reached (that would take a million grants a
-- second): so an installation dropped and created again, or a database
-- restored from an older dump, never hands out a number it handed out before.
-- For that reason its value is not dumped: a restore starts it afresh.
CREATE SEQUENCE fencing.token_seq;
SELECT pg_catalog.setval('fencing.token_seq',
                         (pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) * 1000000)::bigint);
REVOKE ALL ON SEQUENCE fencing.token_seq FROM PUBLIC;

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

-- One row per fenced resource: its high-water mark.  Apart from the leases, so
-- that a transaction holding a fence does not block renew() and acquire().
CREATE TABLE fencing.fences (
	resource text PRIMARY KEY CHECK (resource <> ''),
	token bigint NOT NULL CHECK (token > 0)
);
SELECT pg_catalog.pg_extension_config_dump('fencing.fences', '');
REVOKE ALL ON fencing.fences FROM PUBLIC;

-- Leases as users see them; live is judged by the server's clock now.
CREATE VIEW fencing.leases AS
SELECT r.resource, r.holder, r.token, r.granted_at, r.expires_at,
       (NOT r.released AND r.expires_at > pg_catalog.clock_timestamp()) AS live
FROM fencing.resources r
WHERE r.token IS NOT NULL;
GRANT SELECT ON fencing.leases TO PUBLIC;

-- The functions that write lease and fence state run with the extension
-- owner's rights, pin search_path and check their arguments themselves.
CREATE FUNCTION fencing.acquire(resource text, holder text, ttl interval)
RETURNS bigint
AS 'MODULE_PATHNAME', 'acquire'
LANGUAGE C VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION fencing.renew(resource text, holder text, token bigint, ttl interval)
RETURNS boolean
AS 'MODULE_PATHNAME', 'renew'
LANGUAGE C VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION fencing.release(resource text, holder text, token bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'release'
LANGUAGE C VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION fencing.fence(resource text, token bigint)
RETURNS bigint
AS 'MODULE_PATHNAME', 'fence'
LANGUAGE C VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
