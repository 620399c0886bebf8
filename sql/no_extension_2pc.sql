-- Prepared transactions in a database without the extension, on a server
-- that loads the module (see no_extension): PREPARE TRANSACTION, COMMIT
-- PREPARED and ROLLBACK PREPARED behave as without it, also for a
-- transaction that set fencing.token, MERGEd and dropped a partition; the
-- database with the extension keeps counting and enforcing.  Needs
-- max_prepared_transactions > 0 (else expected/no_extension_2pc_1.out:
-- skipped); preloaded only (the counting needs shared memory).
SELECT current_setting('max_prepared_transactions')::int = 0 AS skip_test \gset
\if :skip_test
\echo 'skipped: max_prepared_transactions is 0'
\quit
\endif
SELECT current_database() AS regress_db \gset
CREATE DATABASE fencing_no_extension_2pc;
\c fencing_no_extension_2pc
LOAD 'fencing';
CREATE TABLE items (id int PRIMARY KEY, v text, last_fencing_token bigint NOT NULL DEFAULT 0);
CREATE TABLE parts (id int) PARTITION BY LIST (id);
CREATE TABLE parts_1 PARTITION OF parts FOR VALUES IN (1);
CREATE TABLE parts_2 PARTITION OF parts FOR VALUES IN (2);

BEGIN;
SET fencing.token = 5;
INSERT INTO items VALUES (1, 'prepared, committed', 1);
MERGE INTO items i USING (VALUES (2, 'merged')) s(id, v) ON i.id = s.id
WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v);
DROP TABLE parts_1;
PREPARE TRANSACTION 'fencing_no_extension_commit';
SELECT count(*) AS visible_before_commit FROM items;
COMMIT PREPARED 'fencing_no_extension_commit';
SELECT * FROM items ORDER BY id;
SELECT count(*) AS partitions FROM pg_inherits WHERE inhparent = 'parts'::regclass;
SHOW fencing.token;
RESET fencing.token;

BEGIN;
UPDATE items SET v = 'rolled back', last_fencing_token = 0;
DROP TABLE parts_2;
PREPARE TRANSACTION 'fencing_no_extension_rollback';
-- By another session, as a transaction manager would.
\c -
ROLLBACK PREPARED 'fencing_no_extension_rollback';
SELECT * FROM items ORDER BY id;
SELECT count(*) AS partitions FROM pg_inherits WHERE inhparent = 'parts'::regclass;
-- A prepared transaction that does not exist: PostgreSQL's own error.
COMMIT PREPARED 'fencing_no_extension_none';

-- The database with the extension, meanwhile: a fence taken in a prepared
-- transaction is counted when it commits, and an older token is refused.
\c :regress_db
SELECT fencing.fence('no_extension_2pc', 10) AS fenced;
BEGIN;
SELECT fencing.fence('no_extension_2pc', 11) AS fenced;
PREPARE TRANSACTION 'fencing_with_extension';
COMMIT PREPARED 'fencing_with_extension';
SELECT t.error_of($$SELECT fencing.fence('no_extension_2pc', 10)$$) AS older;
SELECT writes_accepted FROM fencing.stats WHERE resource = 'no_extension_2pc';
DROP DATABASE fencing_no_extension_2pc;
