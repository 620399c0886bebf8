-- fencing.compact_in_batches() and fencing.compact_resources_in_batches():
-- compaction a batch per transaction, the floor committed first.

CREATE TABLE queue (id int PRIMARY KEY, state text);
SELECT fencing.protect('queue');
-- 100 keys written and deleted, each under its own token 101..200; key 0 stays.
INSERT INTO queue SELECT g, 'queued', 100 + g FROM generate_series(0, 100) g;
DO $$
BEGIN
	FOR k IN 1..100 LOOP
		PERFORM set_config('fencing.token', (100 + k)::text, true);
		DELETE FROM queue WHERE id = k;
	END LOOP;
END
$$;
-- Each batch is a transaction of its own: a statement trigger on the marks
-- table logs the transaction of every DELETE.
CREATE TABLE batch_log (xid xid8);
CREATE FUNCTION log_batch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.batch_log VALUES (pg_catalog.pg_current_xact_id());
	RETURN NULL;
END $$;
CREATE TRIGGER log_batch AFTER DELETE ON fencing.deleted_keys
	FOR EACH STATEMENT EXECUTE FUNCTION log_batch();
-- At 151, in batches of 7: the 51 marks at or under it go, the floor rises.
CALL fencing.compact_in_batches('queue', 151, 7);
SELECT count(*) AS marks, min(token) FROM fencing.deleted_keys WHERE relid = 'queue'::regclass;
SELECT token, compacted FROM fencing.floors WHERE relid = 'queue'::regclass;
-- 100 marks, 7 at a time: 15 batches and the one that finds none left.
SELECT count(*) AS deletes, count(DISTINCT xid) AS transactions FROM batch_log;
DROP TRIGGER log_batch ON fencing.deleted_keys;
-- A stale holder is refused afterwards, as after compact().
INSERT INTO queue VALUES (10, 'zombie', 140);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO queue VALUES (60, 'zombie', 159);
\echo :LAST_ERROR_SQLSTATE
UPDATE queue SET state = 'late', last_fencing_token = 150 WHERE id = 0;
\echo :LAST_ERROR_SQLSTATE
INSERT INTO queue VALUES (10, 'requeued', 151);
-- Again below the floor: nothing more goes, the floor stays.
CALL fencing.compact_in_batches('queue', 120);
SELECT token AS floor FROM fencing.floors WHERE relid = 'queue'::regclass;
-- Batch size 1, above every mark: all go.
CALL fencing.compact_in_batches('queue', 201, batch_size => 1);
SELECT count(*) AS marks FROM fencing.deleted_keys WHERE relid = 'queue'::regclass;

-- A partitioned table: every relation of the tree, the partition's own
-- marks and the parent's.
CREATE TABLE regions (region text, id int, PRIMARY KEY (region, id)) PARTITION BY LIST (region);
CREATE TABLE regions_eu PARTITION OF regions FOR VALUES IN ('eu');
CREATE TABLE regions_us PARTITION OF regions FOR VALUES IN ('us');
SELECT fencing.protect('regions');
INSERT INTO regions SELECT r, g, 10 FROM unnest(ARRAY['eu', 'us']) r, generate_series(1, 5) g;
BEGIN;
SET LOCAL fencing.token = 11;
DELETE FROM regions;
COMMIT;
SELECT count(*) AS marks FROM fencing.deleted_keys
 WHERE relid IN ('regions'::regclass, 'regions_eu'::regclass, 'regions_us'::regclass);
CALL fencing.compact_in_batches('regions', 12, 3);
SELECT count(*) AS marks_left FROM fencing.deleted_keys
 WHERE relid IN ('regions'::regclass, 'regions_eu'::regclass, 'regions_us'::regclass);
INSERT INTO regions_us VALUES ('us', 1, 11);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO regions VALUES ('eu', 1, 12);

