-- ORMs write back every column they loaded, the token column too: with
-- fencing.token set, an assignment of the row's own token is no token, and
-- the transaction's token applies (docs/design.md).

CREATE TABLE orders (id int PRIMARY KEY, status text, last_fencing_token bigint NOT NULL DEFAULT 0);
SELECT fencing.protect('orders');
INSERT INTO orders VALUES (101, 'new', 33), (102, 'new', 33);

-- The GC-pause schedule as an ORM writes it: worker A loaded the row at
-- token 33 (status 'new', last_fencing_token 33); worker B holds token 34
-- and saves first, writing back the 33 it loaded: accepted, and the row
-- advances to 34.
BEGIN;
SET LOCAL fencing.token = 34;
UPDATE orders SET status = 'shipped by B', last_fencing_token = 33 WHERE id = 101;
COMMIT;
SELECT * FROM orders WHERE id = 101;
-- A wakes and saves under its token 33, writing back the 33 it loaded: that
-- is its transaction's token, and stale: 23T01, nothing changes.
BEGIN;
SET LOCAL fencing.token = 33;
UPDATE orders SET status = 'cancelled by A', last_fencing_token = 33 WHERE id = 101;
ROLLBACK;
-- A reloads (it now sees 34) and saves under 33: the write-back of 34 is no
-- token, the transaction's 33 is: stale, 23T01.
BEGIN;
SET LOCAL fencing.token = 33;
UPDATE orders SET status = 'cancelled by A', last_fencing_token = 34 WHERE id = 101;
ROLLBACK;
-- Most often A loaded the row before the token it holds ever wrote it (here
-- at 32): its write-back of 32 is then neither the row's token nor its own,
-- and its own is stale: 23T01, as its lost lock deserves.
BEGIN;
SET LOCAL fencing.token = 33;
UPDATE orders SET status = 'cancelled by A', last_fencing_token = 32 WHERE id = 101;
ROLLBACK;
SELECT * FROM orders WHERE id = 101;

-- A third value, neither the row's token nor the transaction's, from a
-- transaction whose token the row accepts: 22023, nothing changes.
BEGIN;
SET LOCAL fencing.token = 40;
UPDATE orders SET status = 'two tokens', last_fencing_token = 39 WHERE id = 101;
ROLLBACK;
SELECT * FROM orders WHERE id = 101;
-- Also when that value would be accepted on its own (above the stored token).
BEGIN;
SET LOCAL fencing.token = 35;
UPDATE orders SET status = 'two tokens', last_fencing_token = 50 WHERE id = 101;
ROLLBACK;
-- Zero, negative and NULL assignments that are not the row's value keep their own errors.
BEGIN;
SET LOCAL fencing.token = 35;
SELECT t.error_of($$UPDATE orders SET last_fencing_token = NULL WHERE id = 101$$);
SELECT t.error_of($$UPDATE orders SET last_fencing_token = 0 WHERE id = 101$$);
SELECT t.error_of($$UPDATE orders SET last_fencing_token = -1 WHERE id = 101$$);
ROLLBACK;
SELECT * FROM orders WHERE id = 101;

-- Assigning the transaction's token is that token.
BEGIN;
SET LOCAL fencing.token = 35;
UPDATE orders SET status = 'packed@35', last_fencing_token = 35 WHERE id = 101;
COMMIT;
SELECT * FROM orders WHERE id = 101;
-- A write-back of the stored token under an equal transaction token (the
-- same holder saving twice): accepted in monotonic mode.
BEGIN;
SET LOCAL fencing.token = 35;
UPDATE orders SET status = 'packed@35 again', last_fencing_token = 35 WHERE id = 101;
COMMIT;
SELECT * FROM orders WHERE id = 101;

