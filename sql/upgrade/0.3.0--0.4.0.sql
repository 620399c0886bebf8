-- fencing 0.3.0 -> 0.4.0
\echo Use "ALTER EXTENSION fencing UPDATE TO '0.4.0'" to load this file. \quit

-- Every protected table first (src/legacy/upgrade.cpp): running writes finish and
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

-- The internal helpers move to schema fencing_internal (sql/src/internal.sql),
-- out of the API's schema.  SET SCHEMA keeps each function's OID, grants and
-- comment: the event triggers, the view fencing.stats and every statement
-- planned on them keep working; the definitions below then replace them
-- there.
--@include sql/src/internal.sql
ALTER FUNCTION fencing._after_table_ddl() SET SCHEMA fencing_internal;
ALTER FUNCTION fencing._before_drop() SET SCHEMA fencing_internal;
ALTER FUNCTION fencing._citus_floors() SET SCHEMA fencing_internal;
ALTER FUNCTION fencing._citus_marks(regclass) SET SCHEMA fencing_internal;
ALTER FUNCTION fencing._citus_schema_is_ours() SET SCHEMA fencing_internal;
ALTER FUNCTION fencing._default_is_zero(regclass, name) SET SCHEMA fencing_internal;
ALTER FUNCTION fencing._drop_guard(regclass) SET SCHEMA fencing_internal;
ALTER FUNCTION fencing._forget_dropped_marks() SET SCHEMA fencing_internal;
ALTER FUNCTION fencing._grant_token(bigint, bigint) SET SCHEMA fencing_internal;
ALTER FUNCTION fencing._guard_key_changes(regclass, name, text) SET SCHEMA fencing_internal;
ALTER FUNCTION fencing._guard_truncate(regclass, name, text) SET SCHEMA fencing_internal;
ALTER FUNCTION fencing._highest_token(regclass, name) SET SCHEMA fencing_internal;
ALTER FUNCTION fencing._key_change_condition(regclass) SET SCHEMA fencing_internal;
ALTER FUNCTION fencing._protect(regclass, name, text) SET SCHEMA fencing_internal;
ALTER FUNCTION fencing._refuse_partition_drops() SET SCHEMA fencing_internal;
ALTER FUNCTION fencing._refuse_partition_guard(regclass) SET SCHEMA fencing_internal;
ALTER FUNCTION fencing._refuse_pending_detach(regclass) SET SCHEMA fencing_internal;
ALTER FUNCTION fencing._stats() SET SCHEMA fencing_internal;
ALTER FUNCTION fencing._tree(regclass) SET SCHEMA fencing_internal;
ALTER FUNCTION fencing._unprotect(regclass) SET SCHEMA fencing_internal;
-- The event triggers' functions at once: 0.3.0's _forget_dropped_marks()
-- calls _refuse_partition_drops() by its old name, and the DROP FUNCTIONs
-- below fire it.
--@include sql/src/ddl.sql

-- Functions whose signature changes go (so that calls with the old
-- arguments are not ambiguous); their grants (a DBA may have revoked one from
-- PUBLIC) are kept here and passed to the new functions after the includes.
CREATE TABLE fencing._old_grants (successor text, proacl aclitem[]);
CREATE FUNCTION fencing._pass_grants() RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	old record;
	item record;
BEGIN
	FOR old IN SELECT * FROM fencing._old_grants g WHERE g.proacl IS NOT NULL LOOP
		-- NULL: the defaults, as the new function has them
		EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', old.successor);
		FOR item IN SELECT * FROM pg_catalog.aclexplode(old.proacl) LOOP
			EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s%s', old.successor,
				CASE WHEN item.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
				     ELSE item.grantee::pg_catalog.regrole::pg_catalog.text END,
				CASE WHEN item.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
		END LOOP;
	END LOOP;
END
$$;

--@include sql/src/table_options.sql

--@include sql/src/guard.sql

-- protect() gains enforce and max_token (the library serves the old entry
-- point until this update).
INSERT INTO fencing._old_grants
SELECT 'fencing.protect(regclass, name, text, boolean, bigint)', p.proacl FROM pg_catalog.pg_proc p
WHERE p.oid OPERATOR(pg_catalog.=) 'fencing.protect(regclass, name, text)'::pg_catalog.regprocedure;
DROP FUNCTION fencing.protect(regclass, name, text);

--@include sql/src/protect.sql

--@include sql/src/citus.sql

-- acquire() gains wait (DEFAULT NULL).
INSERT INTO fencing._old_grants
SELECT 'fencing.acquire(text, text, interval, interval)', p.proacl FROM pg_catalog.pg_proc p
WHERE p.oid OPERATOR(pg_catalog.=) 'fencing.acquire(text, text, interval)'::pg_catalog.regprocedure;
DROP FUNCTION fencing.acquire(text, text, interval);

-- Leases gain their durable horizon and the epoch of their last write.
-- Every lease of 0.3.0 was flushed: its horizon is its expiry.
ALTER TABLE fencing.resources ADD COLUMN grace_until timestamptz, ADD COLUMN epoch bigint;
UPDATE fencing.resources SET grace_until = expires_at;
COMMENT ON COLUMN fencing.resources.grace_until IS
'durable horizon: expiry + fencing.lease_grace at the last flushed grant or renewal; after a restart or promotion a lease not released is held until then';
COMMENT ON COLUMN fencing.resources.epoch IS
'the server epoch (system, timeline, start) of the row''s last flushed grant or renewal';

