-- fencing.lease_stats and fencing.lease_health across databases: the 256
-- prefix rows are the server's, shared out fairly.  A database has at most
-- 32 prefixes besides "other"; once no row is free, a database that needs
-- one takes it from the database with the most rows (if that one has at
-- least two more), whose prefix used longest ago folds into its "other"
-- row: nothing counted is lost, and roles that fill the rows in some
-- databases cannot leave another with only "other".  The rows of a dropped
-- database are freed.  A role sees and resets its own database's rows only.

SELECT current_database() AS home \gset
SELECT fencing.lease_stats_reset();
CREATE ROLE regress_lsd_reader IN ROLE pg_monitor;

-- Nine databases, each calling acquire() on 40 prefixes of its own
-- (d<N>_p<i>:...), one after the other: the first seven take 32 rows of
-- prefixes and their "other" each (231 rows), the eighth the 25 left and
-- then rows of the others, the ninth too.
SELECT format('CREATE DATABASE regress_lsd%s', n) FROM generate_series(1, 9) n \gexec

\c regress_lsd1
CREATE EXTENSION fencing;
SELECT count(fencing.acquire(format('d1_p%s:1', i), 'h', '1 min')) AS granted
FROM generate_series(1, 40) i;
\c regress_lsd2
CREATE EXTENSION fencing;
SELECT count(fencing.acquire(format('d2_p%s:1', i), 'h', '1 min')) AS granted
FROM generate_series(1, 40) i;
\c regress_lsd3
CREATE EXTENSION fencing;
SELECT count(fencing.acquire(format('d3_p%s:1', i), 'h', '1 min')) AS granted
FROM generate_series(1, 40) i;
\c regress_lsd4
CREATE EXTENSION fencing;
SELECT count(fencing.acquire(format('d4_p%s:1', i), 'h', '1 min')) AS granted
FROM generate_series(1, 40) i;
\c regress_lsd5
CREATE EXTENSION fencing;
SELECT count(fencing.acquire(format('d5_p%s:1', i), 'h', '1 min')) AS granted
FROM generate_series(1, 40) i;
\c regress_lsd6
CREATE EXTENSION fencing;
SELECT count(fencing.acquire(format('d6_p%s:1', i), 'h', '1 min')) AS granted
FROM generate_series(1, 40) i;
\c regress_lsd7
CREATE EXTENSION fencing;
SELECT count(fencing.acquire(format('d7_p%s:1', i), 'h', '1 min')) AS granted
FROM generate_series(1, 40) i;
\c regress_lsd8
CREATE EXTENSION fencing;
SELECT count(fencing.acquire(format('d8_p%s:1', i), 'h', '1 min')) AS granted
FROM generate_series(1, 40) i;
\c regress_lsd9
CREATE EXTENSION fencing;
SELECT count(fencing.acquire(format('d9_p%s:1', i), 'h', '1 min')) AS granted
FROM generate_series(1, 40) i;

-- Each database's share, and every grant still counted (40 in each: the
-- folded prefixes are in "other").
\c regress_lsd1
SELECT current_database(), count(*) FILTER (WHERE prefix <> 'other') AS prefixes,
       count(*) FILTER (WHERE prefix = 'other') AS other, sum(grants) AS grants
FROM fencing.lease_stats;
\c regress_lsd2
SELECT current_database(), count(*) FILTER (WHERE prefix <> 'other') AS prefixes,
       count(*) FILTER (WHERE prefix = 'other') AS other, sum(grants) AS grants
FROM fencing.lease_stats;
\c regress_lsd7
SELECT current_database(), count(*) FILTER (WHERE prefix <> 'other') AS prefixes,
       count(*) FILTER (WHERE prefix = 'other') AS other, sum(grants) AS grants
FROM fencing.lease_stats;
\c regress_lsd8
SELECT current_database(), count(*) FILTER (WHERE prefix <> 'other') AS prefixes,
       count(*) FILTER (WHERE prefix = 'other') AS other, sum(grants) AS grants
FROM fencing.lease_stats;
\c regress_lsd9
SELECT current_database(), count(*) FILTER (WHERE prefix <> 'other') AS prefixes,
       count(*) FILTER (WHERE prefix = 'other') AS other, sum(grants) AS grants
FROM fencing.lease_stats;

-- The ninth database has its share: a new prefix goes to its "other".  A
-- dropped database's rows are freed (by the next reader, or a call that
-- finds the rows full): then the ninth takes its 32 prefixes.
\c regress_lsd9
SELECT fencing.acquire('d9_new:1', 'h', '1 min') IS NOT NULL AS granted;
SELECT count(*) FILTER (WHERE prefix <> 'other') AS prefixes, sum(grants) AS grants
FROM fencing.lease_stats;
\c :home
DROP DATABASE regress_lsd1;
\c regress_lsd9
SELECT count(fencing.acquire(format('d9_q%s:1', i), 'h', '1 min')) AS granted
FROM generate_series(1, 10) i;
SELECT count(*) FILTER (WHERE prefix <> 'other') AS prefixes,
       count(*) FILTER (WHERE prefix = 'other') AS other, sum(grants) AS grants
FROM fencing.lease_stats;

-- A role sees its own database's rows only, also with pg_monitor,
-- and cannot reset them (the owner's); the owner's reset is its database's.
\c regress_lsd2
GRANT USAGE ON SCHEMA fencing TO regress_lsd_reader;
SET ROLE regress_lsd_reader;
SELECT count(*) AS rows_of_other_databases FROM fencing.lease_stats
WHERE prefix <> 'other' AND prefix NOT LIKE 'd2\_%';
SELECT count(*) AS health_rows_of_other_databases FROM fencing.lease_health
WHERE prefix <> 'other' AND prefix NOT LIKE 'd2\_%';
SELECT count(*) AS monitor_rows_of_other_databases FROM fencing_monitor.lease_stats
WHERE prefix <> 'other' AND prefix NOT LIKE 'd2\_%';
SELECT fencing.lease_stats_reset();
RESET ROLE;
SELECT fencing.lease_stats_reset();
SELECT count(*) AS rows_after_reset FROM fencing.lease_stats;
\c regress_lsd3
SELECT count(*) AS rows_kept FROM fencing.lease_stats;

\c :home
SELECT format('DROP DATABASE regress_lsd%s', n) FROM generate_series(2, 9) n \gexec
DROP ROLE regress_lsd_reader;
