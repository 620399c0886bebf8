-- Leader election: fencing.campaign / resign / leader and the notification on
-- channel fencing_election.

-- Session l (dblink) listens on the channel and runs most calls: psql would
-- print each notification with the notifier's PID, dblink_get_notify() gives
-- its channel and payload.  heard() first makes a round trip on l: the
-- backend delivers what other sessions' commits sent it before it answers.
CREATE EXTENSION IF NOT EXISTS dblink;
SELECT dblink_connect('l', format('host=%s port=%s dbname=%s application_name=listener',
	split_part(current_setting('unix_socket_directories'), ',', 1),
	current_setting('port'), current_database()));
SELECT dblink_exec('l', 'LISTEN fencing_election');
CREATE FUNCTION t.on_l(statement text) RETURNS text LANGUAGE sql AS $$
	SELECT v FROM dblink('l', statement) AS r(v text)
$$;
CREATE FUNCTION t.heard() RETURNS TABLE(channel text, payload text) LANGUAGE sql AS $$
	SELECT FROM dblink('l', 'SELECT 1') AS r(v int);
	SELECT n.notify_name, n.extra FROM dblink_get_notify('l') n
$$;

-- A grant notifies at the commit of the granting transaction, payload the
-- election's name; the listening session hears its own campaign.
SELECT t.on_l($$SELECT fencing.campaign('election:1', 'alice', '10 s')$$) AS t1 \gset
SELECT :t1 > 0 AS granted;
SELECT * FROM t.heard();
SELECT holder, token = :t1 AS token_ok, expires_at - granted_at AS ttl FROM fencing.leader('election:1');
-- An election is the lease on the resource named by the election.
SELECT holder, token = :t1 AS token_ok, live FROM fencing.leases WHERE resource = 'election:1';
SELECT dblink_exec('l', 'BEGIN');
SELECT t.on_l($$SELECT fencing.campaign('election:2', 'alice', '10 s') IS NOT NULL$$) AS granted;
SELECT * FROM t.heard();                           -- not before the commit
SELECT dblink_exec('l', 'COMMIT');
SELECT * FROM t.heard();
-- None after a rollback, and no leader.
SELECT dblink_exec('l', 'BEGIN');
SELECT t.on_l($$SELECT fencing.campaign('election:3', 'alice', '10 s') IS NOT NULL$$) AS granted;
SELECT dblink_exec('l', 'ROLLBACK');
SELECT * FROM t.heard();
SELECT count(*) AS leaders FROM fencing.leader('election:3');
-- Another session's grant is heard too.
SELECT fencing.campaign('election:4', 'carol', '10 s') IS NOT NULL AS granted;
SELECT * FROM t.heard();

