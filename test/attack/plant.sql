-- The attacker's objects (run as the attacker after canary.sql): every kind
-- of code it controls, on its own tables, protected by fencing.protect() or
-- by hand-made triggers named like the guard's.
\set ON_ERROR_STOP 1

-- casts: composite types with an IMPLICIT cast to bigint through the
-- attacker's function; a hand-made guard names such a column as token.
CREATE TYPE attacker.comp AS (v bigint);
CREATE FUNCTION attacker.comp_to_bigint(x attacker.comp) RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM attacker.canary('casts:comp_to_bigint'); RETURN (x).v; END $$;
CREATE CAST (attacker.comp AS bigint) WITH FUNCTION attacker.comp_to_bigint(attacker.comp) AS IMPLICIT;

CREATE TABLE attacker.cast_parts (k int PRIMARY KEY, c attacker.comp) PARTITION BY RANGE (k);
CREATE TABLE attacker.cast_p1 PARTITION OF attacker.cast_parts FOR VALUES FROM (0) TO (100);
CREATE TABLE attacker.cast_p2 PARTITION OF attacker.cast_parts FOR VALUES FROM (100) TO (200);
INSERT INTO attacker.cast_parts VALUES (1, ROW(5)), (150, ROW(7));
CREATE TRIGGER fencing_guard BEFORE INSERT OR UPDATE OR DELETE ON attacker.cast_parts
	FOR EACH ROW EXECUTE FUNCTION fencing.guard('c', 'monotonic');

CREATE TABLE attacker.cast_tab (k int PRIMARY KEY, c attacker.comp);
INSERT INTO attacker.cast_tab VALUES (1, ROW(5));
CREATE TRIGGER fencing_guard BEFORE INSERT OR UPDATE OR DELETE ON attacker.cast_tab
	FOR EACH ROW EXECUTE FUNCTION fencing.guard('c', 'monotonic');

-- A token column of a domain whose CHECK calls the attacker's function.
CREATE DOMAIN attacker.tokdom AS bigint CHECK (attacker.imm('casts:domain_check'));
CREATE TABLE attacker.dom_tab (k int PRIMARY KEY, last_fencing_token attacker.tokdom NOT NULL DEFAULT 0);
INSERT INTO attacker.dom_tab VALUES (1, 3);

-- views: a view listed as protected (hand-made INSTEAD OF trigger named
-- fencing_guard) whose token column calls the attacker's function.
CREATE VIEW attacker.guarded_view AS
	SELECT 1 AS k, attacker.canary_bigint('views:view_column') AS last_fencing_token;
CREATE TRIGGER fencing_guard INSTEAD OF INSERT OR UPDATE OR DELETE ON attacker.guarded_view
	FOR EACH ROW EXECUTE FUNCTION fencing.guard('last_fencing_token', 'monotonic');
-- A protected table with a rule.
CREATE TABLE attacker.rule_tab (k int PRIMARY KEY, v text);
SELECT fencing.protect('attacker.rule_tab');
CREATE RULE rule_tab_log AS ON DELETE TO attacker.rule_tab DO ALSO SELECT attacker.canary('views:rule');

-- injection: tables whose hand-made fencing_guard has a WHEN clause or a
-- column name carrying SQL after "EXECUTE FUNCTION fencing.guard(".
-- armed with pre => false: the next BEFORE UPDATE trigger created on it
-- remakes the key-change trigger; with pre => true: the next ALTER TABLE.
CREATE FUNCTION attacker.arm(tbl regclass, when_sql text, pre boolean) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM fencing.protect(tbl);
	IF pre THEN
		EXECUTE format('CREATE TRIGGER zz_before BEFORE UPDATE ON %s FOR EACH ROW '
		               'EXECUTE FUNCTION attacker.canary_trigger(%L)', tbl, 'triggers:arm_before_update');
	END IF;
	EXECUTE format('DROP TRIGGER fencing_guard ON %s', tbl);
	EXECUTE format('CREATE TRIGGER fencing_guard BEFORE UPDATE ON %s FOR EACH ROW WHEN (%s) '
	               'EXECUTE FUNCTION fencing.guard(%L, %L)', tbl, when_sql, 'last_fencing_token', 'monotonic');
	IF pre THEN
		EXECUTE format('DROP TRIGGER zz_before ON %s', tbl);
	END IF;
END
$$;
CREATE TABLE attacker.inj_ddl (k int PRIMARY KEY, x text);
SELECT attacker.arm('attacker.inj_ddl',
	$w$OLD.x IS DISTINCT FROM 'EXECUTE FUNCTION fencing.guard(); SELECT attacker.c(1); --'$w$, false);
