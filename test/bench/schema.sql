-- Benchmark tables: the same rows, fenced four ways (see test/bench/run).
DROP TABLE IF EXISTS b_plain, b_cond, b_guard, b_plpgsql, b_fenced;
CREATE TABLE b_plain   (id int PRIMARY KEY, v int NOT NULL DEFAULT 0, last_fencing_token bigint NOT NULL DEFAULT 0);
CREATE TABLE b_cond    (LIKE b_plain INCLUDING ALL);
CREATE TABLE b_guard   (LIKE b_plain INCLUDING ALL);
CREATE TABLE b_plpgsql (LIKE b_plain INCLUDING ALL);
CREATE TABLE b_fenced  (LIKE b_plain INCLUDING ALL);
INSERT INTO b_plain (id) SELECT g FROM generate_series(1, :rows) g;
INSERT INTO b_cond SELECT * FROM b_plain;
INSERT INTO b_guard SELECT * FROM b_plain;
INSERT INTO b_plpgsql SELECT * FROM b_plain;
INSERT INTO b_fenced SELECT * FROM b_plain;
SELECT fencing.protect('b_guard');
SELECT fencing.protect('b_fenced');

-- (d) What a user would write instead of the C++ guard: the same rules in PL/pgSQL.
CREATE OR REPLACE FUNCTION b_plpgsql_guard() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	presented bigint;
BEGIN
	-- PL/pgSQL cannot see which columns an UPDATE assigns: a changed or
	-- non-zero token column counts as presented, else fencing.token.
	IF NEW.last_fencing_token > 0 THEN
		presented := NEW.last_fencing_token;
	ELSE
		presented := nullif(current_setting('fencing.token', true), '')::bigint;
	END IF;
	IF presented IS NULL THEN
		RAISE EXCEPTION 'missing fencing token' USING ERRCODE = '23T02';
	END IF;
	IF presented < OLD.last_fencing_token THEN
		RAISE EXCEPTION 'stale fencing token' USING ERRCODE = '23T01';
	END IF;
	NEW.last_fencing_token := presented;
	RETURN NEW;
END
$$;
CREATE TRIGGER guard BEFORE UPDATE ON b_plpgsql FOR EACH ROW EXECUTE FUNCTION b_plpgsql_guard();
VACUUM ANALYZE b_plain, b_cond, b_guard, b_plpgsql, b_fenced;
