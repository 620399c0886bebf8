-- The GC-pause split-brain of docs/design.md, replayed step by step.
-- A lock manager hands out tokens 33 and 34 (a sequence plays its counter);
-- the storage is a protected table.  The stale write of the paused worker
-- must be refused, and the row must keep the newer worker's data.

CREATE SEQUENCE lock_counter START 33;
CREATE TABLE orders (id text PRIMARY KEY, status text NOT NULL, written_by text);
INSERT INTO orders VALUES ('order:101', 'new', NULL);
SELECT fencing.protect('orders');

-- 1. Through fencing.fenced_update().
-- t=0   worker A acquires the lease on order:101 (TTL 10 s) and gets token 33.
SELECT nextval('lock_counter') AS token_a \gset
-- t=2   A starts its write and is paused (GC) until t=12.
-- t=10  the lease expires.
-- t=13  worker B acquires the lease and gets token 34; B writes: accepted.
SELECT nextval('lock_counter') AS token_b \gset
SELECT :token_a AS a, :token_b AS b;
SELECT fencing.fenced_update('orders', '{"id": "order:101"}', :token_b,
                             '{"status": "paid", "written_by": "B"}');
-- A wakes and writes with token 33: rejected (33 is older than 34).
SELECT fencing.fenced_update('orders', '{"id": "order:101"}', :token_a,
                             '{"status": "cancelled", "written_by": "A"}');
\echo :LAST_ERROR_SQLSTATE
-- The row holds B's data and token 34.
SELECT * FROM orders;

-- 2. The same schedule through plain SQL on the protected table, on order:102.
INSERT INTO orders VALUES ('order:102', 'new', NULL);  -- no token at all
\echo :LAST_ERROR_SQLSTATE
INSERT INTO orders VALUES ('order:102', 'new', NULL, 1);
SELECT setval('lock_counter', 32);
-- t=0   A acquires: token 33.  t=2 A is paused.  t=10 the lease expires.
SELECT nextval('lock_counter') AS token_a \gset
-- t=13  B acquires: token 34, and writes.
SELECT nextval('lock_counter') AS token_b \gset
BEGIN;
SET LOCAL fencing.token = :token_b;
UPDATE orders SET status = 'shipped', written_by = 'B' WHERE id = 'order:102';
COMMIT;
-- A wakes and writes with token 33, from fencing.token ...
BEGIN;
SET LOCAL fencing.token = :token_a;
UPDATE orders SET status = 'cancelled', written_by = 'A' WHERE id = 'order:102';
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
-- ... or in the token column: rejected both ways.
UPDATE orders SET status = 'cancelled', written_by = 'A', last_fencing_token = :token_a
WHERE id = 'order:102';
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM orders ORDER BY id;

DROP TABLE orders;
DROP SEQUENCE lock_counter;

-- 3. PostgreSQL alone as the whole system: leases from fencing.acquire()
-- (TTLs: 1 s = 100 ms).  Its tokens follow the server clock (microseconds
-- since 1970), so they differ from run to run: shown relative to A's.
CREATE TABLE accounts (id text PRIMARY KEY, balance int NOT NULL);
SELECT fencing.protect('accounts');
INSERT INTO accounts VALUES ('order:101', 100, 1);
-- t=0   A acquires the lease on order:101 (TTL 10 s) and gets a token (33 in docs/design.md).
SELECT fencing.acquire('order:101', 'worker-a', '1 s') AS token_a \gset
-- B tries too, but A's lease is live.
SELECT fencing.acquire('order:101', 'worker-b', '1 s') AS refused;
-- t=2   A starts its write and is paused (GC) until t=12; t=10 the lease expires.
SELECT pg_sleep(1.1);
SELECT resource, holder, token = :token_a AS token_a, live FROM fencing.leases WHERE resource = 'order:101';
-- t=13  B acquires the lease and gets a newer token (34); B writes: accepted.
SELECT fencing.acquire('order:101', 'worker-b', '1 s') AS token_b \gset
SELECT :token_b > :token_a AS b_newer;
SELECT fencing.fenced_update('accounts', '{"id": "order:101"}', :token_b, '{"balance": 50}');
-- A wakes: its heartbeat's renew says the lease is lost ...
SELECT fencing.renew('order:101', 'worker-a', :token_a, '1 s') AS a_still_holds;
-- ... and its late write is rejected, whichever way it writes.
\set VERBOSITY sqlstate
SELECT fencing.fenced_update('accounts', '{"id": "order:101"}', :token_a, '{"balance": 0}');
BEGIN;
SET LOCAL fencing.token = :token_a;
UPDATE accounts SET balance = 0 WHERE id = 'order:101';
ROLLBACK;
\set VERBOSITY default
SELECT id, balance, last_fencing_token = :token_b AS written_by_b FROM accounts;
SELECT fencing.release('order:101', 'worker-b', :token_b) AS b_released;
DROP TABLE accounts;
