-- fencing.acquire(..., wait) and fencing.renew_all(): the arguments, the
-- holder that asks again, and what a wait does within one session.  Waits
-- between sessions: test/isolation/specs/lease_wait_*.spec.

-- wait: NULL or zero is a try, a negative one is refused.
SELECT fencing.acquire('wait:1', 'alice', '10 s', NULL) AS w1 \gset
SELECT :w1 > 0 AS granted_with_null_wait;
SELECT fencing.acquire('wait:1', 'bob', '10 s', '0 s') IS NULL AS zero_wait_is_a_try;
SELECT t.error_of($$SELECT fencing.acquire('wait:1', 'bob', '10 s', '-1 s')$$);
SELECT t.error_of($$SELECT fencing.acquire('wait:1', 'bob', '10 s', '1 day -25 hours')$$);
-- The other arguments as without wait, before any waiting.
SELECT t.error_of($$SELECT fencing.acquire('wait:1', 'bob', '0 s', '1 s')$$);
SELECT t.error_of($$SELECT fencing.acquire('wait:1', NULL, '1 s', '1 s')$$);
SELECT t.error_of($$SELECT fencing.acquire('', 'bob', '1 s', '1 s')$$);

-- A free lease is granted at once; a held one after the wait is NULL.
SELECT clock_timestamp() AS started \gset
SELECT fencing.acquire('wait:2', 'bob', '10 s', '5 s') IS NOT NULL AS granted_at_once;
SELECT clock_timestamp() - :'started' < '1 s' AS without_waiting;
SELECT clock_timestamp() AS started \gset
SELECT fencing.acquire('wait:1', 'bob', '10 s', '300 ms') IS NULL AS not_granted;
SELECT clock_timestamp() - :'started' >= '300 ms' AS waited_it_out;

-- lock_timeout ends a wait with 55P03 (a wait longer than it), a
-- statement_timeout or cancel with 57014.
SET lock_timeout = '200ms';
SELECT t.error_of($$SELECT fencing.acquire('wait:1', 'bob', '10 s', '10 s')$$);
SELECT fencing.acquire('wait:1', 'bob', '10 s', '100 ms') IS NULL AS wait_shorter_than_lock_timeout;
RESET lock_timeout;
SET statement_timeout = '200ms';
SELECT fencing.acquire('wait:1', 'bob', '10 s', '10 s');
\echo :LAST_ERROR_SQLSTATE
RESET statement_timeout;
-- Caught in a PL/pgSQL block, the same: the wait's own subtransaction is
-- gone, the block's handler ends the block's.
SET lock_timeout = '200ms';
DO $$
BEGIN
	PERFORM fencing.acquire('wait:1', 'bob', '10 s', '10 s');
EXCEPTION WHEN lock_not_available THEN
	RAISE NOTICE 'caught %', SQLSTATE;
END
$$;
RESET lock_timeout;
-- Nobody waits any more: a try is granted once the lease is free.
SELECT fencing.release('wait:1', 'alice', :w1) AS released;
SELECT fencing.acquire('wait:1', 'carol', '10 s') IS NOT NULL AS granted_to_a_try;

-- Waiting needs a fresh snapshot for each look: refused (0A000) in
-- REPEATABLE READ and SERIALIZABLE, also for a free lease; a try is not.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT t.error_of($$SELECT fencing.acquire('wait:3', 'bob', '10 s', '1 s')$$);
ROLLBACK;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT t.error_of($$SELECT fencing.acquire('wait:3', 'bob', '10 s', '1 s')$$);
ROLLBACK;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT fencing.acquire('wait:3', 'bob', '10 s', '0 s') IS NOT NULL AS a_try_is_fine;
ROLLBACK;
-- A read-only transaction cannot be granted anything: refused before waiting.
BEGIN READ ONLY;
SELECT t.error_of($$SELECT fencing.acquire('wait:1', 'bob', '10 s', '10 s')$$);
ROLLBACK;

-- The holder of a live lease that asks for it again gets NULL at once, with
-- or without wait (it never waits for itself), and a NOTICE 01T01 that names
-- its token.  (A lease row written here with a known token.)
INSERT INTO fencing.resources (resource, holder, token, granted_at, expires_at)
VALUES ('wait:own', 'alice', 42, clock_timestamp(), clock_timestamp() + '1 hour');
SELECT fencing.acquire('wait:own', 'alice', '10 s') IS NULL AS refused;
SELECT clock_timestamp() AS started \gset
SELECT fencing.acquire('wait:own', 'alice', '10 s', '10 s') IS NULL AS refused_at_once;
SELECT clock_timestamp() - :'started' < '1 s' AS without_waiting;
\set VERBOSITY sqlstate
SELECT fencing.acquire('wait:own', 'alice', '10 s', '10 s') IS NULL AS refused_with_01T01;
\set VERBOSITY default
-- Another holder hears nothing; the lease is unchanged.
SELECT fencing.acquire('wait:own', 'bob', '10 s') IS NULL AS refused_silently;
SELECT holder, token, expires_at > clock_timestamp() + '50 min' AS unchanged
FROM fencing.leases WHERE resource = 'wait:own';
-- Released or expired, it is no longer the holder's: granted anew.
UPDATE fencing.resources SET expires_at = clock_timestamp() WHERE resource = 'wait:own';
SELECT fencing.acquire('wait:own', 'alice', '10 s') > 42 AS granted_again;

