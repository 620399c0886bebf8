-- DDL cannot leave a protected table's rows unguarded, and what a partition
-- held stays with the table when it leaves.

CREATE TABLE shelf (id int PRIMARY KEY, v text);
SELECT fencing.protect('shelf');
INSERT INTO shelf VALUES (1, 'a', 10);

-- Inheritance children would take the table's rows without a guard.
CREATE TABLE shelf_child (PRIMARY KEY (id)) INHERITS (shelf);
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE loose (id int PRIMARY KEY, v text, last_fencing_token bigint NOT NULL DEFAULT 0);
ALTER TABLE loose INHERIT shelf;
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE parent_of_loose (id int PRIMARY KEY, v text);
ALTER TABLE loose INHERIT parent_of_loose;
SELECT t.error_of($$SELECT fencing.protect('parent_of_loose')$$);
ALTER TABLE loose NO INHERIT parent_of_loose;

-- Unlogged tables lose their rows in a crash, and with them their tokens.
CREATE UNLOGGED TABLE scratchpad (id int PRIMARY KEY);
SELECT t.error_of($$SELECT fencing.protect('scratchpad')$$);
ALTER TABLE shelf SET UNLOGGED;
\echo :LAST_ERROR_SQLSTATE

-- The token column must not present a token of its own.
CREATE TABLE defaults (id int PRIMARY KEY, tok bigint DEFAULT 7, ident bigint GENERATED ALWAYS AS IDENTITY);
SELECT t.error_of($$SELECT fencing.protect('defaults', 'tok')$$);
SELECT t.error_of($$SELECT fencing.protect('defaults', 'ident')$$);
SELECT t.error_of($$SELECT fencing.protect('defaults', '')$$);
SELECT t.error_of($$SELECT fencing.protect('fencing.deleted_keys')$$);

