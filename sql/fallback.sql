-- The SQL-only fallback of docs/where-it-runs.md (docs/fallback.sql) on a
-- server that does not preload fencing, in a database without the
-- extension: the GC-pause schedule, A's stale write refused (0 rows), and
-- what the fallback does not protect against, as that page says.
SELECT current_database() AS regress_db \gset
CREATE DATABASE fencing_fallback;
\c fencing_fallback
-- No extension, and the module is not loaded in this session.
SELECT count(*) AS extension FROM pg_extension WHERE extname = 'fencing';
SELECT count(*) AS settings FROM pg_settings WHERE name LIKE 'fencing.%';
\i docs/fallback.sql
CREATE TABLE orders (id text PRIMARY KEY, status text NOT NULL,
                     last_fencing_token bigint NOT NULL DEFAULT 0);
INSERT INTO orders VALUES ('order:101', 'new');
ALTER SEQUENCE lease_tokens RESTART 33;
-- t=0: A acquires order:101 and gets 33; B is refused while A's lease lives.
SELECT lease_acquire('order:101', 'A', '2 s') AS a_token \gset
SELECT :a_token AS a_token;
SELECT lease_acquire('order:101', 'B', '2 s') AS b_refused;
SELECT lease_acquire('order:101', 'B', '0 s');   -- 22023
-- A pauses past its TTL; the lease expires.
SELECT pg_sleep(2.1);
SELECT lease_renew('order:101', 'A', :a_token, '2 s') AS a_renewed;
-- B acquires and gets 34, then writes: accepted (1 row).
SELECT lease_acquire('order:101', 'B', '10 s') AS b_token \gset
SELECT :b_token AS b_token;
UPDATE orders SET status = 'paid', last_fencing_token = :b_token
WHERE id = 'order:101' AND last_fencing_token <= :b_token;
SELECT :ROW_COUNT AS rows;
-- A wakes and writes with 33: refused, 0 rows updated.
UPDATE orders SET status = 'cancelled', last_fencing_token = :a_token
WHERE id = 'order:101' AND last_fencing_token <= :a_token;
SELECT :ROW_COUNT AS rows;
-- The same as an upsert: 0 rows.
PREPARE a_upsert(bigint) AS
INSERT INTO orders VALUES ('order:101', 'cancelled', $1)
ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status,
    last_fencing_token = EXCLUDED.last_fencing_token
WHERE orders.last_fencing_token <= EXCLUDED.last_fencing_token;
EXECUTE a_upsert(:a_token);
SELECT :ROW_COUNT AS rows;
-- B, the holder, writes again with 34: accepted.
UPDATE orders SET status = 'shipped', last_fencing_token = :b_token
WHERE id = 'order:101' AND last_fencing_token <= :b_token;
SELECT :ROW_COUNT AS rows;
SELECT * FROM orders;
SELECT lease_release('order:101', 'A', :a_token) AS a_released;
SELECT lease_release('order:101', 'B', :b_token) AS b_released;
-- A later holder's token is above B's.
SELECT lease_acquire('order:101', 'C', '10 s') > :b_token AS c_above_b;
-- What it does not protect against. A writer that forgets the condition
-- writes whatever its token:
UPDATE orders SET status = 'cancelled' WHERE id = 'order:101';
SELECT :ROW_COUNT AS rows;
-- and a deleted key keeps no mark: after B deletes the row with 34, A's
-- stale insert with 33 brings it back.
DELETE FROM orders WHERE id = 'order:101' AND last_fencing_token <= :b_token;
SELECT :ROW_COUNT AS rows;
EXECUTE a_upsert(:a_token);
SELECT :ROW_COUNT AS rows;
SELECT * FROM orders;
\c :regress_db
DROP DATABASE fencing_fallback;