-- A multi-row write-back: each row's own value is its write-back, and the
-- statement presents the transaction's token for every row.
UPDATE orders SET last_fencing_token = 34 WHERE id = 102;
BEGIN;
SET LOCAL fencing.token = 36;
UPDATE orders o SET status = 'bulk', last_fencing_token = o.last_fencing_token;
COMMIT;
SELECT * FROM orders ORDER BY id;

-- Without fencing.token, nothing changed: the assigned value is the token.
UPDATE orders SET status = 'no setting', last_fencing_token = 36 WHERE id = 101;
SELECT * FROM orders WHERE id = 101;
UPDATE orders SET status = 'no setting, stale', last_fencing_token = 35 WHERE id = 101;
\echo :LAST_ERROR_SQLSTATE
UPDATE orders SET status = 'no setting, newer', last_fencing_token = 37 WHERE id = 101;
SELECT * FROM orders WHERE id = 101;
-- A value set by an earlier transaction does not count: the assigned value is the token.
SET fencing.token = 99;
UPDATE orders SET status = 'old session value', last_fencing_token = 38 WHERE id = 101;
RESET fencing.token;
SELECT * FROM orders WHERE id = 101;

-- Strict mode: the write-back of the loaded token presents the transaction's
-- token, which must be newer than the stored one.
CREATE TABLE jobs (id int PRIMARY KEY, state text, last_fencing_token bigint NOT NULL DEFAULT 0);
SELECT fencing.protect('jobs', mode => 'strict');
INSERT INTO jobs VALUES (1, 'queued', 33);
BEGIN;
SET LOCAL fencing.token = 34;
UPDATE jobs SET state = 'running@34', last_fencing_token = 33 WHERE id = 1;
COMMIT;
SELECT * FROM jobs;
-- One write per grant: the same holder's second write-back is stale.
BEGIN;
SET LOCAL fencing.token = 34;
UPDATE jobs SET state = 'again@34', last_fencing_token = 34 WHERE id = 1;
ROLLBACK;
-- An older holder's write-back: stale.
BEGIN;
SET LOCAL fencing.token = 33;
UPDATE jobs SET state = 'late@33', last_fencing_token = 34 WHERE id = 1;
ROLLBACK;
-- A third value: 22023; from a transaction whose token the row no longer accepts: 23T01.
BEGIN;
SET LOCAL fencing.token = 36;
UPDATE jobs SET state = 'two tokens', last_fencing_token = 35 WHERE id = 1;
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = 34;
UPDATE jobs SET state = 'two tokens', last_fencing_token = 35 WHERE id = 1;
ROLLBACK;
SELECT * FROM jobs;

-- Upsert: DO UPDATE SET last_fencing_token = excluded.last_fencing_token.
-- The proposed row took fencing.token (its column was 0), so EXCLUDED
-- carries the transaction's token: accepted, the row advances.
BEGIN;
SET LOCAL fencing.token = 40;
INSERT INTO orders VALUES (101, 'upserted@40', 0) ON CONFLICT (id)
DO UPDATE SET status = excluded.status, last_fencing_token = excluded.last_fencing_token;
COMMIT;
SELECT * FROM orders WHERE id = 101;
-- An ORM's upsert that proposes the row as it loaded it (token 40) under a newer token: the
-- proposed row's explicit 40 reaches the conflicting row, where 40 is its own token: the
-- transaction's 41 applies.
BEGIN;
SET LOCAL fencing.token = 41;
INSERT INTO orders VALUES (101, 'upserted@41', 40) ON CONFLICT (id)
DO UPDATE SET status = excluded.status, last_fencing_token = excluded.last_fencing_token;
COMMIT;
SELECT * FROM orders WHERE id = 101;
-- The same from an older holder: stale, nothing changes.
BEGIN;
SET LOCAL fencing.token = 39;
INSERT INTO orders VALUES (101, 'upserted@39', 41) ON CONFLICT (id)
DO UPDATE SET status = excluded.status, last_fencing_token = excluded.last_fencing_token;
ROLLBACK;
-- A proposed token that is neither the row's nor the transaction's: 22023.
BEGIN;
SET LOCAL fencing.token = 43;
INSERT INTO orders VALUES (101, 'upserted@42', 42) ON CONFLICT (id)
DO UPDATE SET status = excluded.status, last_fencing_token = excluded.last_fencing_token;
ROLLBACK;
SELECT * FROM orders WHERE id = 101;
-- Without fencing.token, EXCLUDED's token is the token, as before.
INSERT INTO orders VALUES (101, 'upserted@42', 42) ON CONFLICT (id)
DO UPDATE SET status = excluded.status, last_fencing_token = excluded.last_fencing_token;
SELECT * FROM orders WHERE id = 101;