CREATE TABLE attacker.inj_col (k int PRIMARY KEY, "EXECUTE FUNCTION fencing.guard();SELECT attacker.c(2);--" int);
SELECT attacker.arm('attacker.inj_col',
	$w$OLD."EXECUTE FUNCTION fencing.guard();SELECT attacker.c(2);--" IS NOT NULL$w$, false);
CREATE TABLE attacker.inj_owner (k int PRIMARY KEY, x text);
SELECT attacker.arm('attacker.inj_owner',
	$w$OLD.x IS DISTINCT FROM 'EXECUTE FUNCTION fencing.guard(); SELECT attacker.c(3); --'$w$, true);
CREATE TABLE attacker.inj_alter (k int PRIMARY KEY, x text);
SELECT attacker.arm('attacker.inj_alter',
	$w$OLD.x IS DISTINCT FROM 'EXECUTE FUNCTION fencing.guard(); SELECT attacker.c(4); --'$w$, true);
CREATE TABLE attacker.inj_self (k int PRIMARY KEY, x text);
SELECT attacker.arm('attacker.inj_self',
	$w$OLD.x IS DISTINCT FROM 'EXECUTE FUNCTION fencing.guard(); SELECT attacker.c(5); --'$w$, true);

-- shadowing: a protected partitioned table whose partitions the attacker
-- detaches while a temporary view / table has a partition's name.
CREATE TYPE attacker.comp_shadow AS (v bigint);
CREATE FUNCTION attacker.comp_shadow_to_bigint(x attacker.comp_shadow) RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM attacker.canary('shadowing:temp_table_cast'); RETURN (x).v; END $$;
CREATE CAST (attacker.comp_shadow AS bigint) WITH FUNCTION attacker.comp_shadow_to_bigint(attacker.comp_shadow) AS IMPLICIT;
CREATE TABLE attacker.shadow_parts (k int PRIMARY KEY, v text) PARTITION BY RANGE (k);
CREATE TABLE attacker.shadow_p1 PARTITION OF attacker.shadow_parts FOR VALUES FROM (0) TO (100);
CREATE TABLE attacker.shadow_p2 PARTITION OF attacker.shadow_parts FOR VALUES FROM (100) TO (200);
CREATE TABLE attacker.shadow_p3 PARTITION OF attacker.shadow_parts FOR VALUES FROM (200) TO (300);
SELECT fencing.protect('attacker.shadow_parts');
BEGIN;
SET LOCAL fencing.token = 10;
INSERT INTO attacker.shadow_parts VALUES (1, 'a'), (150, 'b'), (250, 'c');
COMMIT;

-- planner: IMMUTABLE functions the planner folds when anyone plans a query
-- on the table: partial-index predicates, index expressions, extended
-- statistics, CHECK constraints, generated columns.
CREATE TABLE attacker.plan_tab (
	k int PRIMARY KEY,
	v int CHECK (attacker.imm('planner:check_constraint') OR v IS NULL),
	g int GENERATED ALWAYS AS (v + attacker.imm_int('planner:generated_column')) STORED
);
SELECT fencing.protect('attacker.plan_tab');
CREATE INDEX plan_partial ON attacker.plan_tab (v) WHERE attacker.imm('planner:partial_index_predicate');
CREATE INDEX plan_expr ON attacker.plan_tab ((v + attacker.imm_int('planner:index_expression')));
CREATE STATISTICS attacker.plan_stats ON (v + attacker.imm_int('planner:extended_statistics')) FROM attacker.plan_tab;
BEGIN;
SET LOCAL fencing.token = 10;
INSERT INTO attacker.plan_tab (k, v) VALUES (1, 1), (2, 2);
COMMIT;
ANALYZE attacker.plan_tab;
-- The same on the partitions of a protected partitioned table (DETACH path).
CREATE TABLE attacker.plan_parts (k int PRIMARY KEY, v int) PARTITION BY RANGE (k);
CREATE TABLE attacker.plan_pp1 PARTITION OF attacker.plan_parts FOR VALUES FROM (0) TO (100);
CREATE TABLE attacker.plan_pp2 (k int NOT NULL, v int CHECK (attacker.imm('planner:partition_check') OR v IS NULL),
	last_fencing_token bigint NOT NULL DEFAULT 0,
	CHECK (k >= 100 AND attacker.imm('planner:partition_check_k')));
CREATE INDEX plan_pp2_partial ON attacker.plan_pp2 (last_fencing_token)
	WHERE attacker.imm('planner:partition_partial_index');
