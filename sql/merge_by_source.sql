-- MERGE ... WHEN NOT MATCHED BY SOURCE (PostgreSQL 17+) updates and deletes
-- rows that no source row matches: they are fenced like any UPDATE or DELETE.
-- An UPDATE action of that kind counts with the WHEN MATCHED ones when the
-- token column must be assigned by all of them or by none (src/guard/merge_check.cpp):
-- the guard sees the union of the columns the actions assign, so a row that
-- takes an action not assigning it would present its stored token as its own.
-- Before 17 there is no such action (expected/merge_by_source_1.out: skipped).
SELECT current_setting('server_version_num')::int >= 170000 AS has_by_source \gset
\if :has_by_source
\else
\echo 'skipped: WHEN NOT MATCHED BY SOURCE needs PostgreSQL 17'
\quit
\endif

CREATE TABLE account (id int PRIMARY KEY, v text);
SELECT fencing.protect('account');
INSERT INTO account VALUES (1, 'one', 10), (2, 'two', 10), (3, 'three', 10);
-- Source row 1 only: rows 2 and 3 are matched by no source row.
CREATE TABLE src (id int, v text, tok bigint);
INSERT INTO src VALUES (1, 'from source', 20);

-- A WHEN MATCHED UPDATE assigns the token column, the NOT MATCHED BY SOURCE
-- UPDATE does not: refused before any row is written (else rows 2 and 3
-- would present their stored token 10, and be written unfenced).
MERGE INTO account a USING src s ON a.id = s.id
WHEN MATCHED THEN UPDATE SET v = s.v, last_fencing_token = s.tok
WHEN NOT MATCHED BY SOURCE THEN UPDATE SET v = 'unfenced';
\echo :LAST_ERROR_SQLSTATE
-- The other way round, too.
MERGE INTO account a USING src s ON a.id = s.id
WHEN MATCHED THEN UPDATE SET v = 'unfenced'
WHEN NOT MATCHED BY SOURCE THEN UPDATE SET v = 'by source', last_fencing_token = 20;
\echo :LAST_ERROR_SQLSTATE
-- Whatever fencing.token holds.
BEGIN;
SET LOCAL fencing.token = 30;
MERGE INTO account a USING src s ON a.id = s.id
WHEN MATCHED THEN UPDATE SET v = s.v, last_fencing_token = s.tok
WHEN NOT MATCHED BY SOURCE THEN UPDATE SET v = 'unfenced';
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT * FROM account ORDER BY id;

-- A NOT MATCHED BY SOURCE UPDATE alone: no token is 23T02, a stale one 23T01.
MERGE INTO account a USING src s ON a.id = s.id
WHEN NOT MATCHED BY SOURCE THEN UPDATE SET v = 'no token';
\echo :LAST_ERROR_SQLSTATE
MERGE INTO account a USING src s ON a.id = s.id
WHEN NOT MATCHED BY SOURCE THEN UPDATE SET v = 'stale', last_fencing_token = 9;
\echo :LAST_ERROR_SQLSTATE
BEGIN;
SET LOCAL fencing.token = 9;
MERGE INTO account a USING src s ON a.id = s.id
WHEN NOT MATCHED BY SOURCE THEN UPDATE SET v = 'stale';
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT * FROM account ORDER BY id;
-- A current token: rows 2 and 3 written, row 1 not.
MERGE INTO account a USING src s ON a.id = s.id
WHEN NOT MATCHED BY SOURCE THEN UPDATE SET v = 'fenced', last_fencing_token = 11;
SELECT * FROM account ORDER BY id;
-- Every UPDATE action assigns it: each row presents its own value.
MERGE INTO account a USING src s ON a.id = s.id
WHEN MATCHED THEN UPDATE SET v = s.v, last_fencing_token = s.tok
WHEN NOT MATCHED BY SOURCE AND a.id = 2 THEN UPDATE SET v = 'fenced again', last_fencing_token = 12
WHEN NOT MATCHED BY SOURCE THEN UPDATE SET v = 'late', last_fencing_token = 10;
\echo :LAST_ERROR_SQLSTATE
MERGE INTO account a USING src s ON a.id = s.id
WHEN MATCHED THEN UPDATE SET v = s.v, last_fencing_token = s.tok
WHEN NOT MATCHED BY SOURCE AND a.id = 2 THEN UPDATE SET v = 'fenced again', last_fencing_token = 12
WHEN NOT MATCHED BY SOURCE THEN UPDATE SET v = 'fenced again', last_fencing_token = 13;
SELECT * FROM account ORDER BY id;
-- None assigns it: fencing.token, for every row.
BEGIN;
SET LOCAL fencing.token = 30;
MERGE INTO account a USING src s ON a.id = s.id
WHEN MATCHED THEN UPDATE SET v = 'matched'
WHEN NOT MATCHED BY SOURCE THEN UPDATE SET v = 'by source';
COMMIT;
SELECT * FROM account ORDER BY id;

