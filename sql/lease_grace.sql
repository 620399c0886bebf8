-- The durable horizon of leases: grace_until, written by durable writes
-- only (a grant, a renewal that moves it), and the hold after a restart or
-- promotion.  That the renewals within it and the releases commit without a
-- flush, and that the hold covers what a crash loses: test/t/007_lease_grace.pl.

-- A grant sets grace_until to its expiry + fencing.lease_grace (10 s).
SHOW fencing.lease_grace;
SHOW fencing.lease_durability;
SELECT fencing.acquire('grace:1', 'alice', '10 s') AS t1 \gset
SELECT grace_until - expires_at AS grace, epoch = fencing_internal._lease_epoch() AS this_epoch
FROM fencing.resources WHERE resource = 'grace:1';

-- A renewal whose new expiry stays within it keeps it (no flush needed) ...
SELECT grace_until AS horizon FROM fencing.resources WHERE resource = 'grace:1' \gset
SELECT fencing.renew('grace:1', 'alice', :t1, '5 s') AS renewed_within;
SELECT grace_until = :'horizon' AS horizon_kept, expires_at < grace_until AS expiry_within
FROM fencing.resources WHERE resource = 'grace:1';
-- ... one beyond it moves it to the new expiry + the grace (flushed).
SELECT fencing.renew('grace:1', 'alice', :t1, '30 s') AS renewed_beyond;
SELECT grace_until - expires_at AS grace FROM fencing.resources WHERE resource = 'grace:1';
-- renew_all() does the same, row by row.
SELECT grace_until AS horizon FROM fencing.resources WHERE resource = 'grace:1' \gset
SELECT renewed FROM fencing.renew_all('alice', '1 s', ARRAY['grace:1'], ARRAY[:t1]);
SELECT grace_until = :'horizon' AS horizon_kept FROM fencing.resources WHERE resource = 'grace:1';
SELECT renewed FROM fencing.renew_all('alice', '1 min', ARRAY['grace:1'], ARRAY[:t1]);
SELECT grace_until - expires_at AS grace FROM fencing.resources WHERE resource = 'grace:1';
-- The view shows the stored expiry while the row is of this epoch.
SELECT l.expires_at = r.expires_at AS stored_expiry, l.live
FROM fencing.leases l JOIN fencing.resources r USING (resource) WHERE resource = 'grace:1';

-- fencing.lease_durability = 'always': every renewal flushes, and the horizon
-- is the expiry itself (no grace is needed after a restart).
SET fencing.lease_durability = 'always';
SELECT fencing.renew('grace:1', 'alice', :t1, '5 s') AS renewed_always;
SELECT grace_until = expires_at AS horizon_is_expiry FROM fencing.resources WHERE resource = 'grace:1';
RESET fencing.lease_durability;
-- A changed grace is copied into the rows written after.
SET fencing.lease_grace = '2min';
SELECT fencing.renew('grace:1', 'alice', :t1, '10 s') AS renewed;
SELECT grace_until - expires_at AS grace FROM fencing.resources WHERE resource = 'grace:1';
RESET fencing.lease_grace;

-- After a restart or promotion (a row written in another epoch, simulated
-- here): a lease not released is held until its grace_until, even though
-- its stored expiry passed.
UPDATE fencing.resources
SET epoch = 1, expires_at = clock_timestamp() - interval '1 s',
    grace_until = clock_timestamp() + interval '1 h'
