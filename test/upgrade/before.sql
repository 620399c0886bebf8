-- State made with fencing 0.1.0, to survive ALTER EXTENSION fencing UPDATE.
CREATE EXTENSION fencing VERSION '0.1.0';

-- Protected tables with rows, in both modes, plain and partitioned, with
-- deleted keys of several types (printed by 0.1.0 under odd settings).
CREATE TABLE jobs (id int PRIMARY KEY, state text);
SELECT fencing.protect('jobs');
INSERT INTO jobs SELECT g, 'queued', 5 FROM generate_series(1, 5) g;
BEGIN; SET LOCAL fencing.token = 7; DELETE FROM jobs WHERE id IN (1, 2); COMMIT;

CREATE TABLE bookings (room text, day date, at timestamptz, amount numeric,
                       PRIMARY KEY (room, day, at, amount));
SELECT fencing.protect('bookings', mode => 'strict');
SET DateStyle = 'SQL, DMY';
SET TimeZone = 'Asia/Tokyo';
INSERT INTO bookings VALUES ('A"1', '24/12/2026', '2026-12-24 18:00', 1.50, 3);
BEGIN; SET LOCAL fencing.token = 9; DELETE FROM bookings; COMMIT;
RESET DateStyle;
RESET TimeZone;

CREATE TABLE events (region text, id int, PRIMARY KEY (region, id)) PARTITION BY LIST (region);
CREATE TABLE events_eu PARTITION OF events FOR VALUES IN ('eu');
SELECT fencing.protect('events');
INSERT INTO events VALUES ('eu', 1, 4), ('eu', 2, 4);
BEGIN; SET LOCAL fencing.token = 6; DELETE FROM events WHERE id = 1; COMMIT;

-- A mark whose table is gone: a temporary table dropped at the end of its
-- session fires no event trigger, so 0.1.0 kept its marks.
CREATE TEMP TABLE gone (id int PRIMARY KEY);
SELECT fencing.protect('gone');
INSERT INTO gone VALUES (1, 1);
BEGIN; SET LOCAL fencing.token = 2; DELETE FROM gone; COMMIT;
\c -

-- Leases: one live, one released; a fence; and what the tokens were.
CREATE TABLE facts (name text PRIMARY KEY, value bigint);
INSERT INTO facts SELECT 'live', fencing.acquire('order:1', 'worker-a', '1 hour');
INSERT INTO facts SELECT 'released', fencing.acquire('order:2', 'worker-b', '1 hour');
SELECT fencing.release('order:2', 'worker-b', value) FROM facts WHERE name = 'released';
INSERT INTO facts SELECT 'fence', fencing.fence('order:3', 42);
INSERT INTO facts SELECT 'sequence', last_value FROM fencing.token_seq;
SELECT count(*) AS marks FROM fencing.deleted_keys;
SELECT count(*) AS database_settings FROM pg_db_role_setting
WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database());
