-- The lease memory: a renewal within the durable horizon writes no row and
-- assigns no transaction id; the expiry it sets lives in shared memory and
-- every reader takes the later of the row's and the memory's.  Without
-- shared_preload_libraries (the unloaded server) every renewal writes its
-- row as before: where the two differ, a line compares with what each
-- server must do (kept = memory only, preloaded; written = the row).
SELECT CASE WHEN current_setting('shared_preload_libraries') ~ 'fencing' THEN 'kept'
       ELSE 'written' END AS kept \gset

-- Within the horizon (grant + 2 s + fencing.lease_grace 10 s): no
-- transaction id, the row's expires_at unchanged, fencing.leases shows the
-- new expiry.
SELECT fencing.acquire('mem:1', 'alice', '2 s') AS t1 \gset
SELECT expires_at AS row_expiry FROM fencing.resources WHERE resource = 'mem:1' \gset
BEGIN;
SELECT fencing.renew('mem:1', 'alice', :t1, '8 s') AS renewed;
SELECT CASE WHEN pg_current_xact_id_if_assigned() IS NULL THEN 'kept' ELSE 'written' END
       = :'kept' AS xid_as_expected;
COMMIT;
SELECT CASE WHEN r.expires_at = :'row_expiry' THEN 'kept' ELSE 'written' END = :'kept'
       AS row_as_expected,
       l.expires_at - l.granted_at BETWEEN '8 s' AND '9 s' AS view_shows_new_expiry,
       l.live, l.state
FROM fencing.leases l JOIN fencing.resources r USING (resource) WHERE resource = 'mem:1';
-- renew_all() the same.
BEGIN;
SELECT renewed, expires_at - clock_timestamp() BETWEEN '8 s' AND '9 s' AS new_expiry
FROM fencing.renew_all('alice', '9 s', ARRAY['mem:1'], ARRAY[:t1]);
SELECT CASE WHEN pg_current_xact_id_if_assigned() IS NULL THEN 'kept' ELSE 'written' END
       = :'kept' AS xid_as_expected;
COMMIT;

-- Another holder is refused until the memory's expiry passes, also after
-- the row's has.
SELECT fencing.acquire('mem:2', 'alice', '1 s') AS t2 \gset
SELECT fencing.renew('mem:2', 'alice', :t2, '3 s') AS renewed;
SELECT pg_sleep(1.5);
SELECT CASE WHEN r.expires_at < clock_timestamp() THEN 'kept' ELSE 'written' END = :'kept'
       AS row_as_expected, l.live
FROM fencing.leases l JOIN fencing.resources r USING (resource) WHERE resource = 'mem:2';
SELECT fencing.acquire('mem:2', 'bob', '10 s') IS NULL AS bob_refused;
-- compact_resources() leaves the live lease alone.
SELECT fencing.compact_resources(:t2 + 1, 'mem:2') AS removed;
SELECT count(*) AS rows_kept FROM fencing.resources WHERE resource = 'mem:2';
SELECT pg_sleep(2);
SELECT l.live, l.state FROM fencing.leases l WHERE resource = 'mem:2';
SELECT fencing.acquire('mem:2', 'bob', '10 s') > :t2 AS bob_granted;
SELECT fencing.renew('mem:2', 'alice', :t2, '3 s') AS alice_lost;

-- A release ends the lease at once, whatever the memory keeps.
SELECT fencing.acquire('mem:3', 'alice', '2 s') AS t3 \gset
SELECT fencing.renew('mem:3', 'alice', :t3, '8 s') AS renewed;
SELECT fencing.release('mem:3', 'alice', :t3) AS released;
SELECT l.live, l.state FROM fencing.leases l WHERE resource = 'mem:3';
SELECT fencing.renew('mem:3', 'alice', :t3, '8 s') AS renewed_after_release;
SELECT fencing.acquire('mem:3', 'bob', '2 s') > :t3 AS bob_granted;

