-- Fencing tokens without the extension: a lease table with a token sequence,
-- for a server that cannot load fencing (a managed service). Plain SQL and
-- PL/pgSQL only; run it in the schema of your choice. How to write with the
-- tokens, and what this does not protect against: docs/where-it-runs.md.

CREATE TABLE leases (
    resource   text PRIMARY KEY,
    holder     text NOT NULL,
    token      bigint NOT NULL,
    expires_at timestamptz NOT NULL
);

-- Tokens for every resource. A sequence never hands out a value twice, also
-- after a rollback; with CACHE 1 (the default) its values follow the order
-- of the calls across sessions. Keep synchronous_commit on for the lease
-- calls.
CREATE SEQUENCE lease_tokens AS bigint CACHE 1;

-- A new token if the resource is free or its lease has expired, else NULL.
-- Over an expired lease, the token is drawn once the resource's row is
-- locked, so it is above the token of every holder before.
CREATE FUNCTION lease_acquire(p_resource text, p_holder text, p_ttl interval)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    granted bigint;
BEGIN
    IF p_resource IS NULL OR p_holder IS NULL OR p_ttl IS NULL OR p_ttl <= interval '0' THEN
        RAISE EXCEPTION 'lease_acquire needs a resource, a holder and a positive ttl'
            USING ERRCODE = '22023';
    END IF;
    UPDATE leases
    SET holder = p_holder, token = nextval('lease_tokens'), expires_at = clock_timestamp() + p_ttl
    WHERE resource = p_resource AND expires_at <= clock_timestamp()
    RETURNING token INTO granted;
    IF FOUND OR EXISTS (SELECT FROM leases WHERE resource = p_resource) THEN
        RETURN granted;  -- NULL: a live lease holds it
    END IF;
    INSERT INTO leases (resource, holder, token, expires_at)
    VALUES (p_resource, p_holder, nextval('lease_tokens'), clock_timestamp() + p_ttl)
    ON CONFLICT (resource) DO NOTHING  -- another session granted it first: NULL
    RETURNING token INTO granted;
    RETURN granted;
END
$$;

-- true if the holder still held the lease with this token, now extended.
CREATE FUNCTION lease_renew(p_resource text, p_holder text, p_token bigint, p_ttl interval)
RETURNS boolean LANGUAGE sql AS $$
    WITH renewed AS (
        UPDATE leases SET expires_at = clock_timestamp() + p_ttl
        WHERE resource = p_resource AND holder = p_holder AND token = p_token
          AND expires_at > clock_timestamp() AND p_ttl > interval '0'
        RETURNING 1
    )
    SELECT EXISTS (SELECT FROM renewed)
$$;

-- true if the holder held the lease with this token; it ends now.
CREATE FUNCTION lease_release(p_resource text, p_holder text, p_token bigint)
RETURNS boolean LANGUAGE sql AS $$
    WITH released AS (
        UPDATE leases SET expires_at = clock_timestamp()
        WHERE resource = p_resource AND holder = p_holder AND token = p_token
          AND expires_at > clock_timestamp()
        RETURNING 1
    )
    SELECT EXISTS (SELECT FROM released)
$$;
