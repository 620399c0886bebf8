-- Ordinary roles: the caller's rights apply; fencing state is written only by the extension.

CREATE ROLE regress_fencing_writer;
CREATE ROLE regress_fencing_reader;
CREATE ROLE regress_fencing_column;
GRANT USAGE ON SCHEMA fencing TO regress_fencing_writer, regress_fencing_reader, regress_fencing_column;

CREATE TABLE vault (id int PRIMARY KEY, owner text NOT NULL, secret text);
SELECT fencing.protect('vault');
INSERT INTO vault VALUES (1, 'regress_fencing_writer', 'w1', 1), (2, 'someone_else', 's2', 1);
GRANT SELECT, INSERT, UPDATE, DELETE ON vault TO regress_fencing_writer;
GRANT SELECT ON vault TO regress_fencing_reader;
GRANT SELECT, UPDATE (secret) ON vault TO regress_fencing_column;

-- A writer with table privileges uses every path with tokens, without superuser.
SET ROLE regress_fencing_writer;
SELECT fencing.fenced_update('vault', '{"id": 1}', 5, '{"secret": "w1@5"}');
BEGIN;
SET LOCAL fencing.token = 6;
UPDATE vault SET secret = 'w1@6' WHERE id = 1;
INSERT INTO vault VALUES (3, 'regress_fencing_writer', 'w3');
DELETE FROM vault WHERE id = 3;
COMMIT;
-- The deleted key's mark was recorded for it, yet it cannot touch the marks table.
INSERT INTO vault VALUES (3, 'regress_fencing_writer', 'zombie', 5);
\echo :LAST_ERROR_SQLSTATE
SELECT t.error_of($$SELECT * FROM fencing.deleted_keys$$);
SELECT t.error_of($$INSERT INTO fencing.deleted_keys VALUES ('vault', sha256(''), 1)$$);
SELECT t.error_of($$INSERT INTO fencing.floors VALUES ('vault', 1)$$);
SELECT t.error_of($$UPDATE fencing.deleted_keys SET token = 1$$);
SELECT t.error_of($$DELETE FROM fencing.deleted_keys$$);
SELECT t.error_of($$TRUNCATE fencing.deleted_keys$$);
-- It can read which tables are protected.
SELECT relation, token_column, mode FROM fencing.protected_tables WHERE relation = 'vault'::regclass;
RESET ROLE;
SELECT t.marks(t.img(3)) AS vault_3;

-- A role without UPDATE cannot change the table through fenced_update().
SET ROLE regress_fencing_reader;
SELECT t.error_of($$SELECT fencing.fenced_update('vault', '{"id": 1}', 50, '{"secret": "stolen"}')$$);
SELECT t.error_of($$SELECT fencing.fenced_update('vault', '{"id": 1}', 50)$$);
RESET ROLE;
-- Column privileges: fenced_update() assigns the token column, so it needs UPDATE on it too.
SET ROLE regress_fencing_column;
SELECT t.error_of($$SELECT fencing.fenced_update('vault', '{"id": 1}', 50, '{"secret": "col"}')$$);
SELECT t.error_of($$SELECT fencing.fenced_update('vault', '{"id": 1}', 50, '{"owner": "col"}')$$);
RESET ROLE;
SELECT * FROM vault ORDER BY id;

-- A role that may not read the token column does not learn stored tokens from messages.
CREATE ROLE regress_fencing_blind;
GRANT USAGE ON SCHEMA fencing TO regress_fencing_blind;
GRANT SELECT (id, owner), UPDATE (secret), DELETE ON vault TO regress_fencing_blind;
SET ROLE regress_fencing_blind;
BEGIN;
SET LOCAL fencing.token = 1;
UPDATE vault SET secret = 'late' WHERE id = 1;
ROLLBACK;
UPDATE vault SET secret = 'no token' WHERE id = 1;
RESET ROLE;

