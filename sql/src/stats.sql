-- fencing.stats: the functions behind the view (views.sql).  Definitions
-- (CREATE OR REPLACE).

-- Observability: counters in shared memory (shared_preload_libraries =
-- 'fencing'), one row per protected relation and per fenced resource of this
-- database.  The last rejection's key may show values a reader may not
-- otherwise see, so reading is for the owner and pg_read_all_stats.
CREATE OR REPLACE FUNCTION fencing_internal._stats(
	OUT relid oid, OUT resource text, OUT writes_accepted bigint, OUT stale_rejections bigint,
	OUT missing_token_rejections bigint, OUT last_rejection_at timestamptz,
	OUT last_rejection_kind text, OUT last_rejection_key text,
	OUT last_rejection_presented bigint, OUT last_rejection_stored bigint,
	OUT stats_reset timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'stats'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION fencing_internal._stats() IS 'internal: reads the counters behind fencing.stats';
REVOKE ALL ON FUNCTION fencing_internal._stats() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fencing_internal._stats() TO pg_read_all_stats;

CREATE OR REPLACE FUNCTION fencing.stats_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'stats_reset'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION fencing.stats_reset() IS 'zeroes the counters of fencing.stats for this database';
REVOKE ALL ON FUNCTION fencing.stats_reset() FROM PUBLIC;
