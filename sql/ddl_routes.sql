-- Every DDL route around a protected table's history: attaching a table
-- whose key changed, DDL on a single partition, dropping a partition, a key
-- column's precision, hand-made guards.

-- A table protected on key (a), with a deleted key, re-keyed on (b) while
-- unprotected and attached to a protected table: its marks cannot be found
-- under (b), so it gets a floor above them.
CREATE TABLE rekeyed_part (a int PRIMARY KEY, b int NOT NULL);
SELECT fencing.protect('rekeyed_part');
INSERT INTO rekeyed_part VALUES (1, 7, 10);
BEGIN;
SET LOCAL fencing.token = 100;
DELETE FROM rekeyed_part WHERE a = 1;
COMMIT;
SELECT fencing.unprotect('rekeyed_part');
ALTER TABLE rekeyed_part DROP CONSTRAINT rekeyed_part_pkey, ADD PRIMARY KEY (b);
CREATE TABLE by_b (a int NOT NULL, b int NOT NULL, PRIMARY KEY (b)) PARTITION BY RANGE (b);
SELECT fencing.protect('by_b');
ALTER TABLE by_b ATTACH PARTITION rekeyed_part FOR VALUES FROM (0) TO (100);
SELECT relid, token FROM fencing.floors WHERE relid = 'rekeyed_part'::regclass;
SELECT t.error_of($$INSERT INTO by_b VALUES (1, 7, 50)$$);
SELECT t.error_of($$INSERT INTO by_b VALUES (1, 7, 100)$$);

-- DDL on a partition of a protected table is checked as on the table.
CREATE TABLE by_b_high PARTITION OF by_b FOR VALUES FROM (100) TO (200);
SELECT t.error_of($$ALTER TABLE by_b_high ALTER COLUMN last_fencing_token SET DEFAULT 9223372036854775807$$);
SELECT t.error_of($$ALTER TABLE by_b_high ALTER COLUMN last_fencing_token TYPE bigint USING 0$$);
SELECT t.error_of($$ALTER TABLE by_b_high SET UNLOGGED$$);
SELECT t.error_of($$CREATE UNLOGGED TABLE by_b_more PARTITION OF by_b FOR VALUES FROM (200) TO (300)$$);
SELECT to_regclass('by_b_more') IS NULL AS not_created;
SELECT relpersistence FROM pg_class WHERE oid = 'by_b_high'::regclass;
SELECT t.error_of($$INSERT INTO by_b VALUES (1, 150)$$);

-- A partition is not dropped while attached: its rows' tokens would go with
-- it.  Detached first, it leaves the table a floor above them; dropping the
-- whole table with it is fine.
INSERT INTO by_b VALUES (1, 120, 300);
SELECT t.error_of($$DROP TABLE by_b_high$$);
ALTER TABLE by_b DETACH PARTITION by_b_high;
DROP TABLE by_b_high;
CREATE TABLE by_b_high PARTITION OF by_b FOR VALUES FROM (100) TO (200);
SELECT t.error_of($$INSERT INTO by_b VALUES (1, 120, 250)$$);
SELECT t.error_of($$INSERT INTO by_b VALUES (1, 120, 300)$$);
DROP TABLE by_b_high, by_b;

-- A key column's precision is part of its identity: timestamp(6) to
-- timestamp(0) rounds keys, so '00:00:00.4' deleted under 100 would come
-- back as '00:00:00' under 50 without the floor.
CREATE TABLE stamped (ts timestamp(6) PRIMARY KEY, v text);
SELECT fencing.protect('stamped');
INSERT INTO stamped VALUES ('2024-01-01 00:00:00.4', 'x', 10);
BEGIN;
SET LOCAL fencing.token = 100;
DELETE FROM stamped;
COMMIT;
SELECT fencing.unprotect('stamped');
ALTER TABLE stamped ALTER COLUMN ts TYPE timestamp(0);
SELECT fencing.protect('stamped');
SELECT key_types, key_typmods FROM fencing.registry WHERE relid = 'stamped'::regclass;
SELECT t.error_of($$INSERT INTO stamped VALUES ('2024-01-01 00:00:00.4', 'stale', 50)$$);
SELECT count(*) FROM stamped;

DROP TABLE stamped;

-- Every route that drops an attached partition is refused, not only DROP
-- TABLE: DROP SCHEMA ... CASCADE and DROP OWNED too.
CREATE ROLE regress_fencing_part_owner;
CREATE SCHEMA parts;
CREATE TABLE routed (id int PRIMARY KEY) PARTITION BY RANGE (id);
SELECT fencing.protect('routed');
CREATE TABLE parts.routed_low PARTITION OF routed FOR VALUES FROM (0) TO (100);
INSERT INTO routed VALUES (1, 100);
SELECT t.error_of($$DROP SCHEMA parts CASCADE$$);
ALTER TABLE parts.routed_low OWNER TO regress_fencing_part_owner;
SELECT t.error_of($$DROP OWNED BY regress_fencing_part_owner$$);
SELECT count(*) FROM routed;
-- Dropped with its protected table, or after DETACH, it goes.
ALTER TABLE routed DETACH PARTITION parts.routed_low;
DROP SCHEMA parts CASCADE;
CREATE TABLE routed_low PARTITION OF routed FOR VALUES FROM (0) TO (100);
SELECT t.error_of($$INSERT INTO routed VALUES (1, 50)$$);
DROP TABLE routed;
DROP ROLE regress_fencing_part_owner;