-- A primary key change: the guard follows the new key, and refuses one it cannot mark.
CREATE TABLE people (id int, email text NOT NULL, PRIMARY KEY (id));
SELECT fencing.protect('people');
INSERT INTO people VALUES (1, 'a@x', 5);
ALTER TABLE people DROP CONSTRAINT people_pkey, ADD PRIMARY KEY (email);
SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = 'people'::regclass AND tgname = 'fencing_guard_key_changes';
BEGIN;
SET LOCAL fencing.token = 6;
DELETE FROM people WHERE email = 'a@x';
COMMIT;
INSERT INTO people VALUES (2, 'a@x', 5);
\echo :LAST_ERROR_SQLSTATE
CREATE COLLATION IF NOT EXISTS case_blind (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
ALTER TABLE people DROP CONSTRAINT people_pkey, ADD PRIMARY KEY (id);
ALTER TABLE people ALTER COLUMN email TYPE text COLLATE case_blind;
ALTER TABLE people DROP CONSTRAINT people_pkey, ADD PRIMARY KEY (email);
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE people DROP CONSTRAINT people_pkey;
\echo :LAST_ERROR_SQLSTATE

-- The key's columns in another order name every key differently: the marks
-- of the old order cannot be looked up, so their highest token becomes the
-- floor for new keys.  In both forms of the key-change trigger.
CREATE TABLE pairs (a int, b int, v text, PRIMARY KEY (a, b));
CREATE TABLE pairs_triggered (LIKE pairs);
ALTER TABLE pairs_triggered ADD PRIMARY KEY (a, b);
CREATE FUNCTION t.touch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER touch BEFORE UPDATE ON pairs_triggered FOR EACH ROW EXECUTE FUNCTION t.touch();
SELECT fencing.protect('pairs'), fencing.protect('pairs_triggered');
INSERT INTO pairs VALUES (1, 2, 'x', 10);
INSERT INTO pairs_triggered VALUES (1, 2, 'x', 10);
BEGIN;
SET LOCAL fencing.token = 50;
DELETE FROM pairs;
DELETE FROM pairs_triggered;
COMMIT;
-- Other DDL leaves the key, and the floor, alone.
ALTER TABLE pairs ADD COLUMN note text;
ALTER TABLE pairs_triggered ADD COLUMN note text;
SELECT count(*) AS floors FROM fencing.floors WHERE relid IN ('pairs'::regclass, 'pairs_triggered'::regclass);
ALTER TABLE pairs DROP CONSTRAINT pairs_pkey, ADD PRIMARY KEY (b, a);
ALTER TABLE pairs_triggered DROP CONSTRAINT pairs_triggered_pkey, ADD PRIMARY KEY (b, a);
SELECT relid, token FROM fencing.floors
WHERE relid IN ('pairs'::regclass, 'pairs_triggered'::regclass) ORDER BY relid::text;
BEGIN;
SET LOCAL fencing.token = 20;
INSERT INTO pairs VALUES (1, 2, 'zombie');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = 20;
INSERT INTO pairs_triggered VALUES (1, 2, 'zombie');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = 60;
INSERT INTO pairs VALUES (1, 2, 'new');
INSERT INTO pairs_triggered VALUES (1, 2, 'new');
COMMIT;
DROP TABLE pairs, pairs_triggered;
DROP FUNCTION t.touch();

-- A rule that rewrites UPDATE: fenced_update() says so (0A000).
CREATE TABLE ruled (id int PRIMARY KEY, v text);
SELECT fencing.protect('ruled');
INSERT INTO ruled VALUES (1, 'x', 1);
CREATE RULE quiet AS ON UPDATE TO ruled DO INSTEAD NOTHING;
SELECT t.error_of($$SELECT fencing.fenced_update('ruled', '{"id": 1}', 2, '{"v": "y"}')$$);

-- A partition made by CREATE SCHEMA ... CREATE TABLE gets its TRUNCATE guard too.
CREATE TABLE racks (id int PRIMARY KEY, v text) PARTITION BY RANGE (id);
SELECT fencing.protect('racks');
CREATE SCHEMA annex CREATE TABLE racks_low PARTITION OF public.racks FOR VALUES FROM (0) TO (100);
SELECT count(*) AS truncate_guards FROM pg_trigger
WHERE tgrelid = 'annex.racks_low'::regclass AND tgname = 'fencing_guard_truncate';
INSERT INTO racks VALUES (1, 'x', 100);
TRUNCATE annex.racks_low;
\echo :LAST_ERROR_SQLSTATE

-- DETACH: the table keeps what the partition held.  Its TRUNCATE floor ...
CREATE TABLE racks_high PARTITION OF racks FOR VALUES FROM (100) TO (200);
INSERT INTO racks VALUES (150, 'y', 100);
BEGIN;
SET LOCAL fencing.token = 110;
TRUNCATE racks_high;
COMMIT;
ALTER TABLE racks DETACH PARTITION racks_high;
CREATE TABLE racks_high2 PARTITION OF racks FOR VALUES FROM (100) TO (200);
INSERT INTO racks VALUES (150, 'stale', 109);
\echo :LAST_ERROR_SQLSTATE
-- ... the marks a table brought in when it was attached ...
CREATE TABLE racks_mid (id int PRIMARY KEY, v text);
SELECT fencing.protect('racks_mid');
INSERT INTO racks_mid VALUES (250, 'z', 120);
BEGIN;
SET LOCAL fencing.token = 130;
DELETE FROM racks_mid;
COMMIT;
SELECT fencing.unprotect('racks_mid');
ALTER TABLE racks ATTACH PARTITION racks_mid FOR VALUES FROM (200) TO (300);
ALTER TABLE racks DETACH PARTITION racks_mid;
CREATE TABLE racks_mid2 PARTITION OF racks FOR VALUES FROM (200) TO (300);
INSERT INTO racks VALUES (250, 'stale', 129);
\echo :LAST_ERROR_SQLSTATE
-- ... and the tokens of the rows it takes away.
INSERT INTO racks VALUES (260, 'w', 140);
ALTER TABLE racks DETACH PARTITION racks_mid2;
CREATE TABLE racks_mid3 PARTITION OF racks FOR VALUES FROM (200) TO (300);
INSERT INTO racks VALUES (260, 'stale', 139);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO racks VALUES (260, 'new holder', 140);
SELECT relid, token FROM fencing.floors WHERE relid = 'racks'::regclass;

-- The token column stays a bigint column, and the guard's triggers keep
-- their names, while the table is protected.
CREATE TABLE kept (id int PRIMARY KEY, v text);
SELECT fencing.protect('kept');
ALTER TABLE kept RENAME COLUMN last_fencing_token TO tok;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE kept DROP COLUMN last_fencing_token;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE kept ALTER COLUMN last_fencing_token TYPE numeric;
\echo :LAST_ERROR_SQLSTATE
ALTER TRIGGER fencing_guard ON kept RENAME TO zz_guard;
\echo :LAST_ERROR_SQLSTATE
ALTER TRIGGER fencing_guard_truncate ON kept RENAME TO zz_truncate;
\echo :LAST_ERROR_SQLSTATE
SELECT relation, token_column FROM fencing.protected_tables WHERE relation = 'kept'::regclass;
ALTER TABLE kept RENAME COLUMN v TO w;
SELECT fencing.unprotect('kept');
ALTER TABLE kept RENAME COLUMN last_fencing_token TO tok;
DROP TABLE kept;

-- Internal helpers answer bad input with the standard SQLSTATE.
SELECT fencing_internal._key_change_condition(0);
\echo :LAST_ERROR_SQLSTATE
-- A hand-made trigger named fencing_guard without protect()'s arguments is
-- not a protected table: the view and later DDL on the table still work.
CREATE TABLE handmade (id int PRIMARY KEY, v text);
CREATE TRIGGER fencing_guard BEFORE INSERT ON handmade FOR EACH ROW EXECUTE FUNCTION fencing.guard();
SELECT count(*) AS listed FROM fencing.protected_tables WHERE relation = 'handmade'::regclass;
ALTER TABLE handmade ADD COLUMN w int;
INSERT INTO handmade VALUES (1, 'x');
\echo :LAST_ERROR_SQLSTATE
DROP TABLE handmade;

DROP TABLE shelf, loose, parent_of_loose, scratchpad, defaults, people, ruled, racks,
	racks_high, racks_mid, racks_mid2;
DROP SCHEMA annex;
