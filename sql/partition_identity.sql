-- A partition registered on its own (detached and attached again) takes the
-- key identity of its protected table when the table's primary key changes:
-- its marks made under the old key get a floor then, and its marks made
-- under the new key raise no floor later (an ATTACH, protect() again).
CREATE TABLE zoned (k int, zone int, v text, PRIMARY KEY (k, zone)) PARTITION BY LIST (zone);
CREATE TABLE zoned_1 PARTITION OF zoned FOR VALUES IN (1);
CREATE TABLE zoned_2 PARTITION OF zoned FOR VALUES IN (2);
SELECT fencing.protect('zoned');
ALTER TABLE zoned DETACH PARTITION zoned_2;
ALTER TABLE zoned ATTACH PARTITION zoned_2 FOR VALUES IN (2);
-- A mark under the key (k, zone): (3, 2) deleted under 70.
INSERT INTO zoned (k, zone, last_fencing_token) VALUES (3, 2, 70);
BEGIN;
SET LOCAL fencing.token = 70;
DELETE FROM zoned WHERE k = 3;
COMMIT;
ALTER TABLE zoned DROP CONSTRAINT zoned_pkey, ADD PRIMARY KEY (zone, k);
-- The partition's identity follows the table's; both get the floor 70.
SELECT relid, key_columns FROM fencing.registry WHERE relid::text LIKE 'zoned%' ORDER BY relid::text;
SELECT relid, token FROM fencing.floors WHERE relid::text LIKE 'zoned%' ORDER BY relid::text;
-- A mark under the key (zone, k): (1, 2) deleted under 100.
INSERT INTO zoned (k, zone, last_fencing_token) VALUES (1, 2, 100);
BEGIN;
SET LOCAL fencing.token = 100;
DELETE FROM zoned WHERE k = 1;
COMMIT;
ALTER TABLE zoned DETACH PARTITION zoned_2;
ALTER TABLE zoned ATTACH PARTITION zoned_2 FOR VALUES IN (2);
SELECT fencing.protect('zoned');
-- No floor rose to 100: the mark of (1, 2) is found under the key it was made under.
SELECT relid, token FROM fencing.floors WHERE relid::text LIKE 'zoned%' ORDER BY relid::text;
-- (2, 2) was never written: accepted above the floor 70.
INSERT INTO zoned (k, zone, last_fencing_token) VALUES (2, 2, 80);
-- (1, 2) under 90: refused by its mark 100; (3, 2) under 60: by the floor 70.
SELECT t.error_of($$INSERT INTO zoned (k, zone, last_fencing_token) VALUES (1, 2, 90)$$);
SELECT t.error_of($$INSERT INTO zoned (k, zone, last_fencing_token) VALUES (3, 2, 60)$$);
-- (1, 2) under 100 and (3, 2) under 70: accepted.
INSERT INTO zoned (k, zone, last_fencing_token) VALUES (1, 2, 100), (3, 2, 70);
SELECT k, zone, last_fencing_token FROM zoned ORDER BY zone, k;
-- Detached, the partition keeps the floor of its marks made under (k, zone).
ALTER TABLE zoned DETACH PARTITION zoned_2;
SELECT relid, token FROM fencing.floors WHERE relid = 'zoned_2'::regclass;
DROP TABLE zoned, zoned_2;
