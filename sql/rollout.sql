-- Report-only rollout: protect(..., enforce => false) accepts and reports the
-- writes enforcement would refuse; set_enforce() switches; max_token refuses
-- tokens above a ceiling; fencing.rollout_report names the writers.

CREATE TABLE ro_accounts (id int PRIMARY KEY, v text);
INSERT INTO ro_accounts VALUES (1, 'a'), (2, 'b'), (3, 'c');
SELECT fencing.rollout_report_reset();
SELECT fencing.stats_reset();
SELECT fencing.protect('ro_accounts', enforce => false);
SELECT relation, token_column, mode, enforce, max_token FROM fencing.protected_tables
WHERE relation = 'ro_accounts'::regclass;

-- Report-only: a write without a token is accepted, the stored token stays.
SET application_name = 'cron-job';
SET client_min_messages = log;
UPDATE ro_accounts SET v = 'a1' WHERE id = 1;
RESET client_min_messages;
SELECT * FROM ro_accounts ORDER BY id;
-- A fenced write raises the stored token as usual.
BEGIN;
SET LOCAL fencing.token = 50;
UPDATE ro_accounts SET v = 'a50' WHERE id = 1;
COMMIT;
-- A stale write is accepted, reported, and the stored token never goes down;
-- one LOG line for the statement, with the first row's detail and the count.
SET application_name = 'old-worker';
BEGIN;
SET LOCAL fencing.token = 40;
SET LOCAL client_min_messages = log;
UPDATE ro_accounts SET v = v || '@40';
COMMIT;
SELECT * FROM ro_accounts ORDER BY id;
-- An assigned stale token: reported, the row keeps its stored token.
UPDATE ro_accounts SET v = 'a-assigned', last_fencing_token = 7 WHERE id = 1;
SELECT * FROM ro_accounts WHERE id = 1;
-- INSERT and DELETE without a token: accepted; the deleted key's mark keeps
-- the stored token, and a re-insert without a token takes the key's mark.
INSERT INTO ro_accounts (id, v) VALUES (4, 'd');
DELETE FROM ro_accounts WHERE id = 1;
SELECT t.mark('ro_accounts', t.img(1));
INSERT INTO ro_accounts (id, v) VALUES (1, 'back');
SELECT * FROM ro_accounts WHERE id = 1;
-- A stale re-insert (token below the key's mark) also takes the mark.
DELETE FROM ro_accounts WHERE id = 1;
INSERT INTO ro_accounts (id, v, last_fencing_token) VALUES (1, 'stale-back', 3);
SELECT * FROM ro_accounts WHERE id = 1;
-- ON CONFLICT with a token: the conflicting row takes it, nothing reported.
INSERT INTO ro_accounts (id, v, last_fencing_token) VALUES (2, 'upsert', 60)
ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v;
SELECT * FROM ro_accounts WHERE id = 2;
-- fenced_update() keeps its own semantics: stale is still refused.
SELECT t.error_of($$SELECT fencing.fenced_update('ro_accounts', '{"id": 2}', 10, '{"v": "late"}')$$);
SELECT fencing.fenced_update('ro_accounts', '{"id": 2}', 61, '{"v": "fresh"}');
RESET application_name;

-- What would have been refused, by relation, role, application and reason.
SELECT relation, role, application_name, reason, count, first_seen <= last_seen AS ordered
FROM fencing.rollout_report WHERE relation = 'ro_accounts'::regclass
ORDER BY application_name, reason;
SELECT writes_accepted, stale_rejections, missing_token_rejections, stale_reported, missing_reported
FROM fencing.stats WHERE relation = 'ro_accounts'::regclass;

-- Enforce: the same writes are refused now, and not reported.
SELECT fencing.set_enforce('ro_accounts', true);
SELECT enforce FROM fencing.protected_tables WHERE relation = 'ro_accounts'::regclass;
UPDATE ro_accounts SET v = 'x' WHERE id = 3;
\echo :LAST_ERROR_SQLSTATE
BEGIN;
SET LOCAL fencing.token = 40;
UPDATE ro_accounts SET v = 'x' WHERE id = 2;
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT sum(count) FROM fencing.rollout_report WHERE relation = 'ro_accounts'::regclass;
-- Roll back: report-only again.
SELECT fencing.set_enforce('ro_accounts', false);
UPDATE ro_accounts SET v = 'x' WHERE id = 3;
SELECT sum(count) FROM fencing.rollout_report WHERE relation = 'ro_accounts'::regclass;

-- TRUNCATE without a token in report-only mode: accepted and reported; the
-- floor keeps the highest stored token.
CREATE TABLE ro_jobs (id int PRIMARY KEY);
SELECT fencing.protect('ro_jobs', enforce => false);
INSERT INTO ro_jobs VALUES (1, 90);
TRUNCATE ro_jobs;
SELECT t.error_of('INSERT INTO ro_jobs VALUES (2, 80)');
SELECT * FROM ro_jobs;
SELECT fencing.set_enforce('ro_jobs', true);
SELECT t.error_of('INSERT INTO ro_jobs VALUES (3, 80)');
SELECT reason, count FROM fencing.rollout_report WHERE relation = 'ro_jobs'::regclass ORDER BY reason;

-- A row moved to another partition without a token: one would-be refusal
-- (its DELETE half follows its UPDATE half); the row and the mark of its old
-- key keep the stored token.
CREATE TABLE ro_parts (id int PRIMARY KEY) PARTITION BY RANGE (id);
CREATE TABLE ro_parts_low PARTITION OF ro_parts FOR VALUES FROM (0) TO (100);
CREATE TABLE ro_parts_high PARTITION OF ro_parts FOR VALUES FROM (100) TO (200);
SELECT fencing.protect('ro_parts', enforce => false);
INSERT INTO ro_parts VALUES (5, 30);
SET client_min_messages = log;
UPDATE ro_parts SET id = 105 WHERE id = 5;
RESET client_min_messages;
SELECT tableoid::regclass, * FROM ro_parts;
SELECT t.mark('ro_parts', t.img(5));
-- COPY without a token: accepted, one LOG line for the command.
SET client_min_messages = log;
COPY ro_parts (id) FROM STDIN;
6
7
\.
RESET client_min_messages;
SELECT reason, count FROM fencing.rollout_report WHERE relation = 'ro_parts'::regclass ORDER BY reason;

-- max_token: tokens above it are refused with 22023, in every mode and in
-- fenced_update(); re-protect changes the options (and only protect() sets them).
SELECT fencing.protect('ro_accounts', max_token => 1000);
SELECT enforce, max_token FROM fencing.protected_tables WHERE relation = 'ro_accounts'::regclass;
SELECT t.error_of($$SELECT fencing.fenced_update('ro_accounts', '{"id": 2}', 9223372036854775807, '{"v": "huge"}')$$);
SELECT t.error_of('INSERT INTO ro_accounts VALUES (9, ''x'', 1001)');
SELECT t.error_of('DO $b$ BEGIN SET LOCAL fencing.token = 5000; DELETE FROM ro_accounts WHERE id = 2; END $b$');
SELECT fencing.protect('ro_accounts', enforce => false, max_token => 1000);
SELECT t.error_of('UPDATE ro_accounts SET last_fencing_token = 2000 WHERE id = 2');
SELECT fencing.fenced_update('ro_accounts', '{"id": 2}', 1000, '{"v": "at ceiling"}');
SELECT * FROM ro_accounts WHERE id = 2;
-- Without options: enforcing, no ceiling.
SELECT fencing.protect('ro_accounts');
SELECT enforce, max_token FROM fencing.protected_tables WHERE relation = 'ro_accounts'::regclass;

-- A mark at 2^63 - 1 (a bad token): compaction at that floor clears it, as
-- every mark at or under its floor.
CREATE TABLE ro_pinned (id int PRIMARY KEY);
SELECT fencing.protect('ro_pinned');
INSERT INTO ro_pinned VALUES (1, 9223372036854775807);
BEGIN;
SET LOCAL fencing.token = 9223372036854775807;
DELETE FROM ro_pinned;
COMMIT;
SELECT count(*) AS marks FROM fencing.deleted_keys WHERE relid = 'ro_pinned'::regclass;
SELECT fencing.compact('ro_pinned', 9223372036854775807) AS removed;
SELECT count(*) AS marks FROM fencing.deleted_keys WHERE relid = 'ro_pinned'::regclass;
SELECT t.error_of('INSERT INTO ro_pinned VALUES (1, 5)');
DROP TABLE ro_pinned;

-- Bad inputs.
SELECT t.error_of($$SELECT fencing.protect('ro_accounts', enforce => NULL)$$);
SELECT t.error_of($$SELECT fencing.protect('ro_accounts', max_token => 0)$$);
SELECT t.error_of($$SELECT fencing.protect('ro_accounts', max_token => -5)$$);
SELECT t.error_of($$SELECT fencing.set_enforce(NULL, true)$$);
SELECT t.error_of($$SELECT fencing.set_enforce('ro_accounts', NULL)$$);
SELECT t.error_of($$SELECT fencing.set_enforce(12345678, true)$$);
CREATE TABLE ro_plain (id int PRIMARY KEY);
SELECT t.error_of($$SELECT fencing.set_enforce('ro_plain', false)$$);
-- Unprotected: the options go with the protection.
SELECT fencing.protect('ro_plain', enforce => false);
SELECT fencing.unprotect('ro_plain');
SELECT count(*) FROM fencing.table_options WHERE relid = 'ro_plain'::regclass;
SELECT fencing.protect('ro_plain');
SELECT enforce FROM fencing.protected_tables WHERE relation = 'ro_plain'::regclass;

-- Rights: only the table's owner (or a member of its role) switches or
-- protects; others get 42501.  Reading the report needs pg_read_all_stats.
CREATE ROLE regress_rollout_owner;
CREATE ROLE regress_rollout_member IN ROLE regress_rollout_owner;
CREATE ROLE regress_rollout_other;
GRANT USAGE ON SCHEMA fencing TO regress_rollout_owner, regress_rollout_other;
CREATE TABLE ro_owned (id int PRIMARY KEY);
ALTER TABLE ro_owned OWNER TO regress_rollout_owner;
SELECT fencing.protect('ro_owned');
SET ROLE regress_rollout_other;
SELECT t.error_of($$SELECT fencing.set_enforce('ro_owned', false)$$);
SELECT t.error_of($$SELECT fencing.protect('ro_owned', enforce => false)$$);
SELECT t.error_of('SELECT count(*) FROM fencing.rollout_report');
SELECT t.error_of('SELECT fencing.rollout_report_reset()');
SELECT t.error_of('SELECT count(*) FROM fencing.table_options');
SELECT t.error_of('DELETE FROM fencing.table_options');
SET ROLE regress_rollout_member;
SELECT fencing.set_enforce('ro_owned', false);
SET ROLE regress_rollout_owner;
SELECT fencing.set_enforce('ro_owned', true);
RESET ROLE;
SELECT enforce FROM fencing.protected_tables WHERE relation = 'ro_owned'::regclass;

-- DROP TABLE takes the options with the registry row.
DROP TABLE ro_owned, ro_plain, ro_jobs, ro_parts;
SELECT count(*) FROM fencing.table_options o
WHERE NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = o.relid);
DROP ROLE regress_rollout_member;
DROP OWNED BY regress_rollout_owner, regress_rollout_other;
DROP ROLE regress_rollout_owner, regress_rollout_other;
DROP TABLE ro_accounts;

