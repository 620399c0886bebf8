-- Without shared_preload_libraries the module loads at a session's first
-- call, and PostgreSQL then applies the values it kept for the extension's
-- superuser settings: one the session set without the right to (connection
-- options, SET) is refused and the setting falls back to its built-in
-- default, not to the database's value.  Such a session cannot use what
-- reads the setting (55000).  Run on a cluster that does not preload the
-- module (test/check's "unloaded" step); with preloading such a connection
-- is refused outright.
\set regress_db :DBNAME
CREATE DATABASE fencing_late;
ALTER DATABASE fencing_late SET fencing.grant_confirmation = 'synchronous';
ALTER DATABASE fencing_late SET fencing.log_rejections = 'all';
CREATE ROLE late_writer LOGIN;
CREATE ROLE late_granted LOGIN;
\c fencing_late
CREATE EXTENSION fencing;
GRANT USAGE ON SCHEMA fencing TO late_writer, late_granted;
CREATE TABLE late_orders (id int PRIMARY KEY, status text);
SELECT fencing.protect('late_orders');
GRANT SELECT, INSERT, UPDATE ON late_orders TO late_writer;
INSERT INTO late_orders VALUES (1, 'new', 50);

-- A plain connection has the database's values: no standby confirms, so no grant.
\c "dbname=fencing_late user=late_writer"
SHOW fencing.grant_confirmation;
SELECT fencing.acquire('late:1', 'w', '1 min');
\echo :LAST_ERROR_SQLSTATE

-- The same role with a connection option: refused as the module loads; the
-- lease manager then refuses the session instead of granting without the
-- DBA's check.
\c "dbname=fencing_late user=late_writer options=-cfencing.grant_confirmation=off"
SHOW fencing.grant_confirmation;
SELECT fencing.acquire('late:1', 'w', '1 min');
\echo :LAST_ERROR_SQLSTATE
SHOW fencing.grant_confirmation;
SELECT fencing.renew('late:1', 'w', 1, '1 min');
\echo :LAST_ERROR_SQLSTATE

-- The name in other letter case: PostgreSQL matches setting names whatever
-- their case, and the connection option, applied before the database's
-- value, names the placeholder that value then lands in.
\c "dbname=fencing_late user=late_writer options=-cFENCING.Grant_Confirmation=off"
SELECT fencing.acquire('late:1', 'w', '1 min');
\echo :LAST_ERROR_SQLSTATE

-- SET in the session before the module loads: refused too, and so the session is.
\c "dbname=fencing_late user=late_writer"
SET fencing.grant_confirmation = off;
SELECT fencing.acquire('late:1', 'w', '1 min');
\echo :LAST_ERROR_SQLSTATE

-- fencing.standby_reply_timeout likewise (read while grant_confirmation is on).
\c "dbname=fencing_late user=late_writer options=-cfencing.standby_reply_timeout=3600000"
SELECT fencing.acquire('late:1', 'w', '1 min');
\echo :LAST_ERROR_SQLSTATE

-- fencing.log_rejections: a rejection is not hidden from the log; the
-- session's rejected write fails with 55000 instead.
\c "dbname=fencing_late user=late_writer options=-cfencing.log_rejections=off"
BEGIN;
SET LOCAL fencing.token = 10;
UPDATE late_orders SET status = 'stale' WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
-- A write that is accepted reads nothing of it.
BEGIN;
SET LOCAL fencing.token = 60;
UPDATE late_orders SET status = 'paid' WHERE id = 1;
COMMIT;
-- Without the option the rejection is the usual one (and logged).
\c "dbname=fencing_late user=late_writer"
BEGIN;
SET LOCAL fencing.token = 10;
UPDATE late_orders SET status = 'stale' WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;

-- fencing.failover_margin, read by the first grant of this database's
-- history (no grant so far: every acquire above was refused).
\c "dbname=fencing_late user=postgres"
ALTER DATABASE fencing_late RESET fencing.grant_confirmation;
\c "dbname=fencing_late user=late_writer options=-cfencing.failover_margin=0"
SELECT fencing.acquire('late:1', 'w', '1 min');
\echo :LAST_ERROR_SQLSTATE
\c "dbname=fencing_late user=postgres"
ALTER DATABASE fencing_late SET fencing.grant_confirmation = 'synchronous';

-- Who may set it keeps the value: a superuser, and a role granted SET on it.
\c "dbname=fencing_late user=postgres options=-cfencing.grant_confirmation=off"
SELECT fencing.acquire('late:2', 'su', '1 min') IS NOT NULL AS granted;
GRANT SET ON PARAMETER fencing.grant_confirmation TO late_granted;
\c "dbname=fencing_late user=late_granted options=-cfencing.grant_confirmation=off"
SHOW fencing.grant_confirmation;
SELECT fencing.acquire('late:3', 'g', '1 min') IS NOT NULL AS granted;

-- An invalid configured value falls back the same way: closed, for everyone.
\c :regress_db postgres
ALTER DATABASE fencing_late SET fencing.grant_confirmation = 'bogus';
\c "dbname=fencing_late user=late_writer"
SELECT fencing.acquire('late:4', 'w', '1 min');
\echo :LAST_ERROR_SQLSTATE

\c :regress_db postgres
DROP DATABASE fencing_late;
REVOKE SET ON PARAMETER fencing.grant_confirmation FROM late_granted;
DROP ROLE late_writer, late_granted;