--@include sql/src/leases.sql

--@include sql/src/stats.sql

--@include sql/src/rollout.sql

--@include sql/src/compact.sql

--@include sql/src/views.sql

-- New in 0.4.0: leader election (campaign, resign, leader).
--@include sql/src/election.sql

-- New in 0.4.0: schema fencing_monitor, what pg_monitor reads.
--@include sql/src/monitor.sql

SELECT fencing._pass_grants();
DROP FUNCTION fencing._pass_grants();
DROP TABLE fencing._old_grants;

-- Event triggers whose WHEN changed (event triggers cannot be altered, only
-- dropped and created again; sql/src/event_triggers.sql has them as a fresh
-- install does): the follower also sees CREATE TABLE AS and SELECT INTO
-- (state left under a new table's OID goes) and ALTER EXTENSION ... ADD (no
-- relation of a protected tree joins an extension, which DROP EXTENSION
-- would drop it with); the module loads before every command, since any
-- DROP ... CASCADE can drop a partition.
DROP EVENT TRIGGER fencing_after_table_ddl;
CREATE EVENT TRIGGER fencing_after_table_ddl ON ddl_command_end
WHEN TAG IN ('CREATE TABLE', 'ALTER TABLE', 'CREATE SCHEMA', 'CREATE FOREIGN TABLE', 'ALTER TRIGGER',
              'CREATE TRIGGER', 'CREATE TABLE AS', 'SELECT INTO', 'ALTER EXTENSION')
EXECUTE FUNCTION fencing_internal._after_table_ddl();
DROP EVENT TRIGGER fencing_before_drop;
CREATE EVENT TRIGGER fencing_before_drop ON ddl_command_start
EXECUTE FUNCTION fencing_internal._before_drop();

-- State 0.3.0 left behind: temporary tables could be protected, and went
-- (ON COMMIT DROP, the session's end) without sql_drop.  The registry rows,
-- marks and floors under OIDs no relation has, or a temporary one has, go;
-- those of detached and unprotected tables, which exist, stay.
DELETE FROM fencing.deleted_keys d
WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class c
                  WHERE c.oid OPERATOR(pg_catalog.=) d.relid
                    AND c.relpersistence OPERATOR(pg_catalog.<>) 't');
DELETE FROM fencing.floors f
WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class c
                  WHERE c.oid OPERATOR(pg_catalog.=) f.relid
                    AND c.relpersistence OPERATOR(pg_catalog.<>) 't');
DELETE FROM fencing.registry r
WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class c
                  WHERE c.oid OPERATOR(pg_catalog.=) r.relid
                    AND c.relpersistence OPERATOR(pg_catalog.<>) 't');

-- Citus: the shards of every protected distributed table, recorded under
-- its marks id (fencing_citus.shards): a shard's guard goes on only with the
-- id recorded for its table.  On the coordinator, once.
DO $$
BEGIN
	IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL
	   AND pg_catalog.to_regclass('fencing_citus.floors') IS NOT NULL THEN
		IF NOT (SELECT c FROM pg_catalog.citus_is_coordinator() c) THEN
			RETURN;
		END IF;
		PERFORM fencing_internal._citus_floors();
		PERFORM fencing_internal._citus_record_shards(r.relid) FROM fencing.registry r
		WHERE r.protected
		  AND pg_catalog.to_regclass(pg_catalog.format('fencing_citus.marks_%s', r.relid::oid)) IS NOT NULL;
	END IF;
END
$$;

-- Citus: what may go into schema fencing_citus (sql/src/citus.sql), and the
-- marks tables that 0.3.0 left with another owner than their protected
-- table's (ALTER TABLE ... OWNER TO of the table did not reach them) go to
-- that owner, on the coordinator: the guard reads and writes a shard's marks
-- as the marks table's owner, and high_water_mark() counts only those.
CREATE EVENT TRIGGER fencing_guard_citus_schema ON ddl_command_end
EXECUTE FUNCTION fencing_internal._guard_citus_schema();
DO $$
DECLARE
	m record;
BEGIN
	IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NULL
	   OR NOT fencing_internal._citus_schema_is_ours() THEN
		RETURN;
	END IF;
	IF NOT (SELECT c FROM pg_catalog.citus_is_coordinator() c) THEN
		RETURN;
	END IF;
	FOR m IN SELECT mc.oid::regclass AS marks, p.relowner::regrole AS owner
	         FROM fencing.registry r
	         JOIN pg_catalog.pg_class p ON p.oid = r.relid
	         JOIN pg_catalog.pg_class mc
	           ON mc.relnamespace = pg_catalog.to_regnamespace('fencing_citus')
	          AND mc.relname = 'marks_' || r.relid::oid::text
	         WHERE mc.relowner <> p.relowner
	           AND EXISTS (SELECT FROM pg_catalog.pg_dist_partition a, pg_catalog.pg_dist_partition b
	                       WHERE a.logicalrelid = mc.oid AND b.logicalrelid = p.oid
	                         AND a.colocationid = b.colocationid) LOOP
		EXECUTE pg_catalog.format('ALTER TABLE %s OWNER TO %s', m.marks, m.owner);
	END LOOP;
END
$$;
