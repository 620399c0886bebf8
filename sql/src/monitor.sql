-- Schema fencing_monitor: what monitoring reads, for pg_monitor.  Views
-- only, owned by the extension's owner: a role that may read them gets no
-- USAGE on schema fencing, so it can call none of acquire(), renew(),
-- release(), fence() or fenced_update(), and it writes nothing.  The views
-- read the extension's tables with their owner's rights; the functions
-- behind stats, lease_stats and lease_health are granted to
-- pg_read_all_stats, of which pg_monitor is a member.
CREATE SCHEMA IF NOT EXISTS fencing_monitor;
REVOKE ALL ON SCHEMA fencing_monitor FROM PUBLIC;
GRANT USAGE ON SCHEMA fencing_monitor TO pg_monitor;

CREATE OR REPLACE VIEW fencing_monitor.stats AS
SELECT s.relation, s.resource, s.writes_accepted, s.stale_rejections,
       s.missing_token_rejections, s.last_rejection_at, s.stats_reset,
       s.stale_reported, s.missing_reported, s.maintenance_writes
FROM fencing.stats s;
COMMENT ON VIEW fencing_monitor.stats IS 'fencing.stats without the last rejection''s key and tokens';

CREATE OR REPLACE VIEW fencing_monitor.lease_stats AS
SELECT * FROM fencing.lease_stats;
COMMENT ON VIEW fencing_monitor.lease_stats IS 'fencing.lease_stats, for pg_monitor';

CREATE OR REPLACE VIEW fencing_monitor.lease_health AS
SELECT * FROM fencing.lease_health;
COMMENT ON VIEW fencing_monitor.lease_health IS 'fencing.lease_health, for pg_monitor';

CREATE OR REPLACE VIEW fencing_monitor.leases AS
SELECT * FROM fencing.leases;
COMMENT ON VIEW fencing_monitor.leases IS 'fencing.leases, for pg_monitor';

-- How far the highest lease token is from the end of its generation: tokens
-- are (512 + generation) * 2^42 + milliseconds, and a generation whose
-- tokens are used up refuses to grant.  Tokens below 2^51 are of releases
-- before generations (a sequence): no generation.
CREATE OR REPLACE VIEW fencing_monitor.tokens AS
SELECT m.token AS highest_lease_token,
       CASE WHEN m.token >= 2251799813685248 THEN (m.token >> 42) - 512 END AS generation,
       CASE WHEN m.token >= 2251799813685248
            THEN (((m.token >> 42) + 1) << 42) - 1 - m.token END AS tokens_left_in_generation
FROM (SELECT pg_catalog.max(r.token) AS token FROM fencing.resources r) m;
COMMENT ON VIEW fencing_monitor.tokens IS
'the highest lease token, its generation and the tokens left in it (one per millisecond of clock)';

-- The compaction backlog: deleted-key marks that fencing.compact() may remove.
CREATE OR REPLACE VIEW fencing_monitor.marks AS
SELECT pg_catalog.count(*) AS marks FROM fencing.deleted_keys d;
COMMENT ON VIEW fencing_monitor.marks IS 'the number of deleted-key marks (the compaction backlog)';

GRANT SELECT ON fencing_monitor.stats, fencing_monitor.lease_stats, fencing_monitor.lease_health,
	fencing_monitor.leases, fencing_monitor.tokens, fencing_monitor.marks TO pg_monitor;
