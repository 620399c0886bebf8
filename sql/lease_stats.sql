-- Lease counters (fencing.lease_stats) and lease health
-- (fencing.lease_health) per resource prefix, counted when the calling
-- transaction commits; fencing.leases.state; what pg_monitor may read.
-- Timings come from small TTLs and pg_sleep; only facts that cannot depend
-- on the machine's speed are printed.
SELECT fencing.lease_stats_reset();
SELECT * FROM fencing.lease_stats;

-- The counters of one prefix, as a row of numbers.
CREATE FUNCTION t.lease_counts(p text) RETURNS TABLE(
	grants bigint, refused bigint, waits bigint, renewals bigint, failed_renewals bigint,
	expired bigint, releases bigint, failed_releases bigint)
LANGUAGE sql AS $$
	SELECT s.grants, s.refused_acquires, s.waits, s.renewals, s.failed_renewals,
	       s.expired_while_held, s.releases, s.failed_releases
	FROM fencing.lease_stats s WHERE s.prefix = p
$$;

-- A grant, a refused try, a renewal, a release, a failed renewal and release.
SELECT fencing.acquire('job:1', 'a', '1 min') AS t1 \gset
SELECT fencing.acquire('job:1', 'b', '1 min') IS NULL AS refused;
SELECT fencing.renew('job:1', 'a', :t1, '1 min');
SELECT fencing.release('job:1', 'a', :t1);
SELECT fencing.renew('job:1', 'a', :t1, '1 min');
SELECT fencing.release('job:1', 'a', :t1);
SELECT * FROM t.lease_counts('job:');
-- The resource up to and including its first colon; no colon: the whole name.
SELECT fencing.acquire('job:2:x', 'a', '1 min') IS NOT NULL AS granted;
SELECT fencing.acquire('lonely', 'a', '1 min') IS NOT NULL AS granted;
SELECT prefix, grants FROM fencing.lease_stats ORDER BY prefix;

-- Counted at commit: a rolled-back grant is no grant, a renewal rolled back
-- to a savepoint no renewal, and nothing shows before the commit.
BEGIN;
SELECT fencing.acquire('job:3', 'a', '1 min') IS NOT NULL AS granted;
SELECT grants FROM t.lease_counts('job:');
ROLLBACK;
SELECT grants FROM t.lease_counts('job:');
BEGIN;
SELECT fencing.acquire('job:3', 'a', '1 min') AS t3 \gset
SAVEPOINT s;
SELECT fencing.renew('job:3', 'a', :t3, '1 min');
ROLLBACK TO SAVEPOINT s;
SAVEPOINT s2;
SELECT fencing.release('job:3', 'a', :t3);
RELEASE SAVEPOINT s2;
COMMIT;
SELECT grants, renewals, releases FROM t.lease_counts('job:');

-- renew_all() counts each lease: renewed or not.
SELECT fencing.acquire('job:4', 'a', '1 min') AS t4 \gset
SELECT resource, renewed FROM fencing.renew_all('a', '1 min', ARRAY['job:4', 'job:5'], ARRAY[:t4, 1]);
SELECT renewals, failed_renewals FROM t.lease_counts('job:');

-- Waits: a wait that times out (refused) and one granted at once.
SELECT fencing.acquire('job:4', 'b', '1 min', '20 ms') IS NULL AS timed_out;
SELECT fencing.acquire('job:6', 'b', '1 min', '1 s') IS NOT NULL AS granted;
SELECT waits, refused, grants FROM t.lease_counts('job:');
SELECT wait_time >= '20 ms' AS waited, max_wait_time >= '20 ms' AS longest,
       max_wait_time <= wait_time AS max_within_total
FROM fencing.lease_stats WHERE prefix = 'job:';

-- Expired while held, found by the next grant: the holder paused past its
-- TTL and another took the lease over.
SELECT fencing.acquire('pause:1', 'a', '50 ms') AS p1 \gset
SELECT pg_sleep(0.1);
SELECT resource, state, live FROM fencing.leases WHERE resource = 'pause:1';
SELECT fencing.acquire('pause:1', 'b', '1 min') AS p2 \gset
SELECT * FROM t.lease_counts('pause:');
-- The paused holder comes back: its renewal fails (the expiry is not
-- counted twice, its overrun is measured), and fence() refuses its token:
-- an expiry while held followed by a stale refusal.
SELECT fencing.renew('pause:1', 'a', :p1, '1 min');
SELECT fencing.fence('pause:1', :p2) = 0 AS fenced;
SELECT t.error_of(format('SELECT fencing.fence(%L, %s)', 'pause:1', :p1)) ~ '^23T01' AS stale;
SELECT t.error_of(format('SELECT fencing.fence(%L, %s)', 'pause:1', :p1)) ~ '^23T01' AS stale_again;
SELECT expired, failed_renewals FROM t.lease_counts('pause:');
SELECT expired_while_held, expired_then_stale, max_overrun > '0' AS overran,
       max_expired_gap >= '100 ms' AS gap_past_ttl, suggested_ttl >= 2 * max_expired_gap AS suggested
