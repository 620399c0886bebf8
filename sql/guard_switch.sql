-- A protected table's guard stays on, whoever owns its partitions: the
-- owner of a partition (another role than the table's) cannot switch the
-- guard's triggers off, nor can a superuser by DDL; the state the command
-- leaves is checked, whatever its shape.  Temporary tables are not
-- protected, and a new table inherits no state left under its OID.

CREATE ROLE regress_switch_owner;
CREATE ROLE regress_switch_part;
CREATE ROLE regress_switch_writer;
GRANT USAGE ON SCHEMA fencing TO regress_switch_owner, regress_switch_part, regress_switch_writer;
GRANT CREATE ON SCHEMA public TO regress_switch_owner, regress_switch_part;

SET ROLE regress_switch_owner;
CREATE TABLE ledger (id int PRIMARY KEY, v text) PARTITION BY RANGE (id);
CREATE TABLE ledger_low PARTITION OF ledger FOR VALUES FROM (0) TO (100);
SELECT fencing.protect('ledger');
GRANT SELECT, INSERT, UPDATE, DELETE ON ledger TO regress_switch_writer;
RESET ROLE;
-- The partition's owner is another role.
ALTER TABLE ledger_low OWNER TO regress_switch_part;
INSERT INTO ledger VALUES (1, 'a', 100);

-- The partition's owner: every way of switching its guard off is refused.
SET ROLE regress_switch_part;
SELECT t.error_of($$ALTER TABLE ledger_low DISABLE TRIGGER fencing_guard$$);
SELECT t.error_of($$ALTER TABLE ledger_low DISABLE TRIGGER fencing_guard_new_keys$$);
SELECT t.error_of($$ALTER TABLE ledger_low DISABLE TRIGGER fencing_guard_truncate$$);
SELECT t.error_of($$ALTER TABLE ledger_low DISABLE TRIGGER USER$$);
SELECT t.error_of($$ALTER TABLE ledger_low ENABLE REPLICA TRIGGER fencing_guard$$);
SELECT t.error_of($$ALTER TABLE ledger_low ENABLE ALWAYS TRIGGER fencing_guard$$);
-- Several subcommands in one ALTER: the state they leave counts.
SELECT t.error_of($$ALTER TABLE ledger_low ENABLE TRIGGER fencing_guard, DISABLE TRIGGER fencing_guard_new_keys$$);
SELECT t.error_of($$ALTER TABLE ledger_low DISABLE TRIGGER fencing_guard, ENABLE TRIGGER fencing_guard$$);
-- Enabling on origin, the guard's own state, is not refused.
SELECT t.error_of($$ALTER TABLE ledger_low ENABLE TRIGGER fencing_guard$$);
SELECT t.error_of($$ALTER TABLE ledger_low ENABLE TRIGGER USER$$);
RESET ROLE;

-- A superuser is refused too: on the partition, on the table (recursing to
-- its partitions), on the table alone (ONLY).
SELECT t.error_of($$ALTER TABLE ledger_low DISABLE TRIGGER ALL$$);
SELECT t.error_of($$ALTER TABLE ledger DISABLE TRIGGER fencing_guard$$);
SELECT t.error_of($$ALTER TABLE ONLY ledger DISABLE TRIGGER fencing_guard$$);
SELECT t.error_of($$ALTER TABLE ledger DISABLE TRIGGER ALL$$);
SELECT t.error_of($$ALTER TABLE ledger ENABLE REPLICA TRIGGER fencing_guard_key_changes$$);
SELECT tgrelid::regclass, tgname, tgenabled FROM pg_trigger
WHERE tgrelid IN ('ledger'::regclass, 'ledger_low'::regclass) AND tgname LIKE 'fencing%'
ORDER BY 1, 2;

-- So writes through the table to the partition stay guarded: a stale UPDATE
-- and a stale re-insert of a deleted key are refused.
SET ROLE regress_switch_writer;
BEGIN;
SET LOCAL fencing.token = 200;
DELETE FROM ledger WHERE id = 1;
COMMIT;
SELECT t.error_of($$INSERT INTO ledger VALUES (1, 'stale', 150)$$);
INSERT INTO ledger VALUES (2, 'b', 300);
SELECT t.error_of($$UPDATE ledger SET v = 'stale', last_fencing_token = 250 WHERE id = 2$$);
RESET ROLE;

-- A table attached (or created as a partition) whose guard-named trigger is
-- disabled: the trigger the table brings is refused with it.
CREATE TABLE ledger_mid (id int PRIMARY KEY, v text, last_fencing_token bigint NOT NULL DEFAULT 0);
CREATE TRIGGER fencing_guard_truncate BEFORE TRUNCATE ON ledger_mid
FOR EACH STATEMENT EXECUTE FUNCTION fencing.guard('last_fencing_token', 'monotonic');
ALTER TABLE ledger_mid DISABLE TRIGGER fencing_guard_truncate;
SELECT t.error_of($$ALTER TABLE ledger ATTACH PARTITION ledger_mid FOR VALUES FROM (100) TO (200)$$);
SELECT relispartition FROM pg_class WHERE oid = 'ledger_mid'::regclass;
-- Attached with its trigger enabled, it is guarded; DISABLE afterwards is refused.
ALTER TABLE ledger_mid ENABLE TRIGGER fencing_guard_truncate;
SELECT t.error_of($$ALTER TABLE ledger ATTACH PARTITION ledger_mid FOR VALUES FROM (100) TO (200)$$);
SELECT t.error_of($$ALTER TABLE ledger_mid DISABLE TRIGGER fencing_guard$$);

-- A sub-partitioned partition: its own partitions too.
CREATE TABLE ledger_high PARTITION OF ledger FOR VALUES FROM (200) TO (400) PARTITION BY RANGE (id);
CREATE TABLE ledger_high_a PARTITION OF ledger_high FOR VALUES FROM (200) TO (300);
SELECT t.error_of($$ALTER TABLE ledger_high DISABLE TRIGGER fencing_guard$$);
SELECT t.error_of($$ALTER TABLE ledger_high_a DISABLE TRIGGER fencing_guard$$);

-- Unprotected, the table's triggers are the owners' business again.
ALTER TABLE ledger_low OWNER TO regress_switch_owner;
ALTER TABLE ledger_mid OWNER TO regress_switch_owner;
ALTER TABLE ledger_high OWNER TO regress_switch_owner;
ALTER TABLE ledger_high_a OWNER TO regress_switch_owner;
SELECT fencing.unprotect('ledger');
SELECT t.error_of($$ALTER TABLE ledger_mid DISABLE TRIGGER ALL$$);
DROP TABLE ledger;

-- Temporary tables are not protected: dropped at commit or at the session's
-- end, they fire no sql_drop, and their state would stay behind.
CREATE TEMP TABLE scratch (id int PRIMARY KEY);
SELECT t.error_of($$SELECT fencing.protect('scratch')$$);
CREATE TEMP TABLE scratch_tree (id int PRIMARY KEY) PARTITION BY RANGE (id);
CREATE TEMP TABLE scratch_part PARTITION OF scratch_tree FOR VALUES FROM (0) TO (10);
SELECT t.error_of($$SELECT fencing.protect('scratch_tree')$$);
SELECT t.error_of($$SELECT fencing.protect('scratch_part')$$);
BEGIN;
CREATE TEMP TABLE scratch_tx (id int PRIMARY KEY) ON COMMIT DROP;
SELECT t.error_of($$SELECT fencing.protect('scratch_tx')$$);
COMMIT;
SELECT count(*) FROM fencing.registry WHERE relid::oid NOT IN (SELECT oid FROM pg_class);

-- State under OIDs no relation has (left by a drop the extension did not
-- see) is not inherited by the relation that takes such an OID next: it
-- goes when the relation is created.
CREATE TABLE probe ();
SELECT 'probe'::regclass::oid AS probe \gset
DROP TABLE probe;
INSERT INTO fencing.registry (relid, token_column, mode, protected)
SELECT o::oid::regclass, 'last_fencing_token', 'monotonic', true
FROM generate_series(:probe + 1, :probe + 100) o;
INSERT INTO fencing.floors (relid, token)
SELECT o::oid::regclass, 1000 FROM generate_series(:probe + 1, :probe + 100) o;
INSERT INTO fencing.deleted_keys (relid, key, token)
SELECT o::oid::regclass, t.mark_key(int4send(1)), 1000 FROM generate_series(:probe + 1, :probe + 100) o;
CREATE TABLE newcomer (id int PRIMARY KEY, v text);
SELECT 'newcomer'::regclass::oid BETWEEN :probe + 1 AND :probe + 100 AS oid_was_left_over;
SELECT (SELECT count(*) FROM fencing.registry WHERE relid = 'newcomer'::regclass) AS registry,
       (SELECT count(*) FROM fencing.floors WHERE relid = 'newcomer'::regclass) AS floors,
       (SELECT count(*) FROM fencing.deleted_keys WHERE relid = 'newcomer'::regclass) AS marks;
SELECT count(*) FROM fencing.registry WHERE relid::oid BETWEEN :probe + 1 AND :probe + 100;
-- Protected, it takes a key under any token: nothing of the old OID's.
SELECT fencing.protect('newcomer');
INSERT INTO newcomer VALUES (1, 'first', 5);
DELETE FROM fencing.deleted_keys WHERE relid::oid BETWEEN :probe + 1 AND :probe + 100;
DELETE FROM fencing.floors WHERE relid::oid BETWEEN :probe + 1 AND :probe + 100;
DELETE FROM fencing.registry WHERE relid::oid BETWEEN :probe + 1 AND :probe + 100;
-- The same for CREATE TABLE AS and SELECT INTO.
SELECT 'newcomer'::regclass::oid AS probe \gset
INSERT INTO fencing.registry (relid, token_column, mode, protected)
SELECT o::oid::regclass, 'last_fencing_token', 'monotonic', true
FROM generate_series(:probe + 1, :probe + 100) o;
CREATE TABLE copied AS SELECT 1 AS id;
SELECT * INTO selected FROM copied;
SELECT count(*) FROM fencing.registry WHERE relid IN ('copied'::regclass, 'selected'::regclass);
DELETE FROM fencing.registry WHERE relid::oid BETWEEN :probe + 1 AND :probe + 100;
DROP TABLE newcomer, copied, selected;

REVOKE CREATE ON SCHEMA public FROM regress_switch_owner, regress_switch_part;
REVOKE USAGE ON SCHEMA fencing FROM regress_switch_owner, regress_switch_part, regress_switch_writer;
DROP ROLE regress_switch_owner, regress_switch_part, regress_switch_writer;
