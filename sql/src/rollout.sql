-- Report-only rollout: switching a protected table between enforcing and
-- reporting, and the report of the writes it would have refused.
-- Definitions (CREATE OR REPLACE).

-- Switches a protected table's guard between enforcing (true) and
-- report-only (false), without a lock on the table: writers see the change
-- from their next transaction.  For the table's owner.
CREATE OR REPLACE FUNCTION fencing.set_enforce(target regclass, enforce boolean)
RETURNS void
AS 'MODULE_PATHNAME', 'fencing_set_enforce'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION fencing.set_enforce(regclass, boolean) IS
'switches a protected table between refusing (true) and reporting (false) the writes its guard would refuse';

-- Names the role (NULL: none) that may make maintenance writes to a
-- protected table besides its owner: in a transaction with SET LOCAL
-- fencing.maintenance = on, writes without a token keep the stored token.
-- For the table's owner; the extension creates no roles.
CREATE OR REPLACE FUNCTION fencing.set_maintainer(target regclass, role regrole)
RETURNS void
AS 'MODULE_PATHNAME', 'fencing_set_maintainer'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION fencing.set_maintainer(regclass, regrole) IS
'names the role that may write to a protected table without a token in a maintenance transaction (NULL: none)';

-- The groups of would-be refusals in shared memory (src/reporting/rollout.cpp).
-- Like fencing.stats: a group names roles and applications, so reading is
-- for the owner and pg_read_all_stats.
CREATE OR REPLACE FUNCTION fencing_internal._rollout_report(
	OUT relid oid, OUT role oid, OUT application_name text, OUT reason text,
	OUT count bigint, OUT first_seen timestamptz, OUT last_seen timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'fencing_rollout_report'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION fencing_internal._rollout_report() IS
'internal: reads the groups behind fencing.rollout_report';
REVOKE ALL ON FUNCTION fencing_internal._rollout_report() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fencing_internal._rollout_report() TO pg_read_all_stats;

CREATE OR REPLACE FUNCTION fencing.rollout_report_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'fencing_rollout_report_reset'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION fencing.rollout_report_reset() IS
'empties fencing.rollout_report for this database';
REVOKE ALL ON FUNCTION fencing.rollout_report_reset() FROM PUBLIC;

CREATE OR REPLACE VIEW fencing.rollout_report AS
SELECT r.relid::regclass AS relation, r.role::regrole AS role, r.application_name, r.reason,
       r.count, r.first_seen, r.last_seen
FROM fencing_internal._rollout_report() r
WHERE r.reason <> 'maintenance'
  AND (r.relid IS NULL OR EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid = r.relid));
COMMENT ON VIEW fencing.rollout_report IS
'writes that report-only guards accepted and enforcement would refuse, by relation, role, application_name and reason';
REVOKE ALL ON fencing.rollout_report FROM PUBLIC;
GRANT SELECT ON fencing.rollout_report TO pg_read_all_stats;

-- Sets the stored token of the row with `key` (or, with no such row, the
-- marks of that deleted key) to `token`, lower than before or not: the
-- repair for a row a writer pinned at a token no real holder reaches.  For
-- the table's owner; logged.  Returns the token it replaced.
CREATE OR REPLACE FUNCTION fencing.reset_token(target regclass, key jsonb, token bigint)
RETURNS bigint
AS 'MODULE_PATHNAME', 'fencing_reset_token'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION fencing.reset_token(regclass, jsonb, bigint) IS
'sets the stored token of a row (or of a deleted key''s marks) to a given token, lower or not; for the table''s owner';
