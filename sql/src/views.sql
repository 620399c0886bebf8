-- The views, after the tables and functions they read.  Definitions (CREATE
-- OR REPLACE VIEW: an upgrade may only add columns at the end).

-- The protected tables and their settings, from the registry.
CREATE OR REPLACE VIEW fencing.protected_tables AS
SELECT r.relid AS relation, r.token_column, r.mode,
       COALESCE(o.enforce, true) AS enforce, o.max_token, o.maintainer
FROM fencing.registry r LEFT JOIN fencing.table_options o ON o.relid = r.relid
WHERE r.protected;
GRANT SELECT ON fencing.protected_tables TO PUBLIC;
COMMENT ON VIEW fencing.protected_tables IS
'tables guarded by fencing.protect(): token column, mode, enforcing or report-only, highest token accepted, maintainer';

-- Leases as users see them; live is judged by the server's clock now.  The
-- expiry is the effective one: the row's or the later one a renewal kept in
-- memory; a lease last written before the server's last restart or
-- promotion is held until its grace_until if that is later.
CREATE OR REPLACE VIEW fencing.leases AS
SELECT r.resource, r.holder, r.token, r.granted_at,
       GREATEST(fencing_internal._lease_expiry(r.resource, r.holder, r.token, r.epoch, r.expires_at),
                CASE WHEN NOT r.released
                      AND r.epoch OPERATOR(pg_catalog.<>) fencing_internal._lease_epoch()
                     THEN r.grace_until END) AS expires_at,
       (NOT r.released
        AND GREATEST(fencing_internal._lease_expiry(r.resource, r.holder, r.token, r.epoch, r.expires_at),
                     CASE WHEN r.epoch OPERATOR(pg_catalog.<>) fencing_internal._lease_epoch()
                          THEN r.grace_until END)
            OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()) AS live,
       CASE WHEN r.released THEN 'released'
            WHEN GREATEST(fencing_internal._lease_expiry(r.resource, r.holder, r.token, r.epoch, r.expires_at),
                          CASE WHEN r.epoch OPERATOR(pg_catalog.<>) fencing_internal._lease_epoch()
                               THEN r.grace_until END)
                 OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp() THEN 'held'
            ELSE 'expired' END AS state
FROM fencing.resources r
WHERE r.token IS NOT NULL;
GRANT SELECT ON fencing.leases TO PUBLIC;
COMMENT ON VIEW fencing.leases IS
'leases granted by fencing.acquire(); live and state (held, released, expired) by the server''s clock now';

CREATE OR REPLACE VIEW fencing.stats AS
SELECT s.relid::regclass AS relation, s.resource, s.writes_accepted, s.stale_rejections,
       s.missing_token_rejections, s.last_rejection_at, s.last_rejection_kind,
       s.last_rejection_key, s.last_rejection_presented, s.last_rejection_stored, s.stats_reset,
       COALESCE(r.stale, 0) AS stale_reported, COALESCE(r.missing, 0) AS missing_reported,
       COALESCE(r.maintenance, 0) AS maintenance_writes
FROM fencing_internal._stats() s
LEFT JOIN (SELECT g.relid, pg_catalog.sum(g.count) FILTER (WHERE g.reason = 'stale')::bigint AS stale,
                  pg_catalog.sum(g.count) FILTER (WHERE g.reason = 'missing')::bigint AS missing,
                  pg_catalog.sum(g.count) FILTER (WHERE g.reason = 'maintenance')::bigint AS maintenance
           FROM fencing_internal._rollout_report() g GROUP BY g.relid) r ON r.relid = s.relid
WHERE s.relid IS NULL OR EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid = s.relid);
COMMENT ON VIEW fencing.stats IS
'accepted and rejected writes per protected relation and fenced resource, since stats_reset';
REVOKE ALL ON fencing.stats FROM PUBLIC;
GRANT SELECT ON fencing.stats TO pg_read_all_stats;

CREATE OR REPLACE VIEW fencing.lease_stats AS
SELECT s.prefix, s.grants, s.refused_acquires, s.waits, s.wait_time, s.max_wait_time,
       s.renewals, s.failed_renewals, s.expired_while_held, s.releases, s.failed_releases,
       s.stats_reset
FROM fencing_internal._lease_stats() s;
COMMENT ON VIEW fencing.lease_stats IS
'lease calls per resource prefix (up to its first colon), counted at commit, since lease_stats_reset';
REVOKE ALL ON fencing.lease_stats FROM PUBLIC;
GRANT SELECT ON fencing.lease_stats TO pg_read_all_stats;

CREATE OR REPLACE VIEW fencing.lease_health AS
SELECT h.prefix, h.renewal_gaps, h.renewal_gap_p50, h.renewal_gap_p99, h.renewal_gap_max,
       h.hold_times, h.hold_time_p50, h.hold_time_p99, h.hold_time_max, h.late_renewals,
       h.expired_while_held, h.expired_then_stale, h.max_overrun, h.max_expired_gap,
       h.suggested_ttl
FROM fencing_internal._lease_health() h;
COMMENT ON VIEW fencing.lease_health IS
'renewal gaps and hold times per resource prefix, leases that expired while held, a suggested TTL';
REVOKE ALL ON fencing.lease_health FROM PUBLIC;
GRANT SELECT ON fencing.lease_health TO pg_read_all_stats;