WHERE resource = 'grace:1';
SELECT l.live, l.expires_at = r.grace_until AS shows_horizon
FROM fencing.leases l JOIN fencing.resources r USING (resource) WHERE resource = 'grace:1';
SELECT fencing.acquire('grace:1', 'bob', '10 s') IS NULL AS held_until_horizon;
-- Its holder may renew it.  A renewal within the horizon keeps the row's
-- epoch, so the lease stays held until its horizon (after a promotion, the
-- old primary may still renew it up to there); one beyond the horizon is
-- flushed and makes the row of this epoch.
SELECT fencing.renew('grace:1', 'alice', :t1, '10 s') AS holder_renews;
SELECT epoch = 1 AS epoch_kept, l.expires_at = r.grace_until AS held_until_horizon
FROM fencing.leases l JOIN fencing.resources r USING (resource) WHERE resource = 'grace:1';
SELECT fencing.renew('grace:1', 'alice', :t1, '2 h') AS holder_renews_beyond;
SELECT epoch = fencing_internal._lease_epoch() AS this_epoch, l.expires_at = r.expires_at AS stored_expiry
FROM fencing.leases l JOIN fencing.resources r USING (resource) WHERE resource = 'grace:1';
-- ... and release it: then it is free.
SELECT fencing.release('grace:1', 'alice', :t1) AS released;
SELECT fencing.acquire('grace:1', 'bob', '10 s') > :t1 AS granted_after_release;

-- Once the horizon passed, the lease is free.
SELECT fencing.acquire('grace:2', 'alice', '10 s') AS t2 \gset
UPDATE fencing.resources
SET epoch = 1, expires_at = clock_timestamp() - interval '2 s',
    grace_until = clock_timestamp() - interval '1 s'
WHERE resource = 'grace:2';
SELECT live FROM fencing.leases WHERE resource = 'grace:2';
SELECT fencing.renew('grace:2', 'alice', :t2, '10 s') AS renew_after_horizon;
SELECT fencing.acquire('grace:2', 'bob', '10 s') > :t2 AS granted_after_horizon;

-- A released lease of another epoch is not held.
SELECT fencing.acquire('grace:3', 'alice', '10 s') AS t3 \gset
SELECT fencing.release('grace:3', 'alice', :t3) AS released;
UPDATE fencing.resources
SET epoch = 1, grace_until = clock_timestamp() + interval '1 h' WHERE resource = 'grace:3';
SELECT live FROM fencing.leases WHERE resource = 'grace:3';
SELECT fencing.acquire('grace:3', 'bob', '10 s') > :t3 AS granted_released;

-- A waiter is woken at the horizon.
SELECT fencing.acquire('grace:4', 'alice', '10 s') AS t4 \gset
UPDATE fencing.resources
SET epoch = 1, expires_at = clock_timestamp() - interval '1 s',
    grace_until = clock_timestamp() + interval '300 ms'
WHERE resource = 'grace:4';
SELECT clock_timestamp() AS started \gset
SELECT fencing.acquire('grace:4', 'bob', '10 s', '5 s') > :t4 AS granted_at_horizon;
SELECT clock_timestamp() - :'started' BETWEEN '250 ms' AND '3 s' AS woken_at_horizon;

-- compact_resources() leaves a lease held until its horizon alone.
SELECT fencing.acquire('gracecompact:1', 'alice', '10 s') AS t5 \gset
UPDATE fencing.resources
SET epoch = 1, expires_at = clock_timestamp() - interval '1 s',
    grace_until = clock_timestamp() + interval '1 h'
WHERE resource = 'gracecompact:1';
SELECT fencing.compact_resources(:t5 + 1, 'gracecompact:') AS compacted;
SELECT count(*) AS kept FROM fencing.resources WHERE resource = 'gracecompact:1';
SELECT fencing.acquire('gracecompact:1', 'bob', '10 s') IS NULL AS still_held;
DELETE FROM fencing.resource_floors WHERE prefix = 'gracecompact:';
DELETE FROM fencing.resources WHERE resource = 'gracecompact:1';

-- The settings are the superuser's: 42501 for others, 22023 for bad values.
SELECT t.error_of($$SET fencing.lease_durability = 'never'$$);
-- (the range's wording differs between PostgreSQL versions: the SQLSTATE only)
SELECT left(t.error_of($$SET fencing.lease_grace = -1$$), 5) AS out_of_range;
CREATE ROLE regress_fencing_grace;
SET ROLE regress_fencing_grace;
SELECT t.error_of($$SET fencing.lease_grace = '1min'$$);
SELECT t.error_of($$SET fencing.lease_durability = 'grace'$$);
RESET ROLE;
DROP ROLE regress_fencing_grace;