-- Row-level security applies as to a plain UPDATE: a row the policy hides is not found.
ALTER TABLE vault ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_rows ON vault USING (owner = current_user);
SET ROLE regress_fencing_writer;
SELECT fencing.fenced_update('vault', '{"id": 1}', 7, '{"secret": "w1@7"}');
SELECT t.error_of($$SELECT fencing.fenced_update('vault', '{"id": 2}', 7, '{"secret": "stolen"}')$$);
-- WITH CHECK (here the USING clause) refuses a new row the policy would hide.
SELECT t.error_of($$SELECT fencing.fenced_update('vault', '{"id": 1}', 8, '{"owner": "someone_else"}')$$);
RESET ROLE;
SELECT * FROM vault ORDER BY id;
-- Keys the policy hides tell nothing: a deleted hidden key is "no row" to
-- fenced_update(), like a live hidden one, not stale with its token; and an
-- insert refused by a hidden key's mark does not print the key or its token.
INSERT INTO vault VALUES (4, 'someone_else', 's4', 70);
BEGIN;
SET LOCAL fencing.token = 77;
DELETE FROM vault WHERE id = 4;
COMMIT;
SET ROLE regress_fencing_writer;
SELECT t.error_of($$SELECT fencing.fenced_update('vault', '{"id": 2}', 7, '{"secret": "x"}')$$);
SELECT t.error_of($$SELECT fencing.fenced_update('vault', '{"id": 4}', 7, '{"secret": "x"}')$$);
SELECT t.error_of($$SELECT fencing.fenced_update('vault', '{"id": 4}', 7, '{}', 'skip')$$);
INSERT INTO vault VALUES (4, 'regress_fencing_writer', 'mine now', 76);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT fencing.fenced_update('vault', '{"id": 4}', 7, '{}', 'skip');
ALTER TABLE vault DISABLE ROW LEVEL SECURITY;

-- Objects planted earlier in search_path are never picked up.
CREATE SCHEMA hostile;
CREATE FUNCTION hostile.yes(int, int) RETURNS boolean LANGUAGE sql AS 'SELECT true';
CREATE FUNCTION hostile.yes8(bigint, bigint) RETURNS boolean LANGUAGE sql AS 'SELECT true';
CREATE OPERATOR hostile.= (LEFTARG = int, RIGHTARG = int, FUNCTION = hostile.yes);
CREATE OPERATOR hostile.< (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = hostile.yes8);
CREATE OPERATOR hostile.<= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = hostile.yes8);
CREATE OPERATOR hostile.>= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = hostile.yes8);
CREATE OPERATOR hostile.> (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = hostile.yes8);
CREATE FUNCTION hostile.token_accepts(bigint, bigint, boolean) RETURNS boolean LANGUAGE sql AS 'SELECT true';
CREATE TABLE hostile.vault (id int PRIMARY KEY, last_fencing_token bigint NOT NULL DEFAULT 0);
CREATE TABLE hostile.deleted_keys (relid regclass, key text[], token bigint);
SET search_path = hostile, pg_catalog, public;
SELECT 1 = 2 AS "hostile = is in effect";
-- Only row 1 changes, and a stale token is still refused.
SELECT fencing.fenced_update('public.vault', '{"id": 1}', 9, '{"secret": "w1@9"}');
SELECT fencing.fenced_update('public.vault', '{"id": 1}', 8, '{"secret": "stale"}', 'skip');
SELECT id, secret, last_fencing_token FROM public.vault ORDER BY id;
-- The guard's marks ignore hostile.deleted_keys, protect() ignores hostile objects.
BEGIN;
SET LOCAL fencing.token = 10;
DELETE FROM public.vault WHERE id = 2;
COMMIT;
INSERT INTO public.vault VALUES (2, 'someone_else', 'zombie', 9);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS planted_rows FROM hostile.deleted_keys;
SELECT fencing.protect('public.vault', mode => 'strict');
SELECT fencing.protect('public.vault');
RESET search_path;

-- The guard and fenced_update() run with the caller's rights (SECURITY INVOKER).
SELECT proname, prosecdef FROM pg_proc
WHERE oid IN ('fencing.guard'::regproc, 'fencing.fenced_update'::regproc,
              'fencing.protect'::regproc, 'fencing.unprotect'::regproc) ORDER BY 1;

DROP SCHEMA hostile CASCADE;
DROP TABLE vault;
DROP OWNED BY regress_fencing_writer, regress_fencing_reader, regress_fencing_column,
	regress_fencing_blind;
DROP ROLE regress_fencing_writer, regress_fencing_reader, regress_fencing_column,
	regress_fencing_blind;