-- NOT MATCHED BY SOURCE DELETE: no token is 23T02 (it borrows nothing from
-- the MATCHED UPDATE's token), a stale one 23T01; a current one deletes
-- and marks the keys.
MERGE INTO account a USING src s ON a.id = s.id
WHEN NOT MATCHED BY SOURCE THEN DELETE;
\echo :LAST_ERROR_SQLSTATE
MERGE INTO account a USING src s ON a.id = s.id
WHEN MATCHED THEN UPDATE SET v = s.v, last_fencing_token = 40
WHEN NOT MATCHED BY SOURCE THEN DELETE;
\echo :LAST_ERROR_SQLSTATE
BEGIN;
SET LOCAL fencing.token = 29;
MERGE INTO account a USING src s ON a.id = s.id
WHEN NOT MATCHED BY SOURCE THEN DELETE;
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT * FROM account ORDER BY id;
BEGIN;
SET LOCAL fencing.token = 31;
MERGE INTO account a USING src s ON a.id = s.id
WHEN NOT MATCHED BY SOURCE AND a.id = 3 THEN DELETE;
COMMIT;
SELECT * FROM account ORDER BY id;
SELECT t.mark('account', t.img(3)) AS mark_3, t.mark('account', t.img(2)) AS mark_2;
-- A stale re-insert of the deleted key is refused.
INSERT INTO account VALUES (3, 'zombie', 30);
\echo :LAST_ERROR_SQLSTATE

-- From 17 on a MERGE ... RETURNING may be a WITH query: the statement is
-- then a SELECT, an INSERT or any other, whose MERGE is one of its
-- subplans.  Checked the same, before any row is written.
WITH m AS (MERGE INTO account a USING src s ON a.id = s.id
  WHEN MATCHED THEN UPDATE SET v = s.v, last_fencing_token = s.tok
  WHEN NOT MATCHED BY SOURCE THEN UPDATE SET v = 'unfenced'
  RETURNING a.id)
SELECT count(*) FROM m;
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE merged (id int, token bigint);
BEGIN;
SET LOCAL fencing.token = 50;
WITH m AS (MERGE INTO account a USING (VALUES (1, 'with', 1000), (2, 'with', 1)) s(id, v, tok)
  ON a.id = s.id
  WHEN MATCHED AND s.tok > 999 THEN UPDATE SET v = s.v, last_fencing_token = s.tok
  WHEN MATCHED THEN UPDATE SET v = 'unfenced'
  RETURNING a.id, a.last_fencing_token)
INSERT INTO merged SELECT * FROM m;
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT * FROM account ORDER BY id;
-- Agreeing actions run as a WITH query like any MERGE.
BEGIN;
SET LOCAL fencing.token = 50;
WITH m AS (MERGE INTO account a USING src s ON a.id = s.id
  WHEN MATCHED THEN UPDATE SET v = 'with, fenced'
  WHEN NOT MATCHED BY SOURCE THEN UPDATE SET v = 'with, fenced'
  RETURNING a.id, a.last_fencing_token)
INSERT INTO merged SELECT * FROM m;
COMMIT;
SELECT * FROM merged ORDER BY id;
SELECT * FROM account ORDER BY id;

DROP TABLE account, src, merged;