FROM fencing.lease_health WHERE prefix = 'pause:';

-- Expired while held, found by the holder's own renewal (nobody took over).
SELECT fencing.acquire('pause:2', 'a', '50 ms') AS p3 \gset
SELECT pg_sleep(0.1);
SELECT fencing.release('pause:2', 'a', :p3);
SELECT expired, failed_releases FROM t.lease_counts('pause:');
-- A released lease taken again is no expiry; states of fencing.leases.
SELECT fencing.acquire('pause:3', 'a', '1 min') AS p4 \gset
SELECT fencing.release('pause:3', 'a', :p4);
SELECT resource, state, live FROM fencing.leases WHERE resource LIKE 'pause:%' ORDER BY 1;
SELECT fencing.acquire('pause:3', 'b', '1 min') IS NOT NULL AS granted;
SELECT expired FROM t.lease_counts('pause:');

-- Renewal gaps and hold times: each renewal measures the gap since the
-- grant or the last renewal, each release the hold time.
SELECT fencing.acquire('gap:1', 'a', '1 min') AS g1 \gset
SELECT pg_sleep(0.05);
SELECT fencing.renew('gap:1', 'a', :g1, '1 min');
SELECT pg_sleep(0.05);
SELECT fencing.renew('gap:1', 'a', :g1, '1 min');
SELECT fencing.release('gap:1', 'a', :g1);
SELECT renewal_gaps, renewal_gap_p50 >= '50 ms' AS p50, renewal_gap_p99 >= renewal_gap_p50 AS p99,
       renewal_gap_max >= '50 ms' AND renewal_gap_max <= renewal_gap_p99 AS max_bounds,
       hold_times, hold_time_max >= '100 ms' AS held, late_renewals,
       expired_while_held, suggested_ttl = 3 * renewal_gap_p99 AS suggested
FROM fencing.lease_health WHERE prefix = 'gap:';

-- The stretch from the last renewal (or the grant) to the release is a
-- gap the TTL must cover too: a holder that renews quickly and then works
-- 300 ms before it releases, and one that never renews, get a suggested TTL
-- above what they held without a call.
SELECT fencing.acquire('tail:1', 'a', '1 min') AS tail1 \gset
SELECT fencing.renew('tail:1', 'a', :tail1, '1 min');
SELECT fencing.renew('tail:1', 'a', :tail1, '1 min');
SELECT pg_sleep(0.3);
SELECT fencing.release('tail:1', 'a', :tail1);
SELECT renewal_gaps, renewal_gap_max >= '300 ms' AS tail_measured, suggested_ttl >= '300 ms' AS covers_tail
FROM fencing.lease_health WHERE prefix = 'tail:';
SELECT fencing.acquire('once:1', 'a', '1 min') AS once1 \gset
SELECT pg_sleep(0.1);
SELECT fencing.release('once:1', 'a', :once1);
SELECT renewal_gaps, suggested_ttl >= '100 ms' AS covers_hold
FROM fencing.lease_health WHERE prefix = 'once:';

-- A renewal within 10 % of the expiry: 300 ms leases renewed after 285 ms
-- (tried again on a busy machine whose sleep overslept the lease).
DO $$
DECLARE
	token bigint;
BEGIN
	FOR i IN 1..5 LOOP
		token := fencing.acquire('late:' || i, 'a', '300 ms');
		PERFORM pg_sleep(0.285);
		EXIT WHEN fencing.renew('late:' || i, 'a', token, '1 min');
	END LOOP;
END
$$;
SELECT late_renewals FROM fencing.lease_health WHERE prefix = 'late:';

