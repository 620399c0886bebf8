-- fencing.renew_all() with many leases: the arguments are checked in time
-- and memory linear in their number (no pairwise comparison of names), and a
-- cancel or statement_timeout ends the call while it checks them.  Any role
-- with USAGE on fencing can call it: a quadratic check (12,000 names took
-- 2.6 s and 1.6 GB in one backend, ignoring statement_timeout) lets it
-- exhaust the server's memory.
SET statement_timeout = '400ms';
-- 8,000 distinct names: answered well within the timeout.
SELECT count(*) AS rows, count(*) FILTER (WHERE renewed) AS renewed
  FROM fencing.renew_all('scale', '10 s',
       (SELECT array_agg('scale:' || g) FROM generate_series(1, 8000) g),
       (SELECT array_agg(g::bigint) FROM generate_series(1, 8000) g));
-- A duplicate at the end of a long list is still found.
SELECT t.error_of($$SELECT fencing.renew_all('scale', '10 s',
       (SELECT array_agg('scale:' || g) || '{scale:1}'::text[] FROM generate_series(1, 8000) g),
       (SELECT array_agg(g::bigint) || '{1}'::bigint[] FROM generate_series(1, 8000) g))$$);
RESET statement_timeout;
