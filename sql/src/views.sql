-- The views, after the tables and functions they read.  Definitions (CREATE
-- OR REPLACE VIEW: an upgrade may only add columns at the end).

-- The protected tables and their settings, from the registry.
CREATE OR REPLACE VIEW fencing.protected_tables AS
SELECT r.relid AS relation, r.token_column, r.mode
FROM fencing.registry r
WHERE r.protected;
GRANT SELECT ON fencing.protected_tables TO PUBLIC;
COMMENT ON VIEW fencing.protected_tables IS
'tables guarded by fencing.protect(): token column and mode';

-- Leases as users see them; live is judged by the server's clock now.  The
-- expiry is the effective one: a lease last written before the server's last
-- restart or promotion is held until its grace_until if that is later.
CREATE OR REPLACE VIEW fencing.leases AS
SELECT r.resource, r.holder, r.token, r.granted_at,
       GREATEST(r.expires_at, CASE WHEN NOT r.released
                                    AND r.epoch OPERATOR(pg_catalog.<>) fencing._lease_epoch()
                                   THEN r.grace_until END) AS expires_at,
       (NOT r.released
        AND GREATEST(r.expires_at, CASE WHEN r.epoch OPERATOR(pg_catalog.<>) fencing._lease_epoch()
                                        THEN r.grace_until END)
            OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()) AS live
FROM fencing.resources r
WHERE r.token IS NOT NULL;
GRANT SELECT ON fencing.leases TO PUBLIC;
COMMENT ON VIEW fencing.leases IS 'leases granted by fencing.acquire(); live by the server''s clock now';

CREATE OR REPLACE VIEW fencing.stats AS
SELECT s.relid::regclass AS relation, s.resource, s.writes_accepted, s.stale_rejections,
       s.missing_token_rejections, s.last_rejection_at, s.last_rejection_kind,
       s.last_rejection_key, s.last_rejection_presented, s.last_rejection_stored, s.stats_reset
FROM fencing._stats() s
WHERE s.relid IS NULL OR EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid = s.relid);
COMMENT ON VIEW fencing.stats IS
'accepted and rejected writes per protected relation and fenced resource, since stats_reset';
REVOKE ALL ON fencing.stats FROM PUBLIC;
GRANT SELECT ON fencing.stats TO pg_read_all_stats;
