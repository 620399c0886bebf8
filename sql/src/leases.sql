-- PostgreSQL as the lock manager: leases, fences and the highest token the
-- storage holds.  Definitions (CREATE OR REPLACE).

-- The functions that write lease and fence state run with the extension
-- owner's rights, pin search_path and check their arguments themselves.
-- acquire() with wait queues first come, first served behind the waiters of
-- the resource (src/acquire.cpp, src/lease_queue.cpp).
CREATE OR REPLACE FUNCTION fencing.acquire(resource text, holder text, ttl interval,
                                           wait interval DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'acquire'
LANGUAGE C VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION fencing.acquire(text, text, interval, interval) IS
'grants the lease on a resource if no live lease holds it (waiting up to wait, first come first served) and returns a new fencing token; NULL otherwise';

-- The token of acquire()'s grant, issued inside its UPDATE once the row is
-- locked (src/leases/leases.cpp); refused outside that statement, and to any call
-- without the random nonce that acquire() passes that statement alone (a
-- trigger on fencing.resources runs inside it, in the same transaction).
CREATE OR REPLACE FUNCTION fencing_internal._grant_token(floor bigint, nonce bigint DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'grant_token'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION fencing_internal._grant_token(bigint, bigint) FROM PUBLIC;
COMMENT ON FUNCTION fencing_internal._grant_token(bigint, bigint) IS
'internal: the token of fencing.acquire()''s grant, for its UPDATE only';

-- This server's epoch (NULL during recovery): it changes with every restart,
-- crash and promotion; a lease row written in another epoch is held until
-- its grace_until (src/state/lease_grace.cpp).
CREATE OR REPLACE FUNCTION fencing_internal._lease_epoch()
RETURNS bigint
AS 'MODULE_PATHNAME', 'fencing_lease_epoch'
LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION fencing_internal._lease_epoch() IS
'internal: this server''s epoch, which changes with every restart, crash and promotion';

-- A lease's expiry: the row's, or the later one a renewal kept in the lease
-- memory (shared memory, preloaded only) for exactly this grant
-- (src/state/lease_memory.cpp).  Reads its arguments and shared memory only.
CREATE OR REPLACE FUNCTION fencing_internal._lease_expiry(resource text, holder text, token bigint,
                                                          epoch bigint, row_expires timestamptz)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'fencing_lease_expiry'
LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION fencing_internal._lease_expiry(text, text, bigint, bigint, timestamptz) IS
'internal: a lease''s expiry, the later of its row''s and the one a renewal kept in memory';

CREATE OR REPLACE FUNCTION fencing.renew(resource text, holder text, token bigint, ttl interval)
RETURNS boolean
AS 'MODULE_PATHNAME', 'renew'
LANGUAGE C VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION fencing.renew(text, text, bigint, interval) IS
'extends a live lease held by (holder, token); false if it was lost';

-- Every lease a holder believes it holds, renewed or reported lost, in one
-- statement (src/renew_all.cpp).
CREATE OR REPLACE FUNCTION fencing.renew_all(holder text, ttl interval, resources text[],
                                             tokens bigint[])
RETURNS TABLE(resource text, token bigint, renewed boolean, expires_at timestamptz)
AS 'MODULE_PATHNAME', 'renew_all'
LANGUAGE C VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION fencing.renew_all(text, interval, text[], bigint[]) IS
'extends every live lease of the holder named by (resources[i], tokens[i]); one row each, renewed false if it was lost';

CREATE OR REPLACE FUNCTION fencing.release(resource text, holder text, token bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'release'
LANGUAGE C VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION fencing.release(text, text, bigint) IS
'ends a live lease held by (holder, token); false if it was lost';

CREATE OR REPLACE FUNCTION fencing.fence(resource text, token bigint)
RETURNS bigint
AS 'MODULE_PATHNAME', 'fence'
LANGUAGE C VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION fencing.fence(text, bigint) IS
'compares and advances a resource''s high-water mark, holding its lock until the transaction ends; returns the previous mark';

-- The highest token the storage holds: every protected table's token column,
-- deleted-key mark and truncate floor, and every token acquire() issued.  The
-- number to reseed an external token source (a Redis counter, an etcd
-- revision offset) with after it lost its state.  Not the tokens of fence():
-- any role with USAGE on the schema picks those (fence_high_water_mark()
-- reports them), and a role that owns nothing must not move the reseed value.  It reads every protected table, so it runs with the
-- owner's rights and is for the owner, or roles the owner grants it to.
-- Temporary tables are skipped: they are not storage that outlives a session
-- (and other sessions' cannot be read).
CREATE OR REPLACE FUNCTION fencing.high_water_mark()
RETURNS bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET row_security = off
AS $$
DECLARE
	t record;
	m bigint;
	result bigint;
BEGIN
	-- Marks and floors count for the relations of the registry that exist
	-- and are not temporary, as their rows do: any role may protect a
	-- temporary table of its own, and one dropped at session end or by
	-- DISCARD TEMP leaves its marks behind under an OID no relation has.
	SELECT pg_catalog.max(x) INTO result FROM (
		SELECT pg_catalog.max(d.token) FROM fencing.deleted_keys d
		WHERE d.relid IN (SELECT r.relid FROM fencing.registry r
		                  JOIN pg_catalog.pg_class c ON c.oid = r.relid
		                  WHERE c.relpersistence <> 't')
		UNION ALL SELECT pg_catalog.max(f.token) FROM fencing.floors f
		WHERE f.relid IN (SELECT r.relid FROM fencing.registry r
		                  JOIN pg_catalog.pg_class c ON c.oid = r.relid
		                  WHERE c.relpersistence <> 't')
		UNION ALL SELECT pg_catalog.max(token) FROM fencing.resources
		UNION ALL SELECT pg_catalog.max(token) FROM fencing.resource_floors) s(x);
	-- Every protected table's token column and the Citus marks tables, read
	-- in C (_highest_token): no operator, cast or function of the tables'
	-- owners is looked up, so nothing they defined runs with these rights.
	-- A marks table counts only as the one protect() made: named for a
	-- relation of the registry and owned by that relation's owner (any role
	-- may create tables in fencing_citus).
	FOR t IN SELECT r.relid AS relation, r.token_column
	         FROM fencing.registry r JOIN pg_catalog.pg_class c ON c.oid = r.relid
	         WHERE r.protected AND c.relpersistence <> 't'
	         UNION ALL
	         SELECT c.oid::regclass, 'token' FROM pg_catalog.pg_class c
	         WHERE fencing_internal._citus_schema_is_ours()
	           AND c.relnamespace = pg_catalog.to_regnamespace('fencing_citus')
	           AND c.relkind = 'r'
	           AND (c.relname = 'floors'
	                OR EXISTS (SELECT FROM fencing.registry r
	                           JOIN pg_catalog.pg_class p ON p.oid = r.relid
	                           WHERE c.relname::text = 'marks_' || r.relid::oid::text
	                             AND p.relowner = c.relowner AND p.relpersistence <> 't')) LOOP
		m := fencing_internal._highest_token(t.relation, t.token_column);
		IF m > result OR result IS NULL THEN
			result := m;
		END IF;
	END LOOP;
	IF result > 9007199254740991 THEN
		RAISE WARNING 'the highest stored token, %, is above 2^53 - 1', result
			USING DETAIL = 'A table owner stored it; clients that read numbers as doubles (JavaScript, JSON) cannot use it exactly.',
			      HINT = 'Find it with SELECT max(<token column>) on the protected tables before reseeding from it.';
	END IF;
	RETURN COALESCE(result, 0);
END
$$;
REVOKE ALL ON FUNCTION fencing.high_water_mark() FROM PUBLIC;
COMMENT ON FUNCTION fencing.high_water_mark() IS
'the highest token held by protected tables, deleted-key marks, truncate floors and leases (not fences); 0 if none';

-- The highest token fence() accepted, apart from high_water_mark(): fence()
-- takes any token from any role with USAGE on the schema, so this is what
-- callers presented, not what the storage or the lock manager vouches for.
CREATE OR REPLACE FUNCTION fencing.fence_high_water_mark()
RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT COALESCE(pg_catalog.max(f.token), 0) FROM fencing.fences f
$$;
REVOKE ALL ON FUNCTION fencing.fence_high_water_mark() FROM PUBLIC;
COMMENT ON FUNCTION fencing.fence_high_water_mark() IS
'the highest token fence() accepted (any role with USAGE may present one); 0 if none';

-- The lowest token this server's lock manager issues at a moment, in its
-- current generation: a compaction floor for "every grant older than ...".
-- Tokens of earlier generations (before the last promotion) are all below
-- it.  For the owner, as compaction is.
CREATE OR REPLACE FUNCTION fencing.token_at(at timestamptz)
RETURNS bigint
AS 'MODULE_PATHNAME', 'token_at'
LANGUAGE C STABLE STRICT;
REVOKE ALL ON FUNCTION fencing.token_at(timestamptz) FROM PUBLIC;
COMMENT ON FUNCTION fencing.token_at(timestamptz) IS
'the lowest token this server issues at that moment in its current generation (a floor for compaction)';

-- The highest value of a bigint column over a table and its partitions, read
-- in C (src/admin/protect.cpp); for high_water_mark().
CREATE OR REPLACE FUNCTION fencing_internal._highest_token(rel regclass, token_column name)
RETURNS bigint
AS 'MODULE_PATHNAME', 'highest_token'
LANGUAGE C STABLE;
COMMENT ON FUNCTION fencing_internal._highest_token(regclass, name) IS
'internal: the highest value of a bigint column of a table and its partitions, read in C';
REVOKE ALL ON FUNCTION fencing_internal._highest_token(regclass, name) FROM PUBLIC;
