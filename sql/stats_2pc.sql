-- fencing.stats and two-phase commit: a prepared transaction's writes count
-- when it is COMMIT PREPARED, by whatever session, and never when it is
-- ROLLBACK PREPARED.  Needs max_prepared_transactions > 0 and
-- shared_preload_libraries = 'fencing' (else expected/stats_2pc_1.out: skipped).
SELECT current_setting('max_prepared_transactions')::int = 0
       OR current_setting('shared_preload_libraries') !~ '\mfencing\M' AS skip_test \gset
\if :skip_test
\quit
\endif

CREATE TABLE prepared_writes (id int PRIMARY KEY);
SELECT fencing.protect('prepared_writes');
INSERT INTO prepared_writes VALUES (100, 5);
SELECT fencing.stats_reset();
CREATE VIEW prepared_counts AS
SELECT coalesce(relation::text, resource) AS counter, writes_accepted, stale_rejections
FROM fencing.stats
WHERE relation = 'prepared_writes'::regclass OR resource LIKE 'prepared:%'
ORDER BY 1;

-- ROLLBACK PREPARED: the writes are never counted, neither by the next
-- transaction of the session that prepared them nor by another session.
BEGIN;
INSERT INTO prepared_writes VALUES (1, 1), (2, 1);
SAVEPOINT s;
INSERT INTO prepared_writes VALUES (3, 1);
RELEASE SAVEPOINT s;
SELECT fencing.fence('prepared:rolled back', 1);
-- A rejection is counted at once.
SAVEPOINT r;
UPDATE prepared_writes SET last_fencing_token = 1 WHERE id = 100;
ROLLBACK TO SAVEPOINT r;
PREPARE TRANSACTION 'fencing_stats_rolled_back';
INSERT INTO prepared_writes VALUES (10, 1);
SELECT * FROM prepared_counts;
\c -
ROLLBACK PREPARED 'fencing_stats_rolled_back';
SELECT * FROM prepared_counts;

-- COMMIT PREPARED, in another session: the writes count then (not those
-- rolled back to a savepoint before PREPARE).
BEGIN;
INSERT INTO prepared_writes VALUES (1, 1), (2, 1);
SAVEPOINT s;
INSERT INTO prepared_writes VALUES (3, 1);
RELEASE SAVEPOINT s;
SAVEPOINT t;
INSERT INTO prepared_writes VALUES (4, 1);
ROLLBACK TO SAVEPOINT t;
SELECT fencing.fence('prepared:committed', 1);
PREPARE TRANSACTION 'fencing_stats_committed';
SELECT * FROM prepared_counts;
\c -
-- A COMMIT PREPARED that fails counts nothing, and keeps the counts.
CREATE ROLE regress_fencing_stranger;
SET ROLE regress_fencing_stranger;
COMMIT PREPARED 'fencing_stats_committed';
RESET ROLE;
DROP ROLE regress_fencing_stranger;
SELECT * FROM prepared_counts;
COMMIT PREPARED 'fencing_stats_committed';
SELECT array_agg(id ORDER BY id) AS committed FROM prepared_writes;
SELECT * FROM prepared_counts;
-- Once only.
COMMIT PREPARED 'fencing_stats_committed';
SELECT * FROM prepared_counts;

-- A prepared transaction's counts are kept for up to 32 relations and
-- resources: the writes to more of them are not counted, with a WARNING.
BEGIN;
SELECT count(fencing.fence('prepared:many ' || i, 1)) FROM generate_series(1, 34) i;
-- (Terse: the DETAIL names max_prepared_transactions, which is the server's.)
\set VERBOSITY terse
PREPARE TRANSACTION 'fencing_stats_many';
\set VERBOSITY default
COMMIT PREPARED 'fencing_stats_many';
SELECT count(*) AS counters, sum(writes_accepted) AS accepted
FROM fencing.stats WHERE resource LIKE 'prepared:many %';

-- Report-only and maintenance writes (stale_reported, missing_reported,
-- maintenance_writes, fencing.rollout_report) are counted like accepted
-- ones: once at COMMIT PREPARED in whatever session, never at ROLLBACK
-- PREPARED, nor those rolled back to a savepoint before PREPARE.
CREATE TABLE prepared_reports (id int PRIMARY KEY, v text);
SELECT fencing.protect('prepared_reports', enforce => false);
BEGIN;
SET LOCAL fencing.token = 100;
INSERT INTO prepared_reports VALUES (1, 'a'), (2, 'b'), (3, 'c');
COMMIT;
SELECT fencing.stats_reset();
SELECT fencing.rollout_report_reset();
CREATE VIEW report_counts AS
SELECT s.writes_accepted, s.stale_reported, s.missing_reported, s.maintenance_writes,
       (SELECT coalesce(sum(r.count), 0) FROM fencing.rollout_report r
        WHERE r.relation = 'prepared_reports'::regclass) AS in_report
FROM fencing.stats s WHERE s.relation = 'prepared_reports'::regclass;
BEGIN;
SET LOCAL fencing.token = 5;
UPDATE prepared_reports SET v = 'stale' WHERE id = 1;
PREPARE TRANSACTION 'fencing_reports_rolled_back';
SELECT * FROM report_counts;
\c -
ROLLBACK PREPARED 'fencing_reports_rolled_back';
SELECT * FROM report_counts;
BEGIN;
SET LOCAL fencing.token = 5;
UPDATE prepared_reports SET v = 'stale' WHERE id IN (1, 2);
SAVEPOINT s;
UPDATE prepared_reports SET v = 'stale, rolled back' WHERE id = 3;
ROLLBACK TO SAVEPOINT s;
RESET fencing.token;
SET LOCAL fencing.maintenance = on;
UPDATE prepared_reports SET v = 'maintained' WHERE id = 3;
SET LOCAL fencing.maintenance = off;
SET LOCAL application_name = 'second writer';
DELETE FROM prepared_reports WHERE id = 3;
PREPARE TRANSACTION 'fencing_reports_committed';
SELECT * FROM report_counts;
\c -
COMMIT PREPARED 'fencing_reports_committed';
SELECT * FROM report_counts;
SELECT role IS NOT NULL AS has_role, application_name, reason, count
FROM fencing.rollout_report WHERE relation = 'prepared_reports'::regclass ORDER BY 2, 3;
-- Once only.
COMMIT PREPARED 'fencing_reports_committed';
SELECT * FROM report_counts;

DROP VIEW prepared_counts, report_counts;
DROP TABLE prepared_writes, prepared_reports;
