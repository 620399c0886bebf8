-- fencing._grant_token() issues tokens for acquire()'s own UPDATE only: not
-- for code that runs inside that UPDATE in the same transaction and
-- savepoint (a trigger on fencing.resources that a DBA added, in SQL or
-- PL/pgSQL), not even for the extension owner who wrote that code.  Such a
-- call could mint tokens no lease holds, or pass a floor at the end of the
-- generation and use its tokens up for good (the sequence does not roll back).

SELECT fencing.acquire('res:mint', 'a', '10 s') AS t0 \gset
SELECT fencing.release('res:mint', 'a', :t0) AS released;
CREATE TABLE t.minted (token bigint);

-- A trigger (no savepoint of its own) calling it: refused, and the
-- acquire() that ran it fails with nothing minted.
CREATE FUNCTION t.mint() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO t.minted SELECT fencing._grant_token(0);
	RETURN NEW;
END
$$;
CREATE TRIGGER mint BEFORE UPDATE ON fencing.resources
	FOR EACH ROW EXECUTE FUNCTION t.mint();
SELECT t.error_of($$SELECT fencing.acquire('res:mint', 'b', '10 s')$$);
SELECT count(*) AS minted FROM t.minted;
DROP TRIGGER mint ON fencing.resources;

-- PL/pgSQL simple expressions run without an executor of their own.
CREATE OR REPLACE FUNCTION t.mint() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	token bigint;
BEGIN
	token := fencing._grant_token(0);
	INSERT INTO t.minted VALUES (token);
	RETURN NEW;
END
$$;
CREATE TRIGGER mint AFTER UPDATE ON fencing.resources
	FOR EACH ROW EXECUTE FUNCTION t.mint();
SELECT t.error_of($$SELECT fencing.acquire('res:mint', 'b', '10 s')$$);
SELECT count(*) AS minted FROM t.minted;
DROP TRIGGER mint ON fencing.resources;

-- A floor at the end of the generation: refused before anything is issued
-- (it would have set fencing.token_seq there, and every later grant of the
-- database would fail with 22003 until a promotion).
CREATE OR REPLACE FUNCTION t.mint() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM fencing._grant_token(((fencing.token_at(now()) >> 42) + 1 << 42) - 2);
	RETURN NEW;
END
$$;
CREATE TRIGGER mint BEFORE UPDATE ON fencing.resources
	FOR EACH ROW EXECUTE FUNCTION t.mint();
SELECT t.error_of($$SELECT fencing.acquire('res:mint', 'b', '10 s')$$);
DROP TRIGGER mint ON fencing.resources;

-- Nothing was granted or used up: the resource is still free and the next
-- grant is an ordinary one, above the last and far from the generation's end.
SELECT holder, live FROM fencing.leases WHERE resource = 'res:mint';
SELECT fencing.acquire('res:mint', 'b', '10 s') AS t1 \gset
SELECT :t1 > :t0 AS above_last,
       :t1 < fencing.token_at(now() + interval '1 hour') AS not_used_up;
SELECT fencing.acquire('res:mint:other', 'c', '10 s') > :t1 AS next_grant_works;

-- The function itself stays refused outside acquire(), whatever the argument.
SELECT t.error_of($$SELECT fencing._grant_token(1)$$);

DROP FUNCTION t.mint();
DROP TABLE t.minted;
DELETE FROM fencing.resources WHERE resource LIKE 'res:mint%';