-- When the groups by role and application are all taken, a relation's
-- further writes still count as its own, in one group per relation and
-- reason (role and application_name NULL), so fencing.stats sums them all:
-- a table that many applications wrote first does not hide the writers of
-- another.  (The default fencing.rollout_report_max is 1000.)
SELECT fencing.rollout_report_reset();
CREATE TABLE ro_many (id int PRIMARY KEY);
CREATE TABLE ro_late (id int PRIMARY KEY);
SELECT fencing.protect('ro_many', enforce => false);
SELECT fencing.protect('ro_late', enforce => false);
DO $$
BEGIN
	FOR i IN 1..1001 LOOP
		PERFORM pg_catalog.set_config('application_name', 'app' || i, false);
		INSERT INTO ro_many VALUES (i);
	END LOOP;
END
$$;
SET application_name = 'late writer';
INSERT INTO ro_late VALUES (1);
RESET application_name;
SELECT relation, missing_reported FROM fencing.stats
WHERE relation IN ('ro_many'::regclass, 'ro_late'::regclass) ORDER BY relation::text;
SELECT relation, role IS NULL AS any_role, application_name IS NULL AS any_application, count
FROM fencing.rollout_report WHERE relation = 'ro_late'::regclass;
SELECT count(*) FILTER (WHERE role IS NOT NULL) > 0 AS by_writer,
       count(*) FILTER (WHERE role IS NULL) AS by_relation, sum(count) AS writes
