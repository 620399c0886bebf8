-- Maintenance writes: with SET LOCAL fencing.maintenance = on, the owner of a
-- protected table, or the maintainer it named with set_maintainer() (and the
-- roles with their privileges), write without a token; stored tokens and
-- marks are kept; tokens presented are checked as usual; anyone else is
-- refused per write with 42501.

CREATE ROLE regress_mt_owner;
CREATE ROLE regress_mt_maintainer;
CREATE ROLE regress_mt_member IN ROLE regress_mt_maintainer;
CREATE ROLE regress_mt_writer;
GRANT USAGE ON SCHEMA fencing TO regress_mt_owner, regress_mt_maintainer, regress_mt_writer;
GRANT USAGE ON SCHEMA t TO regress_mt_owner;
CREATE TABLE mt_items (id int PRIMARY KEY, v text);
ALTER TABLE mt_items OWNER TO regress_mt_owner;
GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON mt_items TO regress_mt_maintainer, regress_mt_writer;
SET ROLE regress_mt_owner;
SELECT fencing.protect('mt_items', mode => 'strict');
INSERT INTO mt_items VALUES (1, 'a', 10), (2, 'b', 20), (3, 'c', 30);
BEGIN;
SET LOCAL fencing.token = 40;
DELETE FROM mt_items WHERE id = 3;
COMMIT;
RESET ROLE;
SELECT fencing.stats_reset();

-- The owner: a migration without tokens; stored tokens stay, a deleted key
-- re-inserted takes its mark (also in strict mode), one LOG line per statement.
SET ROLE regress_mt_owner;
BEGIN;
SET LOCAL fencing.maintenance = on;
SET LOCAL client_min_messages = log;
UPDATE mt_items SET v = upper(v);
INSERT INTO mt_items (id, v) VALUES (3, 'C'), (4, 'D');
COMMIT;
SELECT * FROM mt_items ORDER BY id;
-- A presented token is checked as usual: a stale one is refused.
BEGIN;
SET LOCAL fencing.maintenance = on;
UPDATE mt_items SET v = 'late', last_fencing_token = 5 WHERE id = 1;
ROLLBACK;
BEGIN;
SET LOCAL fencing.maintenance = on;
SET LOCAL fencing.token = 10;
UPDATE mt_items SET v = 'late' WHERE id = 1;
ROLLBACK;
-- The setting never outlives its transaction, even with a plain SET.
BEGIN;
SET fencing.maintenance = on;
COMMIT;
SHOW fencing.maintenance;
UPDATE mt_items SET v = 'no maintenance' WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
RESET fencing.maintenance;
RESET ROLE;

-- Someone else: refused per write with 42501, nothing changes.
SET ROLE regress_mt_writer;
BEGIN;
SET LOCAL fencing.maintenance = on;
UPDATE mt_items SET v = 'intruder' WHERE id = 1;
ROLLBACK;
BEGIN;
SET LOCAL fencing.maintenance = on;
DELETE FROM mt_items WHERE id = 4;
ROLLBACK;
BEGIN;
SET LOCAL fencing.maintenance = on;
TRUNCATE mt_items;
ROLLBACK;
-- With a token the writer writes as always, maintenance or not.
BEGIN;
SET LOCAL fencing.maintenance = on;
SET LOCAL fencing.token = 50;
UPDATE mt_items SET v = 'fenced' WHERE id = 4;
COMMIT;
-- Only the owner names a maintainer (42501).
SELECT t.error_of($$SELECT fencing.set_maintainer('mt_items', 'regress_mt_writer')$$);
RESET ROLE;

