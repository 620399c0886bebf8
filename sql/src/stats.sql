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

-- Lease counters and lease health per resource prefix (shared memory, like
-- fencing.stats): counted when the calling transaction commits.  They name
-- resource prefixes only; reading is for the owner and pg_read_all_stats
-- (pg_monitor through fencing_monitor).
CREATE OR REPLACE FUNCTION fencing._lease_stats(
	OUT prefix text, OUT grants bigint, OUT refused_acquires bigint, OUT waits bigint,
	OUT wait_time interval, OUT max_wait_time interval, OUT renewals bigint,
	OUT failed_renewals bigint, OUT expired_while_held bigint, OUT releases bigint,
	OUT failed_releases bigint, OUT stats_reset timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'fencing_lease_stats'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION fencing._lease_stats() IS 'internal: reads the counters behind fencing.lease_stats';
REVOKE ALL ON FUNCTION fencing._lease_stats() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fencing._lease_stats() TO pg_read_all_stats;

CREATE OR REPLACE FUNCTION fencing._lease_health(
	OUT prefix text, OUT renewal_gaps bigint, OUT renewal_gap_p50 interval,
	OUT renewal_gap_p99 interval, OUT renewal_gap_max interval, OUT hold_times bigint,
	OUT hold_time_p50 interval, OUT hold_time_p99 interval, OUT hold_time_max interval,
	OUT late_renewals bigint, OUT expired_while_held bigint, OUT expired_then_stale bigint,
	OUT max_overrun interval, OUT max_expired_gap interval, OUT suggested_ttl interval)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'fencing_lease_health'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION fencing._lease_health() IS 'internal: reads the histograms behind fencing.lease_health';
REVOKE ALL ON FUNCTION fencing._lease_health() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fencing._lease_health() TO pg_read_all_stats;

CREATE OR REPLACE FUNCTION fencing.lease_stats_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'fencing_lease_stats_reset'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION fencing.lease_stats_reset() IS
'zeroes fencing.lease_stats and fencing.lease_health for this database';
REVOKE ALL ON FUNCTION fencing.lease_stats_reset() FROM PUBLIC;
