-- fencing.acquire / renew / release and the fencing.leases view.

-- A free resource is granted; a live lease refuses everyone, its holder too.
SELECT fencing.acquire('res:1', 'alice', '10 s') AS t1 \gset
SELECT :t1 > 0 AS granted;
-- (The holder hears why, in a NOTICE: sql/lease_wait.sql.)
\set VERBOSITY sqlstate
SELECT fencing.acquire('res:1', 'alice', '10 s') IS NULL AS refused_same_holder;
\set VERBOSITY default
SELECT fencing.acquire('res:1', 'bob', '10 s') IS NULL AS refused_other_holder;
SELECT resource, holder, token = :t1 AS token_ok, expires_at - granted_at AS ttl, live
FROM fencing.leases WHERE resource = 'res:1';

-- TTLs up to 366 days are fine.
SELECT fencing.acquire('res:year', 'alice', '365 days') IS NOT NULL AS long_lease;

-- Renew extends a live lease held by (holder, token) only.
SELECT fencing.renew('res:1', 'alice', :t1, '20 s') AS renewed;
SELECT expires_at - granted_at > interval '19 s' AS extended FROM fencing.leases WHERE resource = 'res:1';
SELECT fencing.renew('res:1', 'bob', :t1, '20 s') AS wrong_holder;
SELECT fencing.renew('res:1', 'alice', :t1 + 1, '20 s') AS wrong_token;
SELECT fencing.renew('res:nope', 'alice', :t1, '20 s') AS unknown_resource;

-- Release ends it; the next acquire gets a strictly greater token.
SELECT fencing.release('res:1', 'bob', :t1) AS wrong_holder;
SELECT fencing.release('res:1', 'alice', :t1) AS released;
SELECT fencing.release('res:1', 'alice', :t1) AS released_twice;
SELECT fencing.renew('res:1', 'alice', :t1, '20 s') AS renew_after_release;
SELECT live FROM fencing.leases WHERE resource = 'res:1';
SELECT fencing.acquire('res:1', 'bob', '10 s') AS t2 \gset
SELECT :t2 > :t1 AS increases;

-- Expiry is judged by the server's clock at the call, not at transaction start.
SELECT fencing.acquire('res:2', 'alice', '1 s') AS t3 \gset
BEGIN;
SELECT fencing.acquire('res:2', 'bob', '10 s') IS NULL AS refused_while_live;
SELECT pg_sleep(1.1);
SELECT live FROM fencing.leases WHERE resource = 'res:2';
SELECT fencing.renew('res:2', 'alice', :t3, '10 s') AS renew_after_expiry;
SELECT fencing.release('res:2', 'alice', :t3) AS release_after_expiry;
SELECT fencing.acquire('res:2', 'bob', '10 s') AS t4 \gset
COMMIT;
SELECT :t4 > :t3 AS increases, holder FROM fencing.leases WHERE resource = 'res:2';

-- A token is never issued twice, not even when the acquiring transaction rolls back.
BEGIN;
SELECT fencing.acquire('res:3', 'alice', '10 s') AS t5 \gset
ROLLBACK;
SELECT count(*) AS lease_rows FROM fencing.leases WHERE resource = 'res:3';
SELECT fencing.acquire('res:3', 'alice', '10 s') AS t6 \gset
SELECT :t6 > :t5 AS not_reissued;

-- The lease manager does not depend on the caller's synchronous_commit: calling it
-- raises the transaction's setting to 'on', so the grant's commit is durable.
BEGIN;
SET LOCAL synchronous_commit = off;
SELECT fencing.acquire('res:4', 'alice', '10 s') IS NOT NULL AS granted;
SHOW synchronous_commit;
COMMIT;
SHOW synchronous_commit;
BEGIN;
SET LOCAL synchronous_commit = remote_apply;
SELECT fencing.renew('res:4', 'alice', 1, '10 s') AS renewed;
SHOW synchronous_commit;
COMMIT;

-- Tokens from acquire() work directly with the guard and fenced_update().
CREATE TABLE stock (sku text PRIMARY KEY, qty int);
SELECT fencing.protect('stock');
INSERT INTO stock VALUES ('apple', 10, 1);
SELECT fencing.acquire('stock:apple', 'alice', '10 s') AS ta \gset
SELECT fencing.release('stock:apple', 'alice', :ta);
SELECT fencing.acquire('stock:apple', 'bob', '10 s') AS tb \gset
SELECT fencing.fenced_update('stock', '{"sku": "apple"}', :tb, '{"qty": 9}');
SELECT fencing.fenced_update('stock', '{"sku": "apple"}', :ta, '{"qty": 8}', 'skip') AS alice_fenced_out;
SELECT qty, last_fencing_token = :tb AS holds_bobs_token FROM stock;
DROP TABLE stock;

