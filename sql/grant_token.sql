-- fencing_internal._grant_token() issues tokens for acquire()'s own UPDATE only: not
-- for code that runs inside that UPDATE in the same transaction and
-- savepoint (a trigger on fencing.resources that a DBA added), not even for
-- the extension owner who wrote that code.  Such a call could mint tokens no
-- lease holds, or pass a floor at the end of the generation and use its
-- tokens up for good (the sequence does not roll back).

-- Three released resources: acquire() grants each in its one UPDATE.
SELECT max(fencing.acquire('res:mint:' || i, 'a', '10 s')) AS t0 FROM generate_series(1, 3) i \gset
SELECT count(*) FILTER (WHERE fencing.release(resource, holder, token)) AS released
FROM fencing.leases WHERE resource LIKE 'res:mint:%';
CREATE TABLE t.minted (token bigint);

-- A trigger (no savepoint of its own) calling it from a statement: refused,
-- and the acquire() that ran it fails with nothing minted.
CREATE FUNCTION t.mint() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO t.minted SELECT fencing_internal._grant_token(0);
	RETURN NEW;
END
$$;
CREATE TRIGGER mint BEFORE UPDATE ON fencing.resources
	FOR EACH ROW EXECUTE FUNCTION t.mint();
SELECT t.error_of($$SELECT fencing.acquire('res:mint:1', 'b', '10 s')$$);
SELECT count(*) AS minted FROM t.minted;
DROP TRIGGER mint ON fencing.resources;

-- PL/pgSQL simple expressions run without an executor of their own.
CREATE OR REPLACE FUNCTION t.mint() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	token bigint;
BEGIN
	token := fencing_internal._grant_token(0);
	INSERT INTO t.minted VALUES (token);
	RETURN NEW;
END
$$;
CREATE TRIGGER mint AFTER UPDATE ON fencing.resources
	FOR EACH ROW EXECUTE FUNCTION t.mint();
SELECT t.error_of($$SELECT fencing.acquire('res:mint:2', 'b', '10 s')$$);
SELECT count(*) AS minted FROM t.minted;
DROP TRIGGER mint ON fencing.resources;

-- A floor just below the end of the generation: refused before anything is
-- issued (it would set fencing.token_seq there, and every later grant of the
-- database would fail with 22003 until a promotion).
CREATE OR REPLACE FUNCTION t.mint() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM fencing_internal._grant_token((((fencing.token_at(now()) >> 42) + 1) << 42) - 2);
	RETURN NEW;
END
$$;
CREATE TRIGGER mint BEFORE UPDATE ON fencing.resources
	FOR EACH ROW EXECUTE FUNCTION t.mint();
SELECT t.error_of($$SELECT fencing.acquire('res:mint:3', 'b', '10 s')$$);
DROP TRIGGER mint ON fencing.resources;

-- Nothing was granted or used up: the resources are still free, and the
-- next grants are ordinary ones, above the last and far from the end of the
-- generation.
SELECT resource, holder, live FROM fencing.leases WHERE resource LIKE 'res:mint:%' ORDER BY 1;
SELECT bool_and(t > :t0) AS above_last,
       bool_and(t < fencing.token_at(now() + interval '1 hour')) AS not_used_up
FROM (SELECT fencing.acquire('res:mint:' || i, 'b', '10 s') FROM generate_series(1, 3) i) g(t);

-- The function itself stays refused outside acquire(), whatever the argument.
SELECT t.error_of($$SELECT fencing_internal._grant_token(1)$$);

DROP FUNCTION t.mint();
DROP TABLE t.minted;
DELETE FROM fencing.resources WHERE resource LIKE 'res:mint:%';