-- A renewal beyond the horizon writes the row (and moves the horizon); so
-- does one shorter than the row's expiry, and one of a resource and holder
-- too long for an entry (200 bytes).
SELECT fencing.acquire('mem:4', 'alice', '2 s') AS t4 \gset
BEGIN;
SELECT fencing.renew('mem:4', 'alice', :t4, '1 min') AS renewed_beyond;
SELECT pg_current_xact_id_if_assigned() IS NOT NULL AS xid_assigned;
COMMIT;
SELECT expires_at - granted_at > '50 s' AS row_written, grace_until >= expires_at AS horizon_moved
FROM fencing.resources WHERE resource = 'mem:4';
BEGIN;
SELECT fencing.renew('mem:4', 'alice', :t4, '1 s') AS renewed_shorter;
SELECT pg_current_xact_id_if_assigned() IS NOT NULL AS xid_assigned;
COMMIT;
-- A transaction that has written renews by writing the row: its own row
-- (here a renewal past the horizon) is not durable, and a rollback and a
-- crash would leave the memory's expiry beyond the durable horizon.
SELECT fencing.acquire('mem:7', 'alice', '2 s') AS t7 \gset
SELECT expires_at AS row_expiry7 FROM fencing.resources WHERE resource = 'mem:7' \gset
BEGIN;
SELECT fencing.renew('mem:7', 'alice', :t7, '20 s') AS renewed_beyond;
SELECT fencing.renew('mem:7', 'alice', :t7, '25 s') AS renewed_again;
SELECT expires_at - clock_timestamp() > '24 s' AS row_written
FROM fencing.resources WHERE resource = 'mem:7';
ROLLBACK;
SELECT l.expires_at = :'row_expiry7' AS rollback_takes_back
FROM fencing.leases l WHERE resource = 'mem:7';
-- Also a grant in the same transaction, rolled back.
BEGIN;
SELECT fencing.acquire('mem:8', 'alice', '1 s') AS t8 \gset
SELECT fencing.renew('mem:8', 'alice', :t8, '9 s') AS renewed;
ROLLBACK;
SELECT count(*) AS no_lease FROM fencing.leases WHERE resource = 'mem:8' AND live;
SELECT fencing.acquire(repeat('m', 150), 'alice', '2 s') AS t5 \gset
BEGIN;
SELECT fencing.renew(repeat('m', 150), 'alice', :t5, '3 s') AS renewed_long;
SELECT CASE WHEN pg_current_xact_id_if_assigned() IS NULL THEN 'kept' ELSE 'written' END
       = :'kept' AS xid_as_expected;
COMMIT;
BEGIN;
SELECT fencing.renew(repeat('m', 150), 'alice' || repeat('x', 60), :t5, '3 s') AS wrong_holder;
SELECT fencing.renew(repeat('m', 150), 'alice', :t5, '4 s') AS renewed_long;
COMMIT;
SELECT fencing.acquire(repeat('n', 250), 'alice', '2 s') AS t6 \gset
BEGIN;
SELECT fencing.renew(repeat('n', 250), 'alice', :t6, '3 s') AS renewed_too_long;
SELECT pg_current_xact_id_if_assigned() IS NOT NULL AS xid_assigned;
COMMIT;

-- A shorter renewal does not shorten the lease, in memory or by the row.
SELECT fencing.acquire('mem:9', 'alice', '1 s') AS t9 \gset
SELECT fencing.renew('mem:9', 'alice', :t9, '9 s') AS renewed;
SELECT fencing.renew('mem:9', 'alice', :t9, '3 s') AS renewed_shorter;
SELECT CASE WHEN expires_at - clock_timestamp() > '8 s' THEN 'kept' ELSE 'written' END = :'kept'
       AS not_shortened FROM fencing.leases WHERE resource = 'mem:9';
SELECT CASE WHEN expires_at - clock_timestamp() > '8 s' THEN 'kept' ELSE 'written' END = :'kept'
       AS renew_all_reports_it
FROM fencing.renew_all('alice', '2 s', ARRAY['mem:9'], ARRAY[:t9]);

-- A wrong token or holder renews nothing, in memory or not.
SELECT fencing.renew('mem:1', 'alice', :t1 + 1, '5 s') AS wrong_token,
       fencing.renew('mem:1', 'mallory', :t1, '5 s') AS wrong_holder;

-- The helper reads only its arguments and the memory: NULLs give the row's expiry.
SELECT fencing_internal._lease_expiry(NULL, 'alice', 1, 1, '2000-01-01') AS row_expiry,
       fencing_internal._lease_expiry('mem:1', 'alice', 1, 1, NULL) IS NULL AS no_expiry;

DELETE FROM fencing.resources WHERE resource LIKE 'mem:%' OR resource LIKE 'mmm%' OR resource LIKE 'nnn%';
DELETE FROM fencing.resource_floors WHERE prefix = 'mem:2';