-- renew_all(): one row per lease named, in the order given; renewed only
-- what the holder holds live with that token.
SELECT fencing.acquire('all:1', 'w', '10 s') AS a1 \gset
SELECT fencing.acquire('all:2', 'w', '10 s') AS a2 \gset
SELECT fencing.acquire('all:3', 'other', '10 s') AS a3 \gset
SELECT fencing.acquire('all:4', 'w', '10 s') AS a4 \gset
UPDATE fencing.resources SET expires_at = clock_timestamp() WHERE resource = 'all:4';
SELECT fencing.acquire('all:5', 'w', '10 s') AS a5 \gset
SELECT fencing.release('all:5', 'w', :a5) AS released;
SELECT resource, token = ANY (ARRAY[:a1, :a2, :a3, :a4, :a5]::bigint[]) AS known_token, renewed,
       expires_at - clock_timestamp() > '50 s' AS extended, expires_at IS NULL AS no_expiry
FROM fencing.renew_all('w', '60 s',
                       ARRAY['all:2', 'all:1', 'all:3', 'all:4', 'all:5', 'all:none', 'all:stale'],
                       ARRAY[:a2, :a1, :a3, :a4, :a5, 7, 1]::bigint[]);
-- A wrong token renews nothing.
SELECT renewed FROM fencing.renew_all('w', '60 s', ARRAY['all:1'], ARRAY[:a1 + 1]);
SELECT resource, holder, expires_at - clock_timestamp() > '50 s' AS extended
FROM fencing.leases WHERE resource LIKE 'all:%' ORDER BY resource;
-- Nothing named, nothing returned.
SELECT count(*) FROM fencing.renew_all('w', '60 s', '{}', '{}');
-- Bad arguments: as renew()'s, and arrays of one length without NULLs.
SELECT t.error_of($$SELECT fencing.renew_all(NULL, '1 s', ARRAY['a'], ARRAY[1::bigint])$$);
SELECT t.error_of($$SELECT fencing.renew_all('', '1 s', ARRAY['a'], ARRAY[1::bigint])$$);
SELECT t.error_of($$SELECT fencing.renew_all('w', NULL, ARRAY['a'], ARRAY[1::bigint])$$);
SELECT t.error_of($$SELECT fencing.renew_all('w', '0 s', ARRAY['a'], ARRAY[1::bigint])$$);
SELECT t.error_of($$SELECT fencing.renew_all('w', '367 days', ARRAY['a'], ARRAY[1::bigint])$$);
SELECT t.error_of($$SELECT fencing.renew_all('w', '1 s', NULL, ARRAY[1::bigint])$$);
SELECT t.error_of($$SELECT fencing.renew_all('w', '1 s', ARRAY['a'], NULL)$$);
SELECT t.error_of($$SELECT fencing.renew_all('w', '1 s', ARRAY['a', 'b'], ARRAY[1::bigint])$$);
SELECT t.error_of($$SELECT fencing.renew_all('w', '1 s', ARRAY['a', NULL], ARRAY[1, 2]::bigint[])$$);
SELECT t.error_of($$SELECT fencing.renew_all('w', '1 s', ARRAY['a', 'b'], ARRAY[1, NULL]::bigint[])$$);
SELECT t.error_of($$SELECT fencing.renew_all('w', '1 s', ARRAY['a', ''], ARRAY[1, 2]::bigint[])$$);
SELECT t.error_of($$SELECT fencing.renew_all('w', '1 s', ARRAY['a', 'b'], ARRAY[1, 0]::bigint[])$$);
SELECT t.error_of($$SELECT fencing.renew_all('w', '1 s', ARRAY['a', 'b'], ARRAY[1, -2]::bigint[])$$);
SELECT t.error_of($$SELECT fencing.renew_all('w', '1 s', ARRAY['a', 'a'], ARRAY[1, 2]::bigint[])$$);
SELECT t.error_of($$SELECT fencing.renew_all('w', '1 s', ARRAY[['a'], ['b']], ARRAY[[1], [2]]::bigint[])$$);