-- MERGE whose matched actions all assign the token column: each row's
-- write-back presents the transaction's token, a third value is refused.
CREATE TABLE feed (id int, status text, tok bigint);
INSERT INTO feed VALUES (101, 'merged', 42), (102, 'merged', 36);
BEGIN;
SET LOCAL fencing.token = 44;
MERGE INTO orders o USING feed f ON o.id = f.id
WHEN MATCHED THEN UPDATE SET status = f.status, last_fencing_token = f.tok;
COMMIT;
SELECT * FROM orders ORDER BY id;
BEGIN;
SET LOCAL fencing.token = 45;
MERGE INTO orders o USING feed f ON o.id = f.id
WHEN MATCHED THEN UPDATE SET status = 'merged twice', last_fencing_token = f.tok;
ROLLBACK;
-- A write-back by MERGE under an older token: stale.
BEGIN;
SET LOCAL fencing.token = 43;
MERGE INTO orders o USING feed f ON o.id = f.id
WHEN MATCHED THEN UPDATE SET status = 'late merge', last_fencing_token = o.last_fencing_token;
ROLLBACK;
SELECT * FROM orders ORDER BY id;

-- Partitioned tables: the rule holds in every partition, and a row that
-- moves to another partition carries the transaction's token into it.
CREATE TABLE shipments (region text, id int, status text,
	last_fencing_token bigint NOT NULL DEFAULT 0, PRIMARY KEY (region, id)) PARTITION BY LIST (region);
CREATE TABLE shipments_eu PARTITION OF shipments FOR VALUES IN ('eu');
CREATE TABLE shipments_us PARTITION OF shipments FOR VALUES IN ('us');
SELECT fencing.protect('shipments');
INSERT INTO shipments VALUES ('eu', 1, 'new', 33);
BEGIN;
SET LOCAL fencing.token = 34;
UPDATE shipments SET status = 'packed@34', last_fencing_token = 33 WHERE region = 'eu' AND id = 1;
COMMIT;
SELECT tableoid::regclass, * FROM shipments;
BEGIN;
SET LOCAL fencing.token = 33;
UPDATE shipments SET status = 'late@33', last_fencing_token = 34 WHERE region = 'eu' AND id = 1;
ROLLBACK;
-- A move under a newer token, writing back the loaded 34: the row lands in
-- shipments_us with 35, and the key it left keeps 35 as its mark.
BEGIN;
SET LOCAL fencing.token = 35;
UPDATE shipments SET region = 'us', status = 'moved@35', last_fencing_token = 34
WHERE region = 'eu' AND id = 1;
COMMIT;
SELECT tableoid::regclass, * FROM shipments;
SELECT relid::regclass, token FROM fencing.deleted_keys
WHERE relid::regclass::text LIKE 'shipments%' AND key = t.mark_key(t.img('eu'), t.img(1));
INSERT INTO shipments VALUES ('eu', 1, 'back@34', 34);
\echo :LAST_ERROR_SQLSTATE
-- A move under an older token: stale, nothing moves.
BEGIN;
SET LOCAL fencing.token = 34;
UPDATE shipments SET region = 'eu', status = 'moved back@34', last_fencing_token = 35
WHERE region = 'us' AND id = 1;
ROLLBACK;
-- A move with a third value: 22023.
BEGIN;
SET LOCAL fencing.token = 36;
UPDATE shipments SET region = 'eu', status = 'two tokens', last_fencing_token = 30
WHERE region = 'us' AND id = 1;
ROLLBACK;
SELECT tableoid::regclass, * FROM shipments;

