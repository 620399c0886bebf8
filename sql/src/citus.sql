-- Citus: the schema fencing_citus, its floors and the marks tables of
-- distributed tables.  Definitions (CREATE OR REPLACE).

-- Is schema fencing_citus, and its table floors, the extension owner's (made
-- by _citus_floors())?  Any role with CREATE on the database can make a
-- schema of that name first; the extension then never touches it.
CREATE OR REPLACE FUNCTION fencing_internal._citus_schema_is_ours()
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
COMMENT ON FUNCTION fencing_internal._citus_schema_is_ours() IS
'internal: is schema fencing_citus the one the extension made';

-- Citus: the schema fencing_citus and its reference table of TRUNCATE floors
-- (on every node, keyed by the marks id), made once, owned by the extension
-- owner, who alone writes floors.  Everyone may create a marks table there
-- (protect() does, as the table's owner) and read none but their own; anyone
-- who may protect a table may make both.  A schema of that name made by
-- another role is refused, and so is a database without Citus.
CREATE OR REPLACE FUNCTION fencing_internal._citus_floors()
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF pg_catalog.to_regprocedure('pg_catalog.create_reference_table(regclass)') IS NULL THEN
		RAISE EXCEPTION 'citus is not installed in this database'
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      DETAIL = 'Schema fencing_citus holds the marks of Citus distributed tables.',
			      HINT = 'Run CREATE EXTENSION citus first.';
	END IF;
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
	ELSIF NOT fencing_internal._citus_schema_is_ours() THEN
		RAISE EXCEPTION 'table fencing_citus.floors was not made by the fencing extension'
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      HINT = 'Drop that table, then protect the table again.';
	END IF;
	-- The shards of each protected distributed table, by marks id: how a
	-- node tells which table a shard's guard belongs to.
	IF pg_catalog.to_regclass('fencing_citus.shards') IS NULL AND fencing_internal._citus_schema_is_ours() THEN
		CREATE TABLE fencing_citus.shards (shardid bigint PRIMARY KEY, id bigint NOT NULL);
		REVOKE ALL ON fencing_citus.shards FROM PUBLIC;
		COMMENT ON TABLE fencing_citus.shards IS 'shards of protected distributed tables, by marks id';
		PERFORM create_reference_table('fencing_citus.shards');
	ELSIF (SELECT c.relowner FROM pg_class c WHERE c.oid = 'fencing_citus.shards'::regclass)
	      <> (SELECT c.relowner FROM pg_class c WHERE c.oid = 'fencing.registry'::regclass) THEN
		RAISE EXCEPTION 'table fencing_citus.shards was not made by the fencing extension'
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      HINT = 'Drop that table, then protect the table again.';
	END IF;
END
$$;
COMMENT ON FUNCTION fencing_internal._citus_floors() IS
'internal: makes the schema fencing_citus and its table of floors on Citus';

-- Citus: the id of a distributed table's marks table, made if missing, with
-- the rights of the caller (protect() runs as the table's owner, and Citus
-- wants a transaction's work on co-located tables done by one user); NULL
-- for a table Citus does not distribute (a local table, a Citus local
-- table); 0A000 for the kinds the guard does not support.  The marks of a
-- shard's deleted keys live in the co-located shard of
-- fencing_citus.marks_<id>, on the same node, so they move, split and
-- rebalance with the rows; DROP TABLE of the protected table drops it too.
CREATE OR REPLACE FUNCTION fencing_internal._citus_marks(target regclass)
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
	PERFORM fencing_internal._require_fencing_usage();
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
	-- The schema, made now as the extension owner, would reach the workers
	-- over the extension owner's connections, which the caller's (making the
	-- marks table's shards there) do not see before commit.
	IF pg_catalog.to_regnamespace('fencing_citus') IS NULL
	   AND NOT (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = current_user) THEN
		RAISE EXCEPTION 'schema fencing_citus does not exist yet'
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      DETAIL = 'The first fencing.protect() of a distributed table makes it; Citus'' workers see it only once that transaction commits.',
			      HINT = 'Run SELECT fencing_internal._citus_floors(); in a transaction of its own, then fencing.protect() again.';
	END IF;
	PERFORM fencing_internal._citus_floors();
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
		PERFORM fencing_internal._citus_record_shards(target);
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
	PERFORM fencing_internal._citus_record_shards(target);
	RETURN target::oid;
END
$$;
COMMENT ON FUNCTION fencing_internal._citus_marks(regclass) IS
'internal: the marks table of a Citus distributed table, made if missing; NULL for local tables';

-- Citus: records the shards of a distributed table under its marks id in
-- fencing_citus.shards, as the extension owner, for the table's owner
-- (protect() calls it).  A shard's guard carries the marks id as its third
-- argument; the guard goes on only where that id is the one recorded for the
-- shard's table (src/citus.cpp): an id written into another table's trigger
-- reaches no marks and no floor.
CREATE OR REPLACE FUNCTION fencing_internal._citus_record_shards(target regclass)
RETURNS void
AS 'MODULE_PATHNAME', 'citus_record_shards'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION fencing_internal._citus_record_shards(regclass) IS
'internal: records the shards of a protected distributed table under its marks id';

-- Citus: no role but the extension owner, the superuser and the owner of a
-- protected table puts anything into schema fencing_citus.  The schema grants
-- CREATE to PUBLIC because Citus creates a marks table's shards, on every
-- node that holds a shard of the protected table (the coordinator too, when
-- it holds shards), as the table's owner; this event trigger
-- (ddl_command_end, every command) refuses, with 42501, every object a
-- command leaves there unless it is a table marks_<oid> or
-- marks_<oid>_<shardid> (or its primary key, named for it) owned by the
-- owner of relation <oid>.  Which role that is, each node judges from what
-- it knows: on the coordinator, relation <oid> itself (a table outside
-- fencing_citus); on any other node (where <oid> is the coordinator's OID),
-- the tables whose shards protect() recorded under <oid> in
-- fencing_citus.shards, and the marks table marks_<oid> there; a shard id in
-- Citus' metadata must be one of marks_<oid>'s.  Read through the system
-- caches (a shard Citus makes in this backend is not yet visible to SQL on
-- pg_class at ddl_command_end) and as committed metadata, in C
-- (src/citus/schema_guard.cpp); runs as the role that ran the command and
-- reads fencing_citus.shards as the extension owner; changes nothing.
CREATE OR REPLACE FUNCTION fencing_internal._guard_citus_schema()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'guard_citus_schema'
LANGUAGE C;
COMMENT ON FUNCTION fencing_internal._guard_citus_schema() IS
'internal: refuses objects in schema fencing_citus that fencing.protect() did not make for the role''s own tables';
REVOKE ALL ON FUNCTION fencing_internal._guard_citus_schema() FROM PUBLIC;  -- fired, never called by name
