-- fencing.fence(resource, token): compare and advance a resource's high-water mark.

SELECT fencing.fence('inventory', 34) AS previous;
SELECT fencing.fence('inventory', 34) AS previous;   -- monotonic: the same token again
SELECT fencing.fence('inventory', 33);                -- older: 23T01
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.fence('inventory', 40) AS previous;
SELECT token FROM fencing.fences WHERE resource = 'inventory';

-- Fencing a transaction makes all of its writes fenced, in tables that are not protected too.
CREATE TABLE ledger (id serial PRIMARY KEY, entry text);
BEGIN;
SELECT fencing.fence('inventory', 41) AS previous;
INSERT INTO ledger (entry) VALUES ('written under 41');
COMMIT;
BEGIN;
SELECT fencing.fence('inventory', 39);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO ledger (entry) VALUES ('written under 39');
ROLLBACK;
SELECT entry FROM ledger;
-- A rolled-back fence leaves the mark where it was.
BEGIN;
SELECT fencing.fence('inventory', 100) AS previous;
ROLLBACK;
SELECT fencing.fence('inventory', 42) AS previous;

-- Fence marks are the resource's own: tokens from another lock manager do not
-- move the token sequence, and a fence does not hold up the resource's lease.
SELECT last_value AS before FROM fencing.token_seq \gset
SELECT fencing.fence('printer', 9223372036854775807) AS previous;
SELECT last_value = :before AS sequence_unmoved FROM fencing.token_seq;
BEGIN;
SELECT fencing.fence('printer', 9223372036854775807) AS previous;
SELECT fencing.acquire('printer', 'alice', '10 s') IS NOT NULL AS granted_inside;
COMMIT;

-- Bad input.
SELECT t.error_of($$SELECT fencing.fence(NULL, 1)$$);
SELECT t.error_of($$SELECT fencing.fence('', 1)$$);
SELECT t.error_of($$SELECT fencing.fence('inventory', NULL)$$);
SELECT t.error_of($$SELECT fencing.fence('inventory', 0)$$);
SELECT t.error_of($$SELECT fencing.fence('inventory', -42)$$);
SELECT token FROM fencing.fences WHERE resource = 'inventory';

-- The error in full.
SELECT fencing.fence('inventory', 7);
DROP TABLE ledger;
