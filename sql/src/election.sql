-- Leader election on leases: an election is the lease on the resource named
-- by the election, its leader that lease's holder.  campaign() and resign()
-- are acquire() and release() plus a notification on channel
-- fencing_election (payload: the election's name) that PostgreSQL delivers
-- at the commit of the grant or the release, none after a rollback; an
-- expiry without a successor sends none (observers read leader() again at
-- the leader's expires_at).  Definitions (CREATE OR REPLACE); after views.sql
-- (leader() reads fencing.leases).
--
-- They run with the caller's rights (SECURITY INVOKER): the lease is
-- acquire()'s and release()'s, with their rights, checks and errors, and
-- calling these needs EXECUTE on those; pg_notify() is open to every role.
-- search_path is pinned and every name is qualified, so nothing the caller
-- defines is picked up.

-- The longest election name: a NOTIFY payload holds less than 8000 bytes.
CREATE OR REPLACE FUNCTION fencing_internal._check_election(election text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF pg_catalog.octet_length(election) OPERATOR(pg_catalog.>) 1000 THEN
		RAISE EXCEPTION 'an election name is at most 1000 bytes, got %', pg_catalog.octet_length(election)
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = 'The name is the payload of the notification on channel fencing_election.';
	END IF;
END
$$;
COMMENT ON FUNCTION fencing_internal._check_election(text) IS
'internal: refuses (22023) an election name longer than a notification of campaign() and resign() carries';

CREATE OR REPLACE FUNCTION fencing.campaign(election text, candidate text, ttl interval,
                                            wait interval DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	token bigint;
BEGIN
	PERFORM fencing_internal._check_election(election);
	token := fencing.acquire(election, candidate, ttl, wait);
	IF token IS NOT NULL THEN
		PERFORM pg_catalog.pg_notify('fencing_election', election);
	END IF;
	RETURN token;
END
$$;
COMMENT ON FUNCTION fencing.campaign(text, text, interval, interval) IS
'fencing.acquire() of the election''s lease (waiting up to wait, first come first served): the leader''s token, NULL if not granted; a grant notifies channel fencing_election at commit';

CREATE OR REPLACE FUNCTION fencing.resign(election text, candidate text, token bigint)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	released boolean;
BEGIN
	PERFORM fencing_internal._check_election(election);
	released := fencing.release(election, candidate, token);
	IF released THEN
		PERFORM pg_catalog.pg_notify('fencing_election', election);
	END IF;
	RETURN released;
END
$$;
COMMENT ON FUNCTION fencing.resign(text, text, bigint) IS
'fencing.release() of the leader''s lease: false if it was lost; a release notifies channel fencing_election at commit';

-- Anyone may read the leader, as anyone may read fencing.leases.
CREATE OR REPLACE FUNCTION fencing.leader(election text)
RETURNS TABLE(holder text, token bigint, granted_at timestamptz, expires_at timestamptz)
LANGUAGE sql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT l.holder, l.token, l.granted_at, l.expires_at FROM fencing.leases l
	WHERE l.resource OPERATOR(pg_catalog.=) election AND l.live
$$;
GRANT EXECUTE ON FUNCTION fencing.leader(text) TO PUBLIC;
COMMENT ON FUNCTION fencing.leader(text) IS
'the live lease of an election (its leader, token, grant and expiry); no row when none is live';
