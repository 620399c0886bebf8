-- After ALTER EXTENSION fencing UPDATE from 0.1.0: every mark, lease, fence
-- and the token sequence survived and still work.
\set VERBOSITY terse
ALTER EXTENSION fencing UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'fencing';
-- The module is no longer in this database's session_preload_libraries.
SELECT count(*) AS database_settings FROM pg_db_role_setting
WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database());

-- Marks: converted (the one of the dropped table is gone), and enforced.
SELECT relid, token FROM fencing.deleted_keys ORDER BY relid::text, token;
INSERT INTO jobs VALUES (1, 'zombie', 6);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO jobs VALUES (1, 'requeued', 7);
INSERT INTO bookings VALUES ('A"1', '2026-12-24', '2026-12-24 09:00+00', 1.5, 9);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO bookings VALUES ('A"1', '2026-12-24', '2026-12-24 09:00+00', 1.5, 10);
INSERT INTO events VALUES ('eu', 1, 5);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO events VALUES ('eu', 1, 6);

-- Protected tables: same settings, 0.2.0's triggers, 0.2.0's rules.
SELECT relation, token_column, mode FROM fencing.protected_tables ORDER BY relation::text;
SELECT tgrelid::regclass, tgname FROM pg_trigger
WHERE tgname LIKE 'fencing%' AND tgrelid IN ('jobs'::regclass, 'events_eu'::regclass)
ORDER BY tgrelid::regclass::text, 2;
UPDATE jobs SET state = 'x' WHERE id = 3;
\echo :LAST_ERROR_SQLSTATE
UPDATE jobs SET state = 'late', last_fencing_token = 4 WHERE id = 3;
\echo :LAST_ERROR_SQLSTATE
TRUNCATE jobs;
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.fenced_update('jobs', '{"id": 3}', 8, '{"state": "done"}');

-- Leases, fences and tokens.
SELECT resource, holder, live FROM fencing.leases ORDER BY resource;
SELECT fencing.renew('order:1', 'worker-a', value, '1 hour') AS still_held FROM facts WHERE name = 'live';
SELECT fencing.acquire('order:1', 'worker-c', '1 hour') IS NULL AS still_busy;
SELECT fencing.acquire('order:2', 'worker-c', '1 hour') >
       (SELECT max(value) FROM facts WHERE name IN ('live', 'released', 'sequence')) AS newer_token;
-- Tokens follow the clock from the first grant after the update on: the
-- timeline is recorded, and the highest stored token is at least that grant.
SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS before \gset
SELECT fencing.acquire('order:4', 'worker-c', '1 hour') AS clocked \gset
SELECT :clocked >= :before AS follows_clock;
SELECT count(*) AS timelines FROM fencing.token_timelines;
SELECT fencing.high_water_mark() >= :clocked AS high_water_mark;
SELECT fencing.fence('order:3', 41);
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.fence('order:3', 43) AS previous_mark;

-- pg_dump dumps the extension's state tables, and only existing ones.
SELECT c::regclass AS dumped_with_the_extension
FROM pg_extension e, unnest(e.extconfig) c WHERE e.extname = 'fencing' ORDER BY c::regclass::text;

-- The registry, built from the guards 0.2.0's update made: the protected
-- tables with their settings and key identity (the temporary table went
-- with its session).
SELECT relid, token_column, mode, protected, key_columns, key_types, key_collations
FROM fencing.registry ORDER BY relid::text;
-- That key identity is the one protect() records: protected again under
-- the same settings, no table's registry row changes and no floor rises.
CREATE TEMP TABLE registered AS SELECT * FROM fencing.registry;
CREATE TEMP TABLE floors_now AS SELECT relid, token, compacted FROM fencing.floors;
SELECT fencing.protect(relid, token_column, mode) FROM fencing.registry ORDER BY relid::text;
SELECT relid::regclass, r.key_columns, r.key_types, r.key_collations
FROM registered r
EXCEPT SELECT relid, key_columns, key_types, key_collations FROM fencing.registry;
SELECT * FROM floors_now EXCEPT SELECT relid, token, compacted FROM fencing.floors;
-- unprotect() and protect() on a table the update registered.
SELECT fencing.unprotect('jobs');
SELECT relid, protected FROM fencing.registry WHERE relid = 'jobs'::regclass;
INSERT INTO jobs VALUES (9, 'unguarded');
SELECT fencing.protect('jobs');
INSERT INTO jobs VALUES (10, 'unfenced');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO jobs VALUES (2, 'zombie', 6);
\echo :LAST_ERROR_SQLSTATE