-- Bad input: a clear error, and nothing changes.
CREATE TABLE lease_snapshot AS SELECT * FROM fencing.resources;
SELECT t.error_of($$SELECT fencing.acquire(NULL, 'a', '1 s')$$);
SELECT t.error_of($$SELECT fencing.acquire('', 'a', '1 s')$$);
SELECT t.error_of($$SELECT fencing.acquire('r', NULL, '1 s')$$);
SELECT t.error_of($$SELECT fencing.acquire('r', '', '1 s')$$);
SELECT t.error_of($$SELECT fencing.acquire('r', 'a', NULL)$$);
SELECT t.error_of($$SELECT fencing.acquire('r', 'a', '0 s')$$);
SELECT t.error_of($$SELECT fencing.acquire('r', 'a', '-5 s')$$);
SELECT t.error_of($$SELECT fencing.acquire('r', 'a', '1 day -25 hours')$$);
SELECT t.error_of($$SELECT fencing.acquire('r', 'a', '1000 years')$$);
SELECT t.error_of($$SELECT fencing.acquire('r', 'a', '367 days')$$);
SELECT t.error_of($$SELECT fencing.acquire('r', 'a', '1 month -31 days')$$);
SELECT t.error_of($$SELECT fencing.renew(NULL, 'a', 1, '1 s')$$);
SELECT t.error_of($$SELECT fencing.renew('res:1', '', 1, '1 s')$$);
SELECT t.error_of($$SELECT fencing.renew('res:1', 'bob', NULL, '1 s')$$);
SELECT t.error_of($$SELECT fencing.renew('res:1', 'bob', 0, '1 s')$$);
SELECT t.error_of($$SELECT fencing.renew('res:1', 'bob', -1, '1 s')$$);
SELECT t.error_of(format($$SELECT fencing.renew('res:1', 'bob', %s, '0 s')$$, :t2));
SELECT t.error_of(format($$SELECT fencing.renew('res:1', 'bob', %s, NULL)$$, :t2));
SELECT t.error_of($$SELECT fencing.release('res:1', NULL, 1)$$);
SELECT t.error_of($$SELECT fencing.release('', 'bob', 1)$$);
SELECT t.error_of($$SELECT fencing.release('res:1', 'bob', 0)$$);
SELECT t.error_of($$SELECT fencing.release('res:1', 'bob', NULL)$$);
SELECT count(*) AS changed_rows FROM (
	SELECT * FROM fencing.resources EXCEPT SELECT * FROM lease_snapshot
	UNION ALL
	SELECT * FROM lease_snapshot EXCEPT SELECT * FROM fencing.resources) d;
DROP TABLE lease_snapshot;

-- Ordinary roles: every function and the view, but no write to the state.
CREATE ROLE regress_fencing_worker;
GRANT USAGE ON SCHEMA fencing TO regress_fencing_worker;
SET ROLE regress_fencing_worker;
SELECT fencing.acquire('res:worker', 'w', '10 s') AS tw \gset
SELECT fencing.renew('res:worker', 'w', :tw, '10 s') AS renewed;
SELECT fencing.fence('res:worker', :tw) AS previous_mark;
SELECT holder, live FROM fencing.leases WHERE resource = 'res:worker';
SELECT t.error_of($$UPDATE fencing.resources SET token = 1$$);
SELECT t.error_of($$DELETE FROM fencing.resources$$);
SELECT t.error_of($$INSERT INTO fencing.resources (resource) VALUES ('forged')$$);
SELECT t.error_of($$UPDATE fencing.fences SET token = 1$$);
SELECT t.error_of($$DELETE FROM fencing.fences$$);
SELECT t.error_of($$SELECT setval('fencing.token_seq', 1)$$);
SELECT t.error_of($$SELECT nextval('fencing.token_seq')$$);
SELECT t.error_of($$ALTER SEQUENCE fencing.token_seq RESTART$$);
SELECT t.error_of($$TRUNCATE fencing.resources$$);
SELECT t.error_of($$SELECT fencing_internal._grant_token(1)$$);
SELECT fencing.release('res:worker', 'w', :tw) AS released;
RESET ROLE;
-- acquire()'s token function issues tokens inside acquire()'s UPDATE only:
-- not even for the owner, nor in the transaction of an acquire() before.
SELECT t.error_of($$SELECT fencing_internal._grant_token(1)$$);
BEGIN;
SELECT fencing.acquire('res:worker', 'w2', '10 s') IS NOT NULL AS granted;
SELECT t.error_of($$SELECT fencing_internal._grant_token(1)$$);
SELECT t.error_of($$SELECT fencing_internal._grant_token(NULL)$$);
SELECT t.error_of($$SELECT fencing_internal._grant_token(1, 0)$$);
SELECT t.error_of($$SELECT fencing_internal._grant_token(1, NULL)$$);
ROLLBACK;
-- A released lease and an expired one are granted again in one statement,
-- above the last token and the resource's floor.
SELECT fencing.acquire('res:again', 'a', '10 s') AS ta \gset
SELECT fencing.release('res:again', 'a', :ta) AS released;
SELECT fencing.acquire('res:again', 'b', '1 ms') AS tb \gset
SELECT :tb > :ta AS above_last;
SELECT pg_sleep(0.01);
INSERT INTO fencing.resource_floors (prefix, token) VALUES ('res:again', :tb + 10);
SELECT fencing.acquire('res:again', 'c', '10 s') AS tc \gset
SELECT :tc > :tb + 10 AS above_floor, holder, token = :tc AS token_stored, live
FROM fencing.leases WHERE resource = 'res:again';
SELECT fencing.acquire('res:again', 'd', '10 s') IS NULL AS live_lease_refused;
DELETE FROM fencing.resource_floors WHERE prefix = 'res:again';
-- The functions that write lease, fence and mark state are the only SECURITY DEFINER
-- ones, and pin search_path.
SELECT p.proname, p.prosecdef, p.proconfig FROM pg_proc p
WHERE p.pronamespace IN ('fencing'::regnamespace, 'fencing_internal'::regnamespace) AND p.prosecdef
ORDER BY 1;
DROP OWNED BY regress_fencing_worker;
DROP ROLE regress_fencing_worker;