-- Bounded: 32 prefixes of a database have rows of their own, the others
-- count in their database's row "other", and so does a resource named
-- "other" (the view never has two rows of one prefix).
SELECT fencing.acquire('other', 'a', '1 min') IS NOT NULL AS granted;
SELECT count(*) FROM generate_series(1, 130) i
WHERE fencing.acquire('many' || i || ':x', 'a', '1 min') IS NOT NULL;
SELECT count(*) FILTER (WHERE prefix LIKE 'many%') < 130 AS bounded,
       count(*) FILTER (WHERE prefix = 'other') AS other_rows,
       sum(grants) FILTER (WHERE prefix LIKE 'many%' OR prefix = 'other') AS grants,
       count(*) = count(DISTINCT prefix) AS unique_prefixes
FROM fencing.lease_stats;

-- fencing.stats off: not counted.
SET fencing.stats = off;
SELECT fencing.acquire('job:7', 'a', '1 min') IS NOT NULL AS granted;
RESET fencing.stats;
SELECT grants FROM t.lease_counts('job:');

-- Reading is for the owner and pg_read_all_stats; resetting for the owner.
CREATE ROLE lease_stats_reader;
GRANT USAGE ON SCHEMA fencing TO lease_stats_reader;
SET ROLE lease_stats_reader;
SELECT t.error_of('SELECT * FROM fencing.lease_stats');
SELECT t.error_of('SELECT * FROM fencing.lease_health');
SELECT t.error_of('SELECT fencing.lease_stats_reset()');
RESET ROLE;

-- pg_monitor reads schema fencing_monitor: stats, lease counters and
-- health, leases, tokens and marks; it takes no lease, fences nothing and
-- writes nothing.
CREATE ROLE lease_monitor IN ROLE pg_monitor;
CREATE TABLE t.watched (id int PRIMARY KEY, last_fencing_token bigint);
SELECT fencing.protect('t.watched');
SET ROLE lease_monitor;
SELECT grants > 0 AS reads FROM fencing_monitor.lease_stats WHERE prefix = 'job:';
SELECT expired_while_held FROM fencing_monitor.lease_health WHERE prefix = 'pause:';
SELECT count(*) > 0 AS reads FROM fencing_monitor.stats;
SELECT state FROM fencing_monitor.leases WHERE resource = 'pause:1';
SELECT generation >= 0 AS generation, tokens_left_in_generation > 0 AS room FROM fencing_monitor.tokens;
SELECT marks >= 0 AS reads FROM fencing_monitor.marks;
SELECT t.error_of('SELECT fencing.acquire(''job:9'', ''m'', ''1 min'')');
SELECT t.error_of('SELECT fencing.renew(''pause:1'', ''b'', 1, ''1 min'')');
SELECT t.error_of('SELECT fencing.release(''pause:1'', ''b'', 1)');
SELECT t.error_of('SELECT fencing.fence(''pause:1'', 9007199254740000)');
SELECT t.error_of('SELECT fencing.stats_reset()');
SELECT t.error_of('SELECT fencing.lease_stats_reset()');
SELECT t.error_of('SELECT * FROM fencing._lease_stats()');
SELECT t.error_of('INSERT INTO t.watched VALUES (1, 1)');
SELECT t.error_of('UPDATE fencing.resources SET released = true');
SELECT t.error_of('CREATE VIEW fencing_monitor.mine AS SELECT 1');
SELECT t.error_of('DELETE FROM fencing_monitor.leases');
RESET ROLE;
DROP TABLE t.watched;
DROP ROLE lease_monitor;
REVOKE USAGE ON SCHEMA fencing FROM lease_stats_reader;
DROP ROLE lease_stats_reader;

-- The reset empties this database's rows.
SELECT fencing.lease_stats_reset();
SELECT count(*) FROM fencing.lease_stats;
SELECT count(*) FROM fencing.lease_health;

-- The prefixes of one database cannot take another database's rows: a
-- database has at most 32 rows of prefixes, whatever names its roles use.
SELECT current_database() AS home \gset
CREATE DATABASE lease_stats_flood;
\c lease_stats_flood
CREATE EXTENSION fencing;
SELECT count(*) FROM generate_series(1, 200) i
WHERE fencing.acquire('flood' || i, 'a', '1 min') IS NOT NULL;
SELECT count(*) FILTER (WHERE prefix <> 'other') AS prefix_rows,
       sum(grants) FILTER (WHERE prefix = 'other') AS in_other, sum(grants) AS grants
FROM fencing.lease_stats;
\c :home
SELECT fencing.acquire('mine:1', 'a', '1 min') IS NOT NULL AS granted;
SELECT prefix, grants FROM fencing.lease_stats;
DROP DATABASE lease_stats_flood;
SELECT fencing.lease_stats_reset();