FROM fencing.rollout_report WHERE relation = 'ro_many'::regclass;
SELECT count(*) FROM fencing.rollout_report WHERE relation IS NULL;
SELECT fencing.rollout_report_reset();
DROP TABLE ro_many, ro_late;

-- An upsert is one write: the conflicting row's UPDATE that the INSERT
-- already reported (or maintained) keeps the stored token and is not
-- counted again.
CREATE TABLE ro_upsert (id int PRIMARY KEY, v text);
SELECT fencing.protect('ro_upsert', enforce => false);
INSERT INTO ro_upsert VALUES (1, 'a', 10);
SELECT fencing.rollout_report_reset();
INSERT INTO ro_upsert (id, v) VALUES (1, 'b') ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v;
INSERT INTO ro_upsert VALUES (1, 'c', 3) ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v;
BEGIN;
SET LOCAL fencing.maintenance = on;
INSERT INTO ro_upsert (id, v) VALUES (1, 'd') ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v;
COMMIT;
SELECT * FROM ro_upsert;
SELECT stale_reported, missing_reported, maintenance_writes FROM fencing.stats
WHERE relation = 'ro_upsert'::regclass;
SELECT fencing.rollout_report_reset();
DROP TABLE ro_upsert;

-- protect() sets every option it takes: run again on a protected table, it
-- says which recorded options it changed and how to keep them; the
-- maintainer stays.  The same options, or a first protect(), say nothing.
CREATE TABLE ro_again (id int PRIMARY KEY, v text);
SELECT fencing.protect('ro_again');
SELECT fencing.protect('ro_again', enforce => false, max_token => 1000);
SELECT fencing.protect('ro_again', enforce => false, max_token => 1000);
SELECT fencing.set_maintainer('ro_again', current_user::regrole);
SELECT fencing.protect('ro_again');
SELECT enforce, max_token, maintainer = current_user::regrole AS maintainer_kept
FROM fencing.table_options WHERE relid = 'ro_again'::regclass;
SELECT fencing.set_enforce('ro_again', false);
SELECT fencing.protect('ro_again', max_token => 5);
SELECT fencing.unprotect('ro_again');
SELECT fencing.protect('ro_again', enforce => false);
DROP TABLE ro_again;

-- Rows written before protect() have token 0: report-only and maintenance
-- writes delete them (and move their key) without a mark, which token 0
-- would not make (a key without a mark takes any token).
CREATE TABLE ro_zero (id int PRIMARY KEY, v text);
INSERT INTO ro_zero VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd');
SELECT fencing.protect('ro_zero', enforce => false);
DELETE FROM ro_zero WHERE id = 1;
UPDATE ro_zero SET id = 5 WHERE id = 2;
SELECT fencing.set_enforce('ro_zero', true);
BEGIN;
SET LOCAL fencing.maintenance = on;
DELETE FROM ro_zero WHERE id = 3;
UPDATE ro_zero SET id = 6 WHERE id = 4;
COMMIT;
SELECT * FROM ro_zero ORDER BY id;
SELECT count(*) AS marks FROM fencing.deleted_keys WHERE relid = 'ro_zero'::regclass;
BEGIN;
SET LOCAL fencing.token = 1;
INSERT INTO ro_zero VALUES (1, 'again'), (3, 'again');
COMMIT;
SELECT * FROM ro_zero ORDER BY id;
DROP TABLE ro_zero;