-- Bad input: clear errors, nothing changed.
\set VERBOSITY sqlstate
CALL fencing.compact_in_batches(NULL, 10);
CALL fencing.compact_in_batches('queue', NULL);
CALL fencing.compact_in_batches('queue', 0);
CALL fencing.compact_in_batches('queue', 300, 0);
CALL fencing.compact_in_batches('queue', 300, -5);
CALL fencing.compact_in_batches('queue', 300, NULL);
CALL fencing.compact_in_batches(0, 10);
CALL fencing.compact_in_batches('regions_eu', 50);
CALL fencing.compact_in_batches('queue', 9007199254740992);
CREATE TABLE unguarded (id int PRIMARY KEY);
CALL fencing.compact_in_batches('unguarded', 10);
\set VERBOSITY default
SELECT token AS floor_unchanged FROM fencing.floors WHERE relid = 'queue'::regclass;
-- It commits, so it runs only as a statement of its own.
BEGIN;
CALL fencing.compact_in_batches('queue', 300);
ROLLBACK;
CREATE FUNCTION compact_from_a_function() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
	CALL fencing.compact_in_batches('queue', 300, 10, n);
	RETURN n;
END $$;
SELECT compact_from_a_function();
\echo :LAST_ERROR_SQLSTATE
-- A DO block of its own may commit: it runs there.
DO $$ DECLARE n bigint; BEGIN CALL fencing.compact_in_batches('queue', 201, 10, n); RAISE NOTICE 'removed %', n; END $$;
SELECT token AS floor_unchanged FROM fencing.floors WHERE relid = 'queue'::regclass;
-- Only the table's owner compacts it.
CREATE ROLE regress_fencing_batcher;
GRANT USAGE ON SCHEMA fencing TO regress_fencing_batcher;
GRANT ALL ON queue TO regress_fencing_batcher;
SET ROLE regress_fencing_batcher;
CALL fencing.compact_in_batches('queue', 300);
\echo :LAST_ERROR_SQLSTATE
CALL fencing.compact_resources_in_batches(300);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT token AS floor_unchanged FROM fencing.floors WHERE relid = 'queue'::regclass;
-- A role that owns its table compacts it, as the marks' owner, without
-- rights on the extension's tables.
ALTER TABLE queue OWNER TO regress_fencing_batcher;
BEGIN;
SET LOCAL fencing.token = 250;
DELETE FROM queue WHERE id = 0;
COMMIT;
SET ROLE regress_fencing_batcher;
CALL fencing.compact_in_batches('queue', 251, 1);
RESET ROLE;
SELECT count(*) AS marks FROM fencing.deleted_keys WHERE relid = 'queue'::regclass;
-- compact() too.
SET ROLE regress_fencing_batcher;
SELECT fencing.compact('queue', 251) AS removed;
RESET ROLE;

-- Resources: idle leases and fences below the floor go, live leases stay.
SELECT fencing.fence('sweep:1', 100), fencing.fence('sweep:2', 300), fencing.fence('keep:1', 100);
SELECT fencing.acquire('sweep:idle-' || g, 'a', '1 ms') IS NOT NULL AS granted
  FROM generate_series(1, 5) g LIMIT 1;
SELECT pg_sleep(0.01);
SELECT fencing.acquire('sweep:live', 'a', '1 hour') AS live_token \gset
CALL fencing.compact_resources_in_batches(:live_token, 'sweep:', 2);
SELECT resource FROM fencing.fences WHERE resource LIKE 'sweep:%' OR resource LIKE 'keep:%' ORDER BY 1;
SELECT resource FROM fencing.resources WHERE resource LIKE 'sweep:%' ORDER BY 1;
SELECT token = :live_token AS floor FROM fencing.resource_floors WHERE prefix = 'sweep:';
\set VERBOSITY sqlstate
SELECT fencing.fence('sweep:1', 150);
CALL fencing.compact_resources_in_batches(NULL);
CALL fencing.compact_resources_in_batches(10, NULL);
CALL fencing.compact_resources_in_batches(10, '', 0);
CALL fencing.compact_resources_in_batches(:live_token + 1000000000000, 'sweep:');
\set VERBOSITY default
BEGIN;
CALL fencing.compact_resources_in_batches(10);
ROLLBACK;
SELECT prefix FROM fencing.resource_floors ORDER BY 1;

DELETE FROM fencing.resource_floors;
DELETE FROM fencing.resources WHERE resource LIKE 'sweep:%';
DELETE FROM fencing.fences WHERE resource LIKE 'sweep:%' OR resource LIKE 'keep:%';
DROP TABLE queue, regions, unguarded;
DROP FUNCTION compact_from_a_function(), log_batch();
DROP TABLE batch_log;
REVOKE ALL ON SCHEMA fencing FROM regress_fencing_batcher;
DROP ROLE regress_fencing_batcher;
