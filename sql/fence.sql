-- fencing.fence(resource, token): compare and advance a resource's high-water mark.

SELECT fencing.fence('inventory', 34) AS previous;
SELECT fencing.fence('inventory', 34) AS previous;   -- monotonic: the same token again
SELECT fencing.fence('inventory', 33);                -- older: FN001
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.fence('inventory', 40) AS previous;
SELECT fence_token FROM fencing.resources WHERE resource = 'inventory';

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

-- acquire() never issues a token at or below a resource's fence mark.
SELECT fencing.fence('printer', 1000000) AS previous;
SELECT fencing.acquire('printer', 'alice', '10 s') > 1000000 AS above_mark;
SELECT fencing.acquire('printer-2', 'alice', '10 s') > 1000000 AS sequence_moved_up;

-- Bad input.
SELECT t.error_of($$SELECT fencing.fence(NULL, 1)$$);
SELECT t.error_of($$SELECT fencing.fence('', 1)$$);
SELECT t.error_of($$SELECT fencing.fence('inventory', NULL)$$);
SELECT t.error_of($$SELECT fencing.fence('inventory', 0)$$);
SELECT t.error_of($$SELECT fencing.fence('inventory', -42)$$);
SELECT fence_token FROM fencing.resources WHERE resource = 'inventory';

-- The error in full.
SELECT fencing.fence('inventory', 7);
DROP TABLE ledger;