-- The named maintainer, and a member of its role (SET ROLE or inheriting);
-- a DELETE keeps the stored token as its mark, a TRUNCATE the highest as floor.
SET ROLE regress_mt_owner;
SELECT fencing.set_maintainer('mt_items', 'regress_mt_maintainer');
SELECT relation, mode, enforce, maintainer FROM fencing.protected_tables WHERE relation = 'mt_items'::regclass;
RESET ROLE;
SET ROLE regress_mt_member;
BEGIN;
SET LOCAL fencing.maintenance = on;
UPDATE mt_items SET v = 'backfilled' WHERE id = 2;
DELETE FROM mt_items WHERE id = 4;
COMMIT;
RESET ROLE;
SELECT t.mark('mt_items', t.img(4));
SELECT * FROM mt_items ORDER BY id;
SET ROLE regress_mt_maintainer;
BEGIN;
SET LOCAL fencing.maintenance = on;
TRUNCATE mt_items;
COMMIT;
RESET ROLE;
SELECT token AS floor FROM fencing.floors WHERE relid = 'mt_items'::regclass;
-- Below the floor nothing goes in; the maintainer cannot lower a token.
INSERT INTO mt_items VALUES (1, 'stale', 40);
\echo :LAST_ERROR_SQLSTATE
SET ROLE regress_mt_maintainer;
BEGIN;
SET LOCAL fencing.maintenance = on;
INSERT INTO mt_items (id, v) VALUES (1, 'reloaded');
UPDATE mt_items SET last_fencing_token = 1 WHERE id = 1;
ROLLBACK;
RESET ROLE;

-- A SECURITY DEFINER function of the owner's does not lend the right to a
-- writer that calls it in a maintenance transaction; nor does the writer's
-- own SECURITY DEFINER function lend it to the maintainer.
CREATE FUNCTION mt_owner_write() RETURNS void LANGUAGE sql SECURITY DEFINER
SET search_path = public AS $$ INSERT INTO mt_items (id, v) VALUES (9, 'via definer') $$;
ALTER FUNCTION mt_owner_write() OWNER TO regress_mt_owner;
SET ROLE regress_mt_writer;
BEGIN;
SET LOCAL fencing.maintenance = on;
SELECT mt_owner_write();
ROLLBACK;
RESET ROLE;
SET ROLE regress_mt_owner;
BEGIN;
SET LOCAL fencing.maintenance = on;
SELECT mt_owner_write();
COMMIT;
RESET ROLE;
CREATE FUNCTION mt_writer_write() RETURNS void LANGUAGE sql SECURITY DEFINER
SET search_path = public AS $$ UPDATE mt_items SET v = 'via writer' WHERE id = 9 $$;
ALTER FUNCTION mt_writer_write() OWNER TO regress_mt_writer;
SET ROLE regress_mt_maintainer;
BEGIN;
SET LOCAL fencing.maintenance = on;
SELECT mt_writer_write();
ROLLBACK;
RESET ROLE;

-- Clearing the maintainer (NULL) takes the right away.
SET ROLE regress_mt_owner;
SELECT fencing.set_maintainer('mt_items', NULL);
RESET ROLE;
SET ROLE regress_mt_maintainer;
BEGIN;
SET LOCAL fencing.maintenance = on;
UPDATE mt_items SET v = 'gone' WHERE id = 9;
ROLLBACK;
RESET ROLE;

-- Counted in fencing.stats when their transaction commits (the rolled-back
-- reload above is not), not in the rollout report.
SELECT maintenance_writes, stale_reported, missing_reported
FROM fencing.stats WHERE relation = 'mt_items'::regclass;
SELECT count(*) FROM fencing.rollout_report WHERE relation = 'mt_items'::regclass;

-- Bad inputs.
SELECT t.error_of($$SELECT fencing.set_maintainer(NULL, 'regress_mt_owner')$$);
SELECT t.error_of($$SELECT fencing.set_maintainer(12345678, 'regress_mt_owner')$$);
SELECT t.error_of($$SELECT fencing.set_maintainer('mt_items', 'regress_no_such_role')$$);
SELECT t.error_of($$SELECT fencing.set_maintainer('mt_items', 12345678::oid::regrole)$$);
CREATE TABLE mt_plain (id int PRIMARY KEY);
SELECT t.error_of($$SELECT fencing.set_maintainer('mt_plain', 'regress_mt_owner')$$);
SELECT t.error_of($$SET fencing.maintenance = 'maybe'$$);

DROP TABLE mt_items, mt_plain;
DROP FUNCTION mt_owner_write(), mt_writer_write();
DROP OWNED BY regress_mt_owner, regress_mt_maintainer, regress_mt_writer;
DROP ROLE regress_mt_member;
DROP ROLE regress_mt_owner, regress_mt_maintainer, regress_mt_writer;
