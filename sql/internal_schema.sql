-- The internal helpers live in schema fencing_internal, a member of the
-- extension; schema fencing holds the documented API alone, and no role can
-- call a helper through fencing_internal that it could not call before they
-- moved there (in schema fencing, where USAGE on fencing gated them).

-- Schema fencing: no helper (every function of the API is listed by setup).
SELECT p.oid::regprocedure AS helper_in_api_schema FROM pg_proc p
WHERE p.pronamespace = 'fencing'::regnamespace AND p.proname LIKE '\_%';

-- Schema fencing_internal: the extension's, owned by the extension owner,
-- USAGE to PUBLIC, CREATE to no other role.
SELECT n.nspowner = (SELECT c.relowner FROM pg_class c WHERE c.oid = 'fencing.registry'::regclass) AS owned,
       EXISTS (SELECT FROM pg_depend d
               WHERE d.classid = 'pg_namespace'::regclass AND d.objid = n.oid AND d.deptype = 'e'
                 AND d.refobjid = (SELECT x.oid FROM pg_extension x WHERE x.extname = 'fencing')) AS member,
       (SELECT string_agg(CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE 'owner' END || ' ' || a.privilege_type, ', '
                          ORDER BY a.grantee <> 0, a.privilege_type)
        FROM aclexplode(n.nspacl) a WHERE a.grantee <> n.nspowner) AS granted
FROM pg_namespace n WHERE n.nspname = 'fencing_internal';

-- Every helper: SECURITY DEFINER or not, EXECUTE by PUBLIC or not (those
-- PUBLIC may execute that change anything check USAGE on schema fencing:
-- below).
SELECT p.oid::regprocedure AS helper, p.prosecdef AS definer,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public_execute
FROM pg_proc p WHERE p.pronamespace = 'fencing_internal'::regnamespace
ORDER BY p.oid::regprocedure::text;

-- A role without USAGE on schema fencing: every helper that changes
-- anything refuses it (42501), as schema fencing did; the event trigger
-- functions are executable by no one but the owner.
CREATE ROLE regress_internal_nobody;
CREATE ROLE regress_internal_user;
GRANT USAGE ON SCHEMA fencing TO regress_internal_user;
GRANT CREATE ON SCHEMA t TO regress_internal_nobody, regress_internal_user;
SET ROLE regress_internal_nobody;
CREATE TABLE t.internal_nobody (k int PRIMARY KEY, last_fencing_token bigint NOT NULL DEFAULT 0);
SELECT t.error_of($$SELECT fencing.protect('t.internal_nobody')$$);
SELECT t.error_of($$SELECT fencing_internal._protect('t.internal_nobody', 'last_fencing_token', 'monotonic')$$);
SELECT t.error_of($$SELECT fencing_internal._guard_truncate('t.internal_nobody', 'last_fencing_token', 'monotonic')$$);
SELECT t.error_of($$SELECT fencing_internal._guard_key_changes('t.internal_nobody', 'last_fencing_token', 'monotonic')$$);
SELECT t.error_of($$SELECT fencing_internal._drop_guard('t.internal_nobody')$$);
SELECT t.error_of($$SELECT fencing_internal._unprotect('t.internal_nobody')$$);
SELECT t.error_of($$SELECT fencing_internal._citus_marks('t.internal_nobody')$$);
SELECT t.error_of($$SELECT fencing_internal._citus_record_shards('t.internal_nobody')$$);
SELECT t.error_of($$SELECT fencing_internal._grant_token(1)$$);
SELECT t.error_of($$SELECT fencing_internal._highest_token('t.internal_nobody', 'last_fencing_token')$$);
SELECT t.error_of($$SELECT * FROM fencing_internal._stats()$$);
SELECT t.error_of($$SELECT fencing_internal._refuse_partition_drops()$$);
SELECT t.error_of($$SELECT fencing_internal._after_table_ddl()$$);
SELECT t.error_of($$CREATE FUNCTION fencing_internal.planted() RETURNS int LANGUAGE sql AS 'SELECT 1'$$);
SELECT count(*) AS triggers FROM pg_trigger WHERE tgrelid = 't.internal_nobody'::regclass;
RESET ROLE;

-- A role with USAGE on schema fencing protects its own table (protect()
-- runs the helpers as the table's owner); it cannot run an event trigger's
-- function either.
SET ROLE regress_internal_user;
CREATE TABLE t.internal_user (k int PRIMARY KEY, last_fencing_token bigint NOT NULL DEFAULT 0);
SELECT fencing.protect('t.internal_user');
SELECT count(*) AS triggers FROM pg_trigger WHERE tgrelid = 't.internal_user'::regclass;
SELECT t.error_of($$INSERT INTO t.internal_user VALUES (1)$$);
SELECT fencing.unprotect('t.internal_user');
SELECT t.error_of($$SELECT fencing_internal._after_table_ddl()$$);
-- Without Citus, _citus_floors() (PUBLIC's) refuses and makes nothing.
SELECT t.error_of($$SELECT fencing_internal._citus_floors()$$);
SELECT count(*) AS fencing_citus FROM pg_namespace WHERE nspname = 'fencing_citus';
RESET ROLE;

-- The functions behind fencing.stats and fencing.rollout_report are
-- pg_read_all_stats's; called by a role without USAGE on schema fencing (a
-- pg_monitor member, through fencing_monitor.stats, or directly) they show
-- no rejected key, no tokens, no role and no application_name, as
-- fencing_monitor.stats does not.
CREATE ROLE regress_internal_monitor IN ROLE pg_monitor;
CREATE TABLE t.internal_watched (k int PRIMARY KEY, last_fencing_token bigint NOT NULL DEFAULT 0);
SELECT fencing.protect('t.internal_watched', enforce => false);
SET application_name = 'regress-internal';
INSERT INTO t.internal_watched VALUES (1);
RESET application_name;
SELECT fencing.set_enforce('t.internal_watched', true);
BEGIN; SET LOCAL fencing.token = 5; UPDATE t.internal_watched SET k = 1; COMMIT;
\set VERBOSITY terse
BEGIN; SET LOCAL fencing.token = 4;
UPDATE t.internal_watched SET k = 1;
ROLLBACK;
\set VERBOSITY default
SELECT last_rejection_kind, last_rejection_key, last_rejection_presented, last_rejection_stored
FROM fencing_internal._stats() WHERE relid = 't.internal_watched'::regclass;
SELECT role IS NOT NULL AS role_named, application_name, reason, count FROM fencing_internal._rollout_report()
WHERE relid = 't.internal_watched'::regclass;
SET ROLE regress_internal_monitor;
SELECT t.error_of($$SELECT * FROM fencing.stats$$);
SELECT stale_rejections, missing_reported FROM fencing_monitor.stats WHERE relation = 't.internal_watched'::regclass;
SELECT last_rejection_kind, last_rejection_key, last_rejection_presented, last_rejection_stored
FROM fencing_internal._stats() WHERE relid = 't.internal_watched'::regclass;
SELECT role, application_name, reason, count FROM fencing_internal._rollout_report()
WHERE relid = 't.internal_watched'::regclass;
RESET ROLE;
DROP TABLE t.internal_watched;
DROP ROLE regress_internal_monitor;

DROP TABLE t.internal_nobody, t.internal_user;
REVOKE CREATE ON SCHEMA t FROM regress_internal_nobody, regress_internal_user;
REVOKE USAGE ON SCHEMA fencing FROM regress_internal_user;
DROP ROLE regress_internal_nobody, regress_internal_user;
