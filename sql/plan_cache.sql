-- fenced_update() keeps its plans, and follows the table when it changes.

CREATE TABLE cached (id int PRIMARY KEY, a text, b text);
INSERT INTO cached VALUES (1, 'a', 'b');
SELECT fencing.protect('cached');
SELECT fencing.fenced_update('cached', '{"id": 1}', 1, '{"a": "a1"}');
SELECT fencing.fenced_update('cached', '{"id": 1}', 2, '{"a": "a2"}');
-- Another set of changed columns is another plan.
SELECT fencing.fenced_update('cached', '{"id": 1}', 3, '{"a": "a3", "b": "b3"}');

-- Add a column, then use it.
ALTER TABLE cached ADD COLUMN c int;
SELECT fencing.fenced_update('cached', '{"id": 1}', 4, '{"a": "a4", "c": 4}');
-- Drop a column the plan used: the old plan must not be reused.
ALTER TABLE cached DROP COLUMN b;
SELECT fencing.fenced_update('cached', '{"id": 1}', 5, '{"a": "a5"}');
SELECT t.error_of($$SELECT fencing.fenced_update('cached', '{"id": 1}', 5, '{"b": "b5"}')$$);
-- Rename a column the plan used.
ALTER TABLE cached RENAME COLUMN a TO alpha;
SELECT fencing.fenced_update('cached', '{"id": 1}', 6, '{"alpha": "alpha6"}');
SELECT t.error_of($$SELECT fencing.fenced_update('cached', '{"id": 1}', 6, '{"a": "a6"}')$$);
-- Change a column's type.
ALTER TABLE cached ALTER COLUMN c TYPE numeric(6,2);
SELECT fencing.fenced_update('cached', '{"id": 1}', 7, '{"c": 7.25}');
-- Rename the table and the key column.
ALTER TABLE cached RENAME TO cached2;
ALTER TABLE cached2 RENAME COLUMN id TO ident;
SELECT fencing.fenced_update('cached2', '{"ident": 1}', 8, '{"alpha": "alpha8"}');
-- Switch the mode: the cached monotonic plan must not decide for strict.
SELECT fencing.fenced_update('cached2', '{"ident": 1}', 8, '{"alpha": "again"}');
SELECT fencing.protect('cached2', mode => 'strict');
SELECT fencing.fenced_update('cached2', '{"ident": 1}', 8, '{"alpha": "strict"}', 'skip');
SELECT * FROM cached2;

-- Drop and recreate the table under the same name: a new table, new plans.
DROP TABLE cached2;
CREATE TABLE cached2 (ident text PRIMARY KEY, alpha text, last_fencing_token bigint NOT NULL DEFAULT 0);
INSERT INTO cached2 VALUES ('1', 'x');
SELECT fencing.fenced_update('cached2', '{"ident": "1"}', 1, '{"alpha": "new table"}');
SELECT * FROM cached2;
DROP TABLE cached2;

-- The cache is bounded: 400 different sets of changed columns keep at most
-- 128 shapes (two plans each) ...
CREATE TABLE wide (id int PRIMARY KEY, c1 int, c2 int, c3 int, c4 int, c5 int, c6 int, c7 int,
                   c8 int, c9 int);
SELECT fencing.protect('wide');
INSERT INTO wide VALUES (1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1);
DO $$
BEGIN
	FOR i IN 1 .. 400 LOOP
		PERFORM fencing.fenced_update('wide', '{"id": 1}', 1,
			(SELECT jsonb_object_agg('c' || b, i) FROM generate_series(1, 9) b
			 WHERE i & (1 << (b - 1)) <> 0));
	END LOOP;
END
$$;
SELECT count(*) BETWEEN 2 AND 256 AS bounded FROM pg_backend_memory_contexts
WHERE name = 'CachedPlanSource' AND ident LIKE '%public.wide%';
SELECT * FROM wide;
-- ... and forgets the plans of dropped tables: 300 temporary tables made,
-- written and dropped leave the plans of one at most.
DO $$
BEGIN
	FOR i IN 1 .. 300 LOOP
		CREATE TEMP TABLE scratch (id int PRIMARY KEY, v int, last_fencing_token bigint NOT NULL DEFAULT 0);
		INSERT INTO scratch VALUES (1, 0);
		PERFORM fencing.fenced_update('scratch', '{"id": 1}', i, jsonb_build_object('v', i));
		DROP TABLE scratch;
	END LOOP;
END
$$;
SELECT count(*) <= 2 AS forgotten FROM pg_backend_memory_contexts
WHERE name = 'CachedPlanSource' AND ident LIKE '%scratch%';
DROP TABLE wide;
