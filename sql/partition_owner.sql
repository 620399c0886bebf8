-- Partitions owned by another role than their protected table: the rights
-- over everything fencing keeps for a protected tree (tokens, marks, floor,
-- options, guard, membership) are the protected table's owner's, at every
-- level, whoever owns the partition.  Its owner writes it under the guard
-- and changes nothing of that: each owner-only function refuses it (42501),
-- as do triggers that fire after the guard, dropping a guard trigger and
-- adding a partition below the table.  The table's owner gets 55000 from the
-- functions that configure the protected table when it names a partition.
-- A detached partition is a table of its own (its owner's).

CREATE ROLE regress_po_app;
CREATE ROLE regress_po_other;
CREATE ROLE regress_po_writer;
CREATE ROLE regress_po_maint;
CREATE ROLE regress_po_trig;
GRANT USAGE ON SCHEMA fencing TO regress_po_app, regress_po_other, regress_po_writer,
  regress_po_maint, regress_po_trig;
GRANT USAGE ON SCHEMA t TO regress_po_app, regress_po_other, regress_po_writer;
CREATE SCHEMA po AUTHORIZATION regress_po_app;
GRANT USAGE, CREATE ON SCHEMA po TO regress_po_other, regress_po_writer, regress_po_maint,
  regress_po_trig;

-- po.p (the application's): p1 (the application's), p2 (another role's
-- leaf), p3 (another role's, partitioned) with p3a (another role's) and p3b.
SET ROLE regress_po_app;
CREATE TABLE po.p (id int PRIMARY KEY, v text) PARTITION BY RANGE (id);
CREATE TABLE po.p1 PARTITION OF po.p FOR VALUES FROM (0) TO (100);
CREATE TABLE po.p2 PARTITION OF po.p FOR VALUES FROM (100) TO (200);
CREATE TABLE po.p3 PARTITION OF po.p FOR VALUES FROM (200) TO (400) PARTITION BY RANGE (id);
CREATE TABLE po.p3a PARTITION OF po.p3 FOR VALUES FROM (200) TO (300);
CREATE TABLE po.p3b PARTITION OF po.p3 FOR VALUES FROM (300) TO (400);
SELECT fencing.protect('po.p');
GRANT SELECT, INSERT, UPDATE, DELETE ON po.p TO regress_po_writer, regress_po_maint;
RESET ROLE;
ALTER TABLE po.p2 OWNER TO regress_po_other;
ALTER TABLE po.p3 OWNER TO regress_po_other;
ALTER TABLE po.p3a OWNER TO regress_po_other;
-- A trigger on a partitioned table is made on each partition, which takes
-- TRIGGER on each: the owners grant it (the table's owner remakes the
-- guard's key-change trigger when another BEFORE UPDATE trigger appears).
SET ROLE regress_po_other;
GRANT ALL ON po.p2, po.p3, po.p3a TO regress_po_app;
GRANT TRIGGER ON po.p2, po.p3, po.p3a TO regress_po_trig;
RESET ROLE;
SET ROLE regress_po_app;
GRANT TRIGGER ON po.p3b TO regress_po_other;
GRANT TRIGGER ON po.p1, po.p3b TO regress_po_trig;
RESET ROLE;
SET ROLE regress_po_writer;
BEGIN;
SET LOCAL fencing.token = 100;
INSERT INTO po.p VALUES (50, 'p1'), (150, 'p2'), (160, 'p2 gone'), (250, 'p3a'), (260, 'p3a gone'),
  (350, 'p3b');
DELETE FROM po.p WHERE id IN (160, 260);
COMMIT;
RESET ROLE;

-- What the protected table holds; each refusal below must leave it as it is.
CREATE FUNCTION t.po_state() RETURNS TABLE (item text) LANGUAGE sql AS $$
	SELECT format('row %s: %s', id, last_fencing_token) FROM po.p
	UNION ALL
	SELECT format('mark %s %s: %s', relid::regclass, left(encode(key, 'hex'), 8), token)
	FROM fencing.deleted_keys WHERE relid::regclass::text LIKE 'po.%'
	UNION ALL
	SELECT format('floor %s: %s', relid::regclass, token) FROM fencing.floors
	WHERE relid::regclass::text LIKE 'po.%'
	UNION ALL
	SELECT format('table %s: enforce %s, maintainer %s', relation, enforce, maintainer)
	FROM fencing.protected_tables WHERE relation::text LIKE 'po.%'
	UNION ALL
	SELECT format('trigger %s on %s: %s %s', tgname, tgrelid::regclass, tgfoid::regproc, tgenabled)
	FROM pg_trigger
	WHERE tgname LIKE 'fencing_guard%' AND tgrelid::regclass::text LIKE 'po.%'
	ORDER BY 1
$$;
GRANT EXECUTE ON FUNCTION t.po_state() TO PUBLIC;
CREATE TABLE t.po_before AS SELECT * FROM t.po_state();
-- Nothing moved since t.po_before: the rows that differ, none expected.
CREATE FUNCTION t.po_changed() RETURNS TABLE (item text) LANGUAGE sql AS $$
	SELECT 'new: ' || n.item FROM (SELECT item FROM t.po_state() EXCEPT SELECT item FROM t.po_before) n
	UNION ALL
	SELECT 'gone: ' || g.item FROM (SELECT item FROM t.po_before EXCEPT SELECT item FROM t.po_state()) g
	ORDER BY 1
$$;
SELECT item FROM t.po_before;

-- The partition owner, on its leaf, its partitioned partition and the leaf
-- below: every owner-only function refuses it with 42501 before any lock.
SET ROLE regress_po_other;
SELECT fencing.reset_token('po.p2', '{"id": 150}', 1);
SELECT target, t.error_of(format(call, target)) AS result
FROM unnest(ARRAY['po.p2', 'po.p3', 'po.p3a']) target,
     unnest(ARRAY[$$SELECT fencing.reset_token(%L, '{"id": 150}', 1)$$,
                  $$SELECT fencing.reset_token(%L, '{"id": 160}', 1)$$,
                  $$SELECT fencing.reset_token(%L, '{"id": 260}', 1)$$,
                  $$SELECT fencing.compact(%L, 1)$$,
                  $$SELECT fencing.set_enforce(%L, false)$$,
                  $$SELECT fencing.set_maintainer(%L, 'regress_po_other')$$,
                  $$SELECT fencing.unprotect(%L)$$,
                  $$SELECT fencing.protect(%L)$$,
                  $$SELECT fencing.protect(%L, enforce => false)$$]) call
ORDER BY 1, 2;
\set VERBOSITY terse
CALL fencing.compact_in_batches('po.p2', 1);
CALL fencing.compact_in_batches('po.p3a', 1);
\set VERBOSITY default
-- Nor can it name itself maintainer of the table, or make maintenance writes.
SELECT t.error_of($$SELECT fencing.set_maintainer('po.p', 'regress_po_other')$$);
BEGIN;
SET LOCAL fencing.maintenance = on;
SELECT t.error_of($$UPDATE po.p2 SET v = 'maintained' WHERE id = 150$$);
SELECT t.error_of($$UPDATE po.p SET v = 'maintained' WHERE id = 250$$);
COMMIT;
RESET ROLE;
SELECT item FROM t.po_changed();

-- A stale writer is still refused on every partition.
SET ROLE regress_po_writer;
BEGIN;
SET LOCAL fencing.token = 5;
SELECT t.error_of($$UPDATE po.p SET v = 'stale' WHERE id = 150$$);
SELECT t.error_of($$INSERT INTO po.p VALUES (160, 'stale')$$);
SELECT t.error_of($$INSERT INTO po.p VALUES (260, 'stale')$$);
COMMIT;
RESET ROLE;

-- Triggers: one that fires after the guard (BEFORE row, INSERT or UPDATE,
-- named after fencing_guard) could store any token under a writer's write,
-- so only the table's owner makes one; before the guard, or AFTER, or for
-- DELETE, the partition owner may.  A role granted TRIGGER on the table is
-- refused the same.
SET ROLE regress_po_other;
CREATE FUNCTION po.lower_token() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW.last_fencing_token := 1;
	RETURN NEW;
END
$$;
SELECT t.error_of($$CREATE TRIGGER zz_lower BEFORE INSERT OR UPDATE ON po.p2
  FOR EACH ROW EXECUTE FUNCTION po.lower_token()$$);
SELECT t.error_of($$CREATE TRIGGER zz_lower BEFORE UPDATE ON po.p3
  FOR EACH ROW EXECUTE FUNCTION po.lower_token()$$);
SELECT t.error_of($$CREATE TRIGGER fencing_guard_z BEFORE INSERT ON po.p3a
  FOR EACH ROW EXECUTE FUNCTION po.lower_token()$$);
CREATE TRIGGER aa_first BEFORE UPDATE ON po.p2 FOR EACH ROW EXECUTE FUNCTION po.lower_token();
CREATE TRIGGER zz_delete BEFORE DELETE ON po.p2 FOR EACH ROW EXECUTE FUNCTION po.lower_token();
SELECT t.error_of($$ALTER TRIGGER aa_first ON po.p2 RENAME TO zz_first$$);
SELECT t.error_of($$CREATE OR REPLACE TRIGGER zz_delete BEFORE DELETE OR UPDATE ON po.p2
  FOR EACH ROW EXECUTE FUNCTION po.lower_token()$$);
RESET ROLE;
-- A trigger before the guard changes what the row carries: the guard then
-- stores the token it checked (the transaction's), or checks the assigned
-- one (stale here).
SET ROLE regress_po_writer;
BEGIN;
SET LOCAL fencing.token = 100;
UPDATE po.p SET v = 'through aa_first' WHERE id = 150;
SELECT id, v, last_fencing_token FROM po.p WHERE id = 150;
ROLLBACK;
BEGIN;
SELECT t.error_of($$UPDATE po.p SET v = 'assigned', last_fencing_token = 100 WHERE id = 150$$);
ROLLBACK;
RESET ROLE;
SET ROLE regress_po_other;
DROP TRIGGER aa_first ON po.p2;
DROP TRIGGER zz_delete ON po.p2;
RESET ROLE;
GRANT TRIGGER ON po.p TO regress_po_trig;
SET ROLE regress_po_trig;
SELECT t.error_of($$CREATE TRIGGER zz_lower BEFORE UPDATE ON po.p
  FOR EACH ROW EXECUTE FUNCTION po.lower_token()$$);
RESET ROLE;
REVOKE TRIGGER ON po.p FROM regress_po_trig;
-- The table's owner may (its table: the guard checks before such a trigger).
SET ROLE regress_po_app;
CREATE TRIGGER zz_stamp BEFORE INSERT ON po.p FOR EACH ROW EXECUTE FUNCTION po.lower_token();
DROP TRIGGER zz_stamp ON po.p;
RESET ROLE;
SELECT item FROM t.po_changed();

-- The TRUNCATE guard of a partition is its own trigger: its owner may not
-- drop it (and then truncate without a token); the table's owner, or the
-- drop of the whole table, may.
SET ROLE regress_po_other;
SELECT t.error_of($$DROP TRIGGER fencing_guard_truncate ON po.p2$$);
SELECT t.error_of($$DROP TRIGGER fencing_guard_truncate ON po.p3a$$);
SELECT t.error_of($$TRUNCATE po.p2$$);
RESET ROLE;
BEGIN;
DROP TRIGGER fencing_guard_truncate ON po.p2;
ROLLBACK;
SELECT item FROM t.po_changed();

-- Nor may it, or a role granted TRIGGER, put a function of its own in a
-- guard trigger's place: CREATE OR REPLACE TRIGGER needs only TRIGGER and
-- keeps the replaced trigger's name, so on a relation of the tree a trigger
-- named like the guard's is the table owner's to make or replace (42501).
-- (PostgreSQL itself refuses to replace the clones of the table's row
-- triggers on a partition, 42710.)
SET ROLE regress_po_other;
CREATE FUNCTION po.no_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RETURN COALESCE(NEW, OLD);
END
$$;
SELECT t.error_of($$CREATE OR REPLACE TRIGGER fencing_guard_truncate BEFORE TRUNCATE ON po.p2
  FOR EACH STATEMENT EXECUTE FUNCTION po.no_check()$$);
SELECT t.error_of($$CREATE OR REPLACE TRIGGER fencing_guard_truncate BEFORE TRUNCATE ON po.p3
  FOR EACH STATEMENT EXECUTE FUNCTION po.no_check()$$);
SELECT t.error_of($$CREATE OR REPLACE TRIGGER fencing_guard_truncate BEFORE TRUNCATE ON po.p3a
  FOR EACH STATEMENT EXECUTE FUNCTION po.no_check()$$);
SELECT t.error_of($$CREATE OR REPLACE TRIGGER fencing_guard BEFORE INSERT OR UPDATE OR DELETE
  ON po.p2 FOR EACH ROW EXECUTE FUNCTION po.no_check()$$);
SELECT t.error_of($$TRUNCATE po.p2$$);
RESET ROLE;
SET ROLE regress_po_trig;
SELECT t.error_of($$CREATE OR REPLACE TRIGGER fencing_guard_truncate BEFORE TRUNCATE ON po.p3a
  FOR EACH STATEMENT EXECUTE FUNCTION po.no_check()$$);
RESET ROLE;
GRANT TRIGGER ON po.p TO regress_po_trig;
SET ROLE regress_po_trig;
SELECT t.error_of($$CREATE OR REPLACE TRIGGER fencing_guard BEFORE INSERT OR UPDATE OR DELETE
  ON po.p FOR EACH ROW EXECUTE FUNCTION po.no_check()$$);
SELECT t.error_of($$CREATE OR REPLACE TRIGGER fencing_guard_key_changes AFTER UPDATE
  ON po.p FOR EACH ROW EXECUTE FUNCTION po.no_check()$$);
RESET ROLE;
REVOKE TRIGGER ON po.p FROM regress_po_trig;
-- The writers' stale writes are still refused through every guard.
SET ROLE regress_po_writer;
BEGIN;
SET LOCAL fencing.token = 5;
SELECT t.error_of($$UPDATE po.p SET v = 'stale' WHERE id = 150$$);
ROLLBACK;
RESET ROLE;
SELECT item FROM t.po_changed();

-- Membership: below a protected table, only its owner adds partitions (the
-- partitioned partition's owner may not attach a table with rows of its
-- own, nor create one); detaching is PostgreSQL's to allow and leaves the
-- table the partition's history (marks, floor).
SET ROLE regress_po_other;
CREATE TABLE po.mine (id int PRIMARY KEY, v text, last_fencing_token bigint NOT NULL DEFAULT 0);
INSERT INTO po.mine VALUES (300, 'brought', 1);
SELECT t.error_of($$CREATE TABLE po.p3c PARTITION OF po.p3 FOR VALUES FROM (400) TO (500)$$);
ALTER TABLE po.p3 DETACH PARTITION po.p3b;
SELECT t.error_of($$ALTER TABLE po.p3 ATTACH PARTITION po.mine FOR VALUES FROM (300) TO (400)$$);
RESET ROLE;
SELECT item FROM t.po_changed();
ALTER TABLE po.p3 ATTACH PARTITION po.p3b FOR VALUES FROM (300) TO (400);
DROP TABLE po.mine;

-- The table's owner on a partition: the functions that configure the
-- protected table refuse it (55000); reset_token() repairs a row through it.
SET ROLE regress_po_app;
SELECT call, t.error_of(format(call, 'po.p2')) AS result
FROM unnest(ARRAY[$$SELECT fencing.compact(%L, 1)$$,
                  $$SELECT fencing.set_enforce(%L, false)$$,
                  $$SELECT fencing.set_maintainer(%L, 'regress_po_maint')$$,
                  $$SELECT fencing.unprotect(%L)$$,
                  $$SELECT fencing.protect(%L)$$]) call
ORDER BY 1;
\set VERBOSITY terse
CALL fencing.compact_in_batches('po.p3', 1);
\set VERBOSITY default
SELECT fencing.reset_token('po.p2', '{"id": 150}', 90);
SELECT fencing.set_maintainer('po.p', 'regress_po_maint');
RESET ROLE;
SELECT item FROM t.po_changed();
-- The maintainer the table's owner named writes every partition, whoever owns it.
SET ROLE regress_po_maint;
BEGIN;
SET LOCAL fencing.maintenance = on;
UPDATE po.p SET v = v || ' (maintained)' WHERE id IN (150, 250);
COMMIT;
RESET ROLE;
SELECT id, v, last_fencing_token FROM po.p WHERE id IN (150, 250) ORDER BY id;

-- A partition attached later, and owned by another role: the same.
CREATE TABLE po.p4 (id int PRIMARY KEY, v text, last_fencing_token bigint NOT NULL DEFAULT 0);
ALTER TABLE po.p4 OWNER TO regress_po_other;
ALTER TABLE po.p ATTACH PARTITION po.p4 FOR VALUES FROM (400) TO (500);
SET ROLE regress_po_writer;
BEGIN;
SET LOCAL fencing.token = 100;
INSERT INTO po.p VALUES (450, 'p4');
COMMIT;
RESET ROLE;
SET ROLE regress_po_other;
SELECT t.error_of($$SELECT fencing.reset_token('po.p4', '{"id": 450}', 1)$$);
SELECT t.error_of($$DROP TRIGGER fencing_guard_truncate ON po.p4$$);
RESET ROLE;
SELECT id, last_fencing_token FROM po.p4;

-- Detached, a partition is a table of its own: its owner's, unprotected
-- (55000 until it protects it again).  The protected table keeps the marks
-- of its keys and a floor at its rows' highest token, so what its owner then
-- does to it (lower its tokens) reaches nothing of the protected table, and
-- it cannot attach it again.
SET ROLE regress_po_other;
ALTER TABLE po.p3 DETACH PARTITION po.p3a;
SELECT t.error_of($$SELECT fencing.reset_token('po.p3a', '{"id": 250}', 1)$$);
-- Its TRUNCATE guard, left over, is its own to drop now.
DROP TRIGGER fencing_guard_truncate ON po.p3a;
SELECT fencing.protect('po.p3a');
SELECT fencing.reset_token('po.p3a', '{"id": 250}', 1);
SELECT id, last_fencing_token FROM po.p3a;
SELECT fencing.set_enforce('po.p3a', false);
SELECT fencing.unprotect('po.p3a');
SELECT t.error_of($$ALTER TABLE po.p3 ATTACH PARTITION po.p3a FOR VALUES FROM (200) TO (300)$$);
RESET ROLE;
CREATE TABLE po.p3n PARTITION OF po.p3 FOR VALUES FROM (200) TO (300);
SELECT relid::regclass, token FROM fencing.deleted_keys
WHERE key = t.mark_key(t.img(250)) OR key = t.mark_key(t.img(260)) ORDER BY 1, 2;
SELECT relid::regclass, token FROM fencing.floors WHERE relid::regclass::text LIKE 'po.%' ORDER BY 1;
SET ROLE regress_po_writer;
BEGIN;
SET LOCAL fencing.token = 5;
SELECT t.error_of($$INSERT INTO po.p VALUES (250, 'stale, detached key')$$);
SELECT t.error_of($$INSERT INTO po.p VALUES (260, 'stale, deleted key')$$);
ROLLBACK;
RESET ROLE;

-- A partition protected on its own, below a table that is not protected, is
-- its owner's, like any protected table.
CREATE TABLE po.u (id int PRIMARY KEY, v text, last_fencing_token bigint NOT NULL DEFAULT 0)
  PARTITION BY RANGE (id);
CREATE TABLE po.u1 PARTITION OF po.u FOR VALUES FROM (0) TO (10);
ALTER TABLE po.u1 OWNER TO regress_po_other;
SET ROLE regress_po_other;
SELECT fencing.protect('po.u1');
SELECT fencing.set_enforce('po.u1', false);
SELECT fencing.unprotect('po.u1');
RESET ROLE;

-- Dropping the whole tree drops its guard triggers with it.
DROP TABLE po.p;
DROP TABLE po.p3a, po.u;
SELECT count(*) AS left_over FROM fencing.registry WHERE relid::regclass::text LIKE 'po.%';
DROP SCHEMA po CASCADE;
DROP FUNCTION t.po_state(), t.po_changed();
DROP TABLE t.po_before;
REVOKE USAGE ON SCHEMA fencing FROM regress_po_app, regress_po_other, regress_po_writer,
  regress_po_maint, regress_po_trig;
REVOKE USAGE ON SCHEMA t FROM regress_po_app, regress_po_other, regress_po_writer;
DROP ROLE regress_po_app, regress_po_other, regress_po_writer, regress_po_maint, regress_po_trig;