-- fenced_update() assigns the token column with its own token argument: that
-- is the write's token whatever fencing.token holds.
INSERT INTO orders VALUES (103, 'new', 33);
BEGIN;
SET LOCAL fencing.token = 90;
-- Its token is neither the row's nor the transaction's: applied with 34.
SELECT fencing.fenced_update('orders', '{"id": 103}', 34, '{"status": "fenced@34"}');
SELECT * FROM orders WHERE id = 103;
-- Its token equals the row's: applied with 34, not the transaction's 90.
SELECT fencing.fenced_update('orders', '{"id": 103}', 34, '{"status": "fenced@34 again"}');
SELECT * FROM orders WHERE id = 103;
COMMIT;
-- Under an older transaction token too; stale is stale, and skip still skips.
BEGIN;
SET LOCAL fencing.token = 10;
SELECT fencing.fenced_update('orders', '{"id": 103}', 33, '{"status": "fenced@33"}', 'skip');
SELECT fencing.fenced_update('orders', '{"id": 103}', 34, '{"status": "fenced@34, token 10"}');
COMMIT;
BEGIN;
SET LOCAL fencing.token = 90;
SELECT fencing.fenced_update('orders', '{"id": 103}', 33, '{"status": "fenced@33"}');
ROLLBACK;
SELECT * FROM orders WHERE id = 103;
-- On a partitioned table, through the parent.
BEGIN;
SET LOCAL fencing.token = 90;
SELECT fencing.fenced_update('shipments', '{"region": "us", "id": 1}', 35, '{"status": "fenced@35"}');
COMMIT;
SELECT tableoid::regclass, * FROM shipments;
-- The exemption is fenced_update()'s row's alone: a statement that a
-- trigger of its UPDATE runs is a plain statement, and a write-back in it
-- presents the transaction's token (here: stale 30 against row 102's 44).
CREATE FUNCTION t.write_back_neighbour() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	UPDATE orders SET status = 'by a trigger', last_fencing_token = last_fencing_token
	WHERE id = 102;
	RETURN NEW;
END
$$;
CREATE TRIGGER a_neighbour BEFORE UPDATE ON orders FOR EACH ROW WHEN (OLD.id = 103)
EXECUTE FUNCTION t.write_back_neighbour();
BEGIN;
SET LOCAL fencing.token = 30;
SELECT fencing.fenced_update('orders', '{"id": 103}', 50, '{"status": "fenced@50"}');
ROLLBACK;
-- ... and a third value in it is two tokens, even fenced_update()'s own.
CREATE OR REPLACE FUNCTION t.write_back_neighbour() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	UPDATE orders SET status = 'by a trigger', last_fencing_token = 50 WHERE id = 102;
	RETURN NEW;
END
$$;
BEGIN;
SET LOCAL fencing.token = 46;
SELECT fencing.fenced_update('orders', '{"id": 103}', 50, '{"status": "fenced@50"}');
ROLLBACK;
-- With a newer transaction token, the trigger's write-back is accepted beside it.
CREATE OR REPLACE FUNCTION t.write_back_neighbour() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	UPDATE orders SET status = 'by a trigger', last_fencing_token = last_fencing_token
	WHERE id = 102;
	RETURN NEW;
END
$$;
BEGIN;
SET LOCAL fencing.token = 45;
SELECT fencing.fenced_update('orders', '{"id": 103}', 50, '{"status": "fenced@50"}');
COMMIT;
DROP TRIGGER a_neighbour ON orders;
SELECT * FROM orders ORDER BY id;
