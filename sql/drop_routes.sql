-- A partition of a protected table does not leave the table's history by
-- any drop route, also without shared_preload_libraries (test/check runs
-- this on a server without it too): every command loads the module first
-- (event trigger fencing_before_drop), whose object access hook sees what
-- it drops.  Each attempt runs in a fresh session, where the module is not
-- loaded yet.

CREATE ROLE regress_drops_owner;
CREATE ROLE regress_drops_part;
GRANT USAGE ON SCHEMA fencing TO regress_drops_owner, regress_drops_part;
GRANT CREATE ON SCHEMA public TO regress_drops_owner;
SELECT format('GRANT CREATE ON DATABASE %I TO regress_drops_owner', current_database()) \gexec

SET ROLE regress_drops_owner;
CREATE EXTENSION citext;
CREATE TABLE stock (id int PRIMARY KEY, v text) PARTITION BY RANGE (id);
CREATE TABLE stock_low PARTITION OF stock FOR VALUES FROM (0) TO (100);
SELECT fencing.protect('stock');
INSERT INTO stock VALUES (1, 'newer holder', 100);

-- ALTER EXTENSION ... ADD of a relation of a protected tree is refused:
-- DROP EXTENSION would drop it.
SELECT t.error_of($$ALTER EXTENSION citext ADD TABLE stock_low$$);
SELECT t.error_of($$ALTER EXTENSION citext ADD TABLE stock$$);

-- A table made a member first and attached afterwards: DROP EXTENSION is
-- refused, in a session where the module was not loaded.
CREATE TABLE stock_mid (id int PRIMARY KEY, v text, last_fencing_token bigint NOT NULL DEFAULT 0);
ALTER EXTENSION citext ADD TABLE stock_mid;
ALTER TABLE stock ATTACH PARTITION stock_mid FOR VALUES FROM (100) TO (200);
INSERT INTO stock VALUES (150, 'newer holder', 100);
\c
SET ROLE regress_drops_owner;
SELECT left(t.error_of($$DROP EXTENSION citext$$), 5) AS sqlstate;
SELECT to_regclass('stock_mid') IS NOT NULL AS still_there;

-- DROP SCHEMA ... CASCADE and DROP OWNED, likewise.
CREATE SCHEMA drops_elsewhere;
CREATE TABLE drops_elsewhere.stock_far PARTITION OF stock FOR VALUES FROM (300) TO (400);
\c
SET ROLE regress_drops_owner;
SELECT left(t.error_of($$DROP SCHEMA drops_elsewhere CASCADE$$), 5) AS sqlstate;
CREATE TABLE stock_theirs PARTITION OF stock FOR VALUES FROM (400) TO (500);
RESET ROLE;
ALTER TABLE stock_theirs OWNER TO regress_drops_part;
\c
SELECT left(t.error_of($$DROP OWNED BY regress_drops_part$$), 5) AS sqlstate;
SELECT to_regclass('stock_theirs') IS NOT NULL AS still_there;
-- Nor does the partition's owner drop its TRUNCATE guard (then truncate it
-- without a token): the protected table's owner's (42501), also in a
-- session where the module was not loaded.
\c
SET ROLE regress_drops_part;
SELECT t.error_of($$DROP TRIGGER fencing_guard_truncate ON stock_theirs$$);
RESET ROLE;
SET ROLE regress_drops_owner;

-- So a stale writer cannot bring back a key the newer holder deleted.
BEGIN;
SET LOCAL fencing.token = 200;
DELETE FROM stock WHERE id = 150;
COMMIT;
SELECT t.error_of($$INSERT INTO stock VALUES (150, 'stale', 50)$$);

-- With the event trigger that loads the module disabled (by a superuser),
-- the module loads only at sql_drop, too late to see which tables were
-- partitions: the drop fails closed.  (With the module preloaded, the hook
-- saw the drop: the partition is refused by name.  Both are 55000.)
RESET ROLE;
ALTER EVENT TRIGGER fencing_before_drop DISABLE;
\c
SELECT left(t.error_of($$DROP TABLE stock_low$$), 5) AS sqlstate;
SELECT to_regclass('stock_low') IS NOT NULL AS still_there;
-- A guard trigger's drop, likewise: refused by name when the hook saw it
-- (42501, preloaded), else failing closed (55000).
\c
SET ROLE regress_drops_part;
SELECT left(t.error_of($$DROP TRIGGER fencing_guard_truncate ON stock_theirs$$), 5)
       IN ('42501', '55000') AS refused;
RESET ROLE;
SELECT count(*) AS truncate_guard FROM pg_trigger
WHERE tgrelid = 'stock_theirs'::regclass AND tgname = 'fencing_guard_truncate';
ALTER EVENT TRIGGER fencing_before_drop ENABLE;

-- Detached first, a partition goes with its history kept by the table.
ALTER TABLE stock DETACH PARTITION stock_mid;
DROP EXTENSION citext;
SELECT to_regclass('stock_mid') IS NULL AS dropped;
CREATE TABLE stock_mid PARTITION OF stock FOR VALUES FROM (100) TO (200);
SELECT t.error_of($$INSERT INTO stock VALUES (150, 'stale', 50)$$);

DROP TABLE stock;
DROP SCHEMA drops_elsewhere;
SELECT format('REVOKE CREATE ON DATABASE %I FROM regress_drops_owner', current_database()) \gexec
REVOKE CREATE ON SCHEMA public FROM regress_drops_owner;
REVOKE USAGE ON SCHEMA fencing FROM regress_drops_owner, regress_drops_part;
DROP ROLE regress_drops_owner, regress_drops_part;
