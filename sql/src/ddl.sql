-- The functions of the event triggers that follow DDL (the triggers
-- themselves: event_triggers.sql).  Definitions (CREATE OR REPLACE).

-- After CREATE or ALTER of a table or trigger: partitions created or attached
-- later get their TRUNCATE guard (their row triggers PostgreSQL clones),
-- partitions detached leave their history to the table, the guard follows
-- key changes and other BEFORE UPDATE triggers, and DDL that would leave a
-- protected table unguarded (or change its token column) is refused.  In C
-- (src/admin/ddl.cpp): it reads the collected commands and the catalogs through C
-- APIs.  It fires for every role's DDL and runs with that role's rights; it
-- writes the extension's tables as the extension owner and changes a
-- table's triggers as the table's owner, with SECURITY_RESTRICTED_OPERATION.
CREATE OR REPLACE FUNCTION fencing_internal._after_table_ddl()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'after_table_ddl'
LANGUAGE C;
COMMENT ON FUNCTION fencing_internal._after_table_ddl() IS
'internal: event trigger keeping protected tables guarded through DDL';
REVOKE ALL ON FUNCTION fencing_internal._after_table_ddl() FROM PUBLIC;  -- fired, never called by name

-- Marks, floors and registrations of a dropped table go with it (its OID
-- could be reused).  Runs with the owner's rights; it can only be fired by
-- DROP, for objects really dropped, and reads nothing but catalogs and the
-- extension's own tables.
CREATE OR REPLACE FUNCTION fencing_internal._forget_dropped_marks()
RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	coordinator boolean := false;
	dropped bigint[];
BEGIN
	-- A partition of a protected table dropped without its table: refused.
	PERFORM fencing_internal._refuse_partition_drops();
	-- The dropped tables that were protected (the registry's, unprotected
	-- ones too): a floor in fencing_citus.floors has such an id.
	SELECT pg_catalog.array_agg(r.relid::oid::bigint) INTO dropped
	FROM fencing.registry r, pg_event_trigger_dropped_objects() o
	WHERE o.classid = 'pg_class'::regclass AND o.objsubid = 0 AND r.relid = o.objid;
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
	-- marks table is in the same DROP TABLE: see src/citus/token_relay.cpp).  Only with
	-- Citus installed and a schema fencing_citus the extension made: anyone
	-- with CREATE on the database can make a schema of that name.  Not for
	-- the shards Citus drops (none is registered): on a coordinator that
	-- holds shards it drops them over a connection of its own, where a
	-- distributed DELETE is refused (a query on a shard).
	IF dropped IS NOT NULL AND EXISTS (SELECT FROM pg_extension e WHERE e.extname = 'citus')
	   AND fencing_internal._citus_schema_is_ours() THEN
		EXECUTE 'SELECT pg_catalog.citus_is_coordinator()' INTO coordinator;
	END IF;
	IF coordinator THEN
		-- The dropped tables first: the DELETE runs on the nodes, where no drop is.
		DELETE FROM fencing_citus.floors WHERE id = ANY (dropped);
	END IF;
END
$$;
COMMENT ON FUNCTION fencing_internal._forget_dropped_marks() IS
'internal: event trigger removing the marks, floors and registrations of dropped tables';
REVOKE ALL ON FUNCTION fencing_internal._forget_dropped_marks() FROM PUBLIC;  -- fired, never called by name

-- A partition of a protected table is not dropped while attached (its
-- rows' tokens would go with it); DETACH PARTITION first keeps its history.
-- Before every command (any DROP ... CASCADE, DROP EXTENSION and DROP OWNED
-- can drop tables), _before_drop() loads the module, whose object access
-- hook records every partition the command drops; at sql_drop,
-- _refuse_partition_drops() refuses those whose protected table stays, and
-- fails closed on a drop the hook did not watch.  In C (src/admin/ddl.cpp), with
-- the dropping role's rights.
CREATE OR REPLACE FUNCTION fencing_internal._before_drop()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'before_drop'
LANGUAGE C;
COMMENT ON FUNCTION fencing_internal._before_drop() IS
'internal: event trigger loading the module before a DROP, so that it sees dropped partitions';
REVOKE ALL ON FUNCTION fencing_internal._before_drop() FROM PUBLIC;  -- fired, never called by name

CREATE OR REPLACE FUNCTION fencing_internal._refuse_partition_drops()
RETURNS void
AS 'MODULE_PATHNAME', 'refuse_partition_drops'
LANGUAGE C;
COMMENT ON FUNCTION fencing_internal._refuse_partition_drops() IS
'internal: refuses a DROP that takes a partition of a protected table without the table';
REVOKE ALL ON FUNCTION fencing_internal._refuse_partition_drops() FROM PUBLIC;  -- _forget_dropped_marks() calls it