-- Not granted: NULL and no notification, for another candidate and for the
-- leader itself (with acquire()'s NOTICE 01T01, the token in its hint).
SELECT fencing.campaign('election:1', 'bob', '10 s') IS NULL AS refused;
\set VERBOSITY sqlstate
SELECT fencing.campaign('election:1', 'alice', '10 s') IS NULL AS refused_own;
\set VERBOSITY default
SELECT fencing.campaign('election:1', 'bob', '10 s', '0.2 s') IS NULL AS waited_not_granted;
SELECT * FROM t.heard();
SELECT holder, token = :t1 AS token_ok FROM fencing.leader('election:1');

-- The leader keeps it with renew() and fences with its token, as any lease.
SELECT fencing.renew('election:1', 'alice', :t1, '20 s') AS renewed;
SELECT expires_at - granted_at > interval '19 s' AS extended FROM fencing.leader('election:1');
SELECT fencing.fence('election:1', :t1) AS previous_mark;
SELECT * FROM t.heard();                           -- a renewal is not a change

-- resign() is release(): true and a notification at commit when it
-- released; false and none otherwise.
SELECT t.on_l(format($$SELECT fencing.resign('election:1', 'bob', %s)$$, :t1)) AS wrong_candidate;
SELECT t.on_l(format($$SELECT fencing.resign('election:1', 'alice', %s)$$, :t1 + 1)) AS wrong_token;
SELECT * FROM t.heard();
SELECT dblink_exec('l', 'BEGIN');
SELECT t.on_l(format($$SELECT fencing.resign('election:1', 'alice', %s)$$, :t1)) AS resigned;
SELECT * FROM t.heard();                           -- not before the commit
SELECT count(*) AS leaders_seen_by_others FROM fencing.leader('election:1');
SELECT dblink_exec('l', 'COMMIT');
SELECT * FROM t.heard();
SELECT count(*) AS leaders FROM fencing.leader('election:1');
SELECT t.on_l(format($$SELECT fencing.resign('election:1', 'alice', %s)$$, :t1)) AS resigned_twice;
SELECT * FROM t.heard();
-- A resign rolled back: still the leader, nothing heard.
SELECT fencing.campaign('election:1', 'bob', '10 s') AS t2 \gset
SELECT * FROM t.heard();
SELECT dblink_exec('l', 'BEGIN');
SELECT t.on_l(format($$SELECT fencing.resign('election:1', 'bob', %s)$$, :t2)) AS resigned;
SELECT dblink_exec('l', 'ROLLBACK');
SELECT * FROM t.heard();
SELECT holder, token = :t2 AS token_ok, :t2 > :t1 AS increases FROM fencing.leader('election:1');

-- leader(): no row for an election never held, nor for one whose leader
-- expired (no notification: observers read leader() again at expires_at).
SELECT count(*) AS leaders FROM fencing.leader('election:never');
SELECT count(*) AS leaders FROM fencing.leader(NULL);
SELECT fencing.campaign('election:5', 'dave', '1 s') IS NOT NULL AS granted;
SELECT * FROM t.heard();
SELECT holder FROM fencing.leader('election:5');
SELECT pg_sleep(1.1);
SELECT count(*) AS leaders FROM fencing.leader('election:5');
SELECT state FROM fencing.leases WHERE resource = 'election:5';
SELECT * FROM t.heard();
-- The next candidate is granted above the expired token.
SELECT token AS t5_old FROM fencing.leases WHERE resource = 'election:5' \gset
SELECT fencing.campaign('election:5', 'erin', '10 s') > :t5_old AS granted_above;
SELECT * FROM t.heard();
-- A candidate waiting for a leader that expires is granted at the expiry;
-- its grant notifies (the expiry alone did not).
SELECT fencing.campaign('election:9', 'frank', '1 s') IS NOT NULL AS granted;
SELECT expires_at AS frank_expires FROM fencing.leader('election:9') \gset
SELECT t.on_l($$SELECT fencing.campaign('election:9', 'grace', '10 s', '5 s') IS NOT NULL$$) AS granted;
SELECT * FROM t.heard();
SELECT holder, granted_at >= :'frank_expires' AS after_the_expiry FROM fencing.leader('election:9');

-- Names of up to 1000 bytes (the payload); a longer one is refused.
SELECT fencing.campaign(repeat('n', 1000), 'alice', '10 s') IS NOT NULL AS granted;
SELECT payload = repeat('n', 1000) AS full_name FROM t.heard();
SELECT fencing.resign(repeat('n', 1000), 'alice', token) AS resigned FROM fencing.leader(repeat('n', 1000));
SELECT payload = repeat('n', 1000) AS full_name FROM t.heard();

-- Bad input: a clear error, and nothing changes (no lease, no notification).
CREATE TABLE lease_snapshot AS SELECT * FROM fencing.resources;
SELECT t.error_of($$SELECT fencing.campaign(NULL, 'a', '1 s')$$);
SELECT t.error_of($$SELECT fencing.campaign('', 'a', '1 s')$$);
SELECT t.error_of($$SELECT fencing.campaign('election:bad', NULL, '1 s')$$);
SELECT t.error_of($$SELECT fencing.campaign('election:bad', '', '1 s')$$);
SELECT t.error_of($$SELECT fencing.campaign('election:bad', 'a', NULL)$$);
SELECT t.error_of($$SELECT fencing.campaign('election:bad', 'a', '0 s')$$);
SELECT t.error_of($$SELECT fencing.campaign('election:bad', 'a', '-1 s')$$);
SELECT t.error_of($$SELECT fencing.campaign('election:bad', 'a', '1 s', '-1 s')$$);
SELECT t.error_of($$SELECT fencing.campaign(repeat('n', 1001), 'a', '1 s')$$);
SELECT t.error_of($$SELECT fencing.campaign(repeat('é', 501), 'a', '1 s')$$);
SELECT t.error_of($$SELECT fencing.resign(NULL, 'a', 1)$$);
SELECT t.error_of($$SELECT fencing.resign('election:4', NULL, 1)$$);
SELECT t.error_of($$SELECT fencing.resign('election:4', 'carol', NULL)$$);
SELECT t.error_of($$SELECT fencing.resign('election:4', 'carol', 0)$$);
SELECT t.error_of($$SELECT fencing.resign(repeat('n', 1001), 'a', 1)$$);
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT t.error_of($$SELECT fencing.campaign('election:bad', 'a', '1 s', '1 s')$$);
COMMIT;
SELECT count(*) AS changed_rows FROM (
	SELECT * FROM fencing.resources EXCEPT SELECT * FROM lease_snapshot
	UNION ALL
	SELECT * FROM lease_snapshot EXCEPT SELECT * FROM fencing.resources) d;
DROP TABLE lease_snapshot;
SELECT * FROM t.heard();

-- Grants and releases count in fencing.lease_stats as acquire()'s and
-- release()'s do (under the prefix up to the first colon).
SELECT fencing.lease_stats_reset();
SELECT fencing.campaign('election:6', 'alice', '10 s') AS t6 \gset
SELECT fencing.campaign('election:6', 'bob', '10 s') IS NULL AS refused;
SELECT fencing.resign('election:6', 'alice', :t6) AS resigned;
SELECT prefix, grants, refused_acquires, releases FROM fencing.lease_stats WHERE prefix = 'election:';

-- Rights: the caller's (SECURITY INVOKER); leader() is for PUBLIC, as
-- fencing.leases is.  A role without USAGE on schema fencing calls none.
SELECT p.oid::regprocedure AS function, p.prosecdef AS security_definer, p.provolatile AS volatility,
       p.proconfig AS settings, has_function_privilege('public', p.oid, 'EXECUTE') AS public_execute
FROM pg_proc p WHERE p.oid IN ('fencing.campaign'::regproc, 'fencing.resign'::regproc,
                               'fencing.leader'::regproc, 'fencing_internal._check_election'::regproc)
ORDER BY 1;
CREATE ROLE regress_fencing_elector;
SELECT token AS t5 FROM fencing.leader('election:5') \gset
SET ROLE regress_fencing_elector;
SELECT t.error_of($$SELECT fencing.campaign('election:7', 'mallory', '10 s')$$);
SELECT t.error_of(format($$SELECT fencing.resign('election:5', 'erin', %s)$$, :t5));
SELECT t.error_of($$SELECT * FROM fencing.leader('election:5')$$);
RESET ROLE;
GRANT USAGE ON SCHEMA fencing TO regress_fencing_elector;
SET ROLE regress_fencing_elector;
SELECT fencing.campaign('election:7', 'mallory', '10 s') AS t7 \gset
SELECT holder FROM fencing.leader('election:7');
-- another's election: refused as to any other candidate, no notification
SELECT fencing.campaign('election:5', 'mallory', '10 s') IS NULL AS refused;
SELECT fencing.resign('election:5', 'mallory', token) AS resigned_another FROM fencing.leader('election:5');
SELECT fencing.resign('election:5', 'erin', token + 1) AS wrong_token FROM fencing.leader('election:5');
SELECT holder FROM fencing.leader('election:5');
SELECT t.error_of($$UPDATE fencing.resources SET holder = 'mallory' WHERE resource = 'election:5'$$);
SELECT fencing.resign('election:7', 'mallory', :t7) AS resigned;
RESET ROLE;
SELECT * FROM t.heard();
-- Without EXECUTE on acquire() and release() (a DBA revoked them), no
-- campaign() or resign() either: they run with the caller's rights.
REVOKE EXECUTE ON FUNCTION fencing.acquire(text, text, interval, interval) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION fencing.release(text, text, bigint) FROM PUBLIC;
SET ROLE regress_fencing_elector;
SELECT t.error_of($$SELECT fencing.campaign('election:7', 'mallory', '10 s')$$);
SELECT t.error_of(format($$SELECT fencing.resign('election:5', 'erin', %s)$$, :t5));
SELECT holder FROM fencing.leader('election:5');
RESET ROLE;
GRANT EXECUTE ON FUNCTION fencing.acquire(text, text, interval, interval) TO PUBLIC;
GRANT EXECUTE ON FUNCTION fencing.release(text, text, bigint) TO PUBLIC;
REVOKE USAGE ON SCHEMA fencing FROM regress_fencing_elector;
DROP ROLE regress_fencing_elector;
-- A caller's search_path does not reach inside: its own pg_notify() and
-- octet_length() are not called.
CREATE SCHEMA planted;
CREATE FUNCTION planted.pg_notify(text, text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'planted pg_notify called'; END $$;
CREATE FUNCTION planted.octet_length(text) RETURNS int LANGUAGE sql AS 'SELECT 0';
SET search_path = planted, public, pg_catalog;
SELECT fencing.campaign('election:8', 'alice', '10 s') IS NOT NULL AS granted;
SELECT t.error_of($$SELECT fencing.campaign(repeat('n', 1001), 'a', '1 s')$$);
RESET search_path;
SELECT * FROM t.heard();
DROP SCHEMA planted CASCADE;

SELECT dblink_disconnect('l');
DELETE FROM fencing.resources WHERE resource LIKE 'election:%' OR resource = repeat('n', 1000);
DROP FUNCTION t.on_l(text), t.heard();
DROP EXTENSION dblink;
