-- fencing.stats: accepted and rejected writes per protected relation and
-- fenced resource, counted in shared memory across backends (with
-- shared_preload_libraries = 'fencing'; without it the view is empty).

CREATE TABLE counted (id int PRIMARY KEY, v text);
SELECT fencing.protect('counted');
CREATE TABLE counted_parts (id int, part int, PRIMARY KEY (id, part)) PARTITION BY LIST (part);
CREATE TABLE counted_parts_1 PARTITION OF counted_parts FOR VALUES IN (1);
SELECT fencing.protect('counted_parts');
SELECT fencing.stats_reset();

INSERT INTO counted VALUES (1, 'a', 5), (2, 'b', 5);
-- A write rolled back is not counted.
BEGIN;
INSERT INTO counted VALUES (3, 'c', 5);
ROLLBACK;
UPDATE counted SET v = 'x', last_fencing_token = 4 WHERE id = 1;
UPDATE counted SET v = 'x' WHERE id = 2;
SELECT fencing.fenced_update('counted', '{"id": 1}', 3, '{}', 'skip');
SELECT fencing.fence('counted:resource', 10);
SELECT fencing.fence('counted:resource', 9);
-- Writes to a partition count for the protected (partitioned) table.
INSERT INTO counted_parts_1 VALUES (1, 1, 2);
-- Another backend's writes land in the same counters.
\c -
INSERT INTO counted VALUES (4, 'd', 6);
SELECT relation, resource, writes_accepted, stale_rejections, missing_token_rejections,
       last_rejection_kind, last_rejection_key, last_rejection_presented, last_rejection_stored,
       last_rejection_at IS NOT NULL AS rejected, stats_reset <= now() AS reset_before
FROM fencing.stats
WHERE relation IN ('counted'::regclass, 'counted_parts'::regclass) OR resource LIKE 'counted%'
ORDER BY relation::text, resource;

-- fencing.stats = off (superuser): nothing is counted.
SET fencing.stats = off;
INSERT INTO counted VALUES (5, 'e', 6);
RESET fencing.stats;
SELECT writes_accepted FROM fencing.stats WHERE relation = 'counted'::regclass;

-- fencing.log_rejections: one LOG line per rejection (here sent to the client too).
SET fencing.log_rejections = 'stale';
SET client_min_messages = 'log';
UPDATE counted SET v = 'y', last_fencing_token = 1 WHERE id = 4;
UPDATE counted SET v = 'y' WHERE id = 4;
SET fencing.log_rejections = 'all';
UPDATE counted SET v = 'y' WHERE id = 4;
RESET client_min_messages;
RESET fencing.log_rejections;

-- Reading needs the owner or pg_read_all_stats; resetting, the owner.
CREATE ROLE regress_fencing_monitor;
GRANT USAGE ON SCHEMA fencing TO regress_fencing_monitor;
SET ROLE regress_fencing_monitor;
SELECT t.error_of($$SELECT * FROM fencing.stats$$);
SELECT t.error_of($$SELECT fencing.stats_reset()$$);
RESET ROLE;
GRANT pg_read_all_stats TO regress_fencing_monitor;
SET ROLE regress_fencing_monitor;
SELECT count(*) > 0 AS readable FROM fencing.stats;
RESET ROLE;
SELECT fencing.stats_reset();
SELECT writes_accepted, stale_rejections, missing_token_rejections, last_rejection_at
FROM fencing.stats WHERE relation = 'counted'::regclass;
DROP OWNED BY regress_fencing_monitor;
DROP ROLE regress_fencing_monitor;
DROP TABLE counted, counted_parts;