CREATE INDEX plan_pp2_expr ON attacker.plan_pp2 ((last_fencing_token + attacker.imm_int('planner:partition_index_expression')));
CREATE STATISTICS attacker.plan_pp2_stats ON (v + attacker.imm_int('planner:partition_statistics')) FROM attacker.plan_pp2;
SELECT fencing.protect('attacker.plan_parts');
ALTER TABLE attacker.plan_parts ATTACH PARTITION attacker.plan_pp2 FOR VALUES FROM (100) TO (200);
BEGIN;
SET LOCAL fencing.token = 10;
INSERT INTO attacker.plan_parts (k, v) VALUES (1, 1), (150, 2);
COMMIT;
-- A table to attach later, with the same plantings.
CREATE TABLE attacker.plan_pp3 (k int NOT NULL, v int, last_fencing_token bigint NOT NULL DEFAULT 0,
	CHECK (attacker.imm('planner:attach_check')));
CREATE INDEX plan_pp3_partial ON attacker.plan_pp3 (last_fencing_token) WHERE attacker.imm('planner:attach_partial_index');
INSERT INTO attacker.plan_pp3 VALUES (250, 1, 0);

-- triggers: a protected table with triggers of every kind and name.
CREATE TABLE attacker.trig_tab (k int PRIMARY KEY, v text,
	d bigint DEFAULT attacker.canary_bigint('triggers:column_default'));
SELECT fencing.protect('attacker.trig_tab');
CREATE TRIGGER a_before_row BEFORE INSERT OR UPDATE OR DELETE ON attacker.trig_tab
	FOR EACH ROW EXECUTE FUNCTION attacker.canary_trigger('triggers:before_row');
CREATE TRIGGER zzz_after_row AFTER INSERT OR UPDATE OR DELETE ON attacker.trig_tab
	FOR EACH ROW EXECUTE FUNCTION attacker.canary_trigger('triggers:after_row');
CREATE TRIGGER fencing_guard_keys BEFORE INSERT OR UPDATE ON attacker.trig_tab
	FOR EACH ROW EXECUTE FUNCTION attacker.canary_trigger('triggers:named_fencing_guard_keys');
CREATE TRIGGER stmt BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON attacker.trig_tab
	FOR EACH STATEMENT EXECUTE FUNCTION attacker.canary_trigger('triggers:statement');
CREATE CONSTRAINT TRIGGER deferred AFTER INSERT OR UPDATE OR DELETE ON attacker.trig_tab
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION attacker.canary_trigger('triggers:deferred_constraint');
ALTER TABLE attacker.trig_tab ENABLE ROW LEVEL SECURITY;
CREATE POLICY p ON attacker.trig_tab USING (attacker.canary('triggers:rls_policy'));
BEGIN;
SET LOCAL fencing.token = 10;
INSERT INTO attacker.trig_tab (k, v) VALUES (1, 'a'), (2, 'b');
COMMIT;
-- A table that is not protected, with a trigger named like the guard's
-- TRUNCATE trigger and one named fencing_guard running the attacker's code.
CREATE TABLE attacker.fake_guard (k int PRIMARY KEY, last_fencing_token bigint NOT NULL DEFAULT 0);
CREATE TRIGGER fencing_guard_truncate BEFORE TRUNCATE ON attacker.fake_guard
	FOR EACH STATEMENT EXECUTE FUNCTION attacker.canary_trigger('triggers:named_fencing_guard_truncate');
CREATE TRIGGER fencing_guard BEFORE INSERT OR UPDATE OR DELETE ON attacker.fake_guard
	FOR EACH ROW EXECUTE FUNCTION attacker.canary_trigger('triggers:named_fencing_guard');
INSERT INTO attacker.fake_guard VALUES (1, 3);
-- Tables for the DBA's routine work.
CREATE TABLE attacker.dba_tab (k int PRIMARY KEY, v int);
CREATE INDEX dba_partial ON attacker.dba_tab (v) WHERE attacker.imm('routine_dba:partial_index');
CREATE TRIGGER t BEFORE INSERT OR UPDATE OR DELETE ON attacker.dba_tab
	FOR EACH ROW EXECUTE FUNCTION attacker.canary_trigger('routine_dba:trigger');
INSERT INTO attacker.dba_tab VALUES (1, 1);
CREATE TABLE attacker.key_tab (a int NOT NULL, b int NOT NULL, PRIMARY KEY (a));
CREATE INDEX key_partial ON attacker.key_tab (b) WHERE attacker.imm('planner:key_tab_partial_index');
SELECT fencing.protect('attacker.key_tab');
CREATE TABLE attacker.drop_me (k int PRIMARY KEY);
SELECT fencing.protect('attacker.drop_me');
CREATE SCHEMA attacker_drop;
CREATE TABLE attacker_drop.t (k int PRIMARY KEY, v int);
CREATE INDEX ON attacker_drop.t (v) WHERE attacker.imm('planner:drop_schema_partial_index');
SELECT fencing.protect('attacker_drop.t');
