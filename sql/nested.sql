-- fenced_update() is re-entrant: a trigger, a domain CHECK or a function it
-- calls may call it again, and no state is shared between the calls.

-- A domain whose CHECK calls a function that calls fenced_update() on
-- another row with the same domain type: the nested call converts its value
-- with the domain's input function while the outer call is inside it.  If
-- the two calls shared that function's state (0.1.0 did), the nested one
-- would replace the value the outer CHECK is looking at (VALUE after the
-- call), and reset memory the outer CHECK still uses.
CREATE FUNCTION t.note_check(v text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	IF v LIKE 'outer%' THEN
		PERFORM fencing.fenced_update('notes', '{"id": 2}', 5,
		                              jsonb_build_object('body', 'nested from ' || v));
	END IF;
	RETURN v;
END
$$;
CREATE DOMAIN t.note_text AS text CHECK (t.note_check(VALUE) = VALUE AND VALUE <> 'forbidden');
CREATE TABLE notes (id int PRIMARY KEY, body t.note_text);
SELECT fencing.protect('notes');
INSERT INTO notes VALUES (1, 'one', 1), (2, 'two', 1);
SELECT fencing.fenced_update('notes', '{"id": 1}', 5, '{"body": "outer 1"}');
SELECT fencing.fenced_update('notes', '{"id": 1}', 6, '{"body": "outer 2"}');
SELECT * FROM notes ORDER BY id;
-- The domain still refuses what it refuses, with its own SQLSTATE and the column's name.
SELECT t.error_of($$SELECT fencing.fenced_update('notes', '{"id": 1}', 7, '{"body": "forbidden"}')$$);
-- A nested call that fails fails the outer one: nothing changes.
SELECT t.error_of($$SELECT fencing.fenced_update('notes', '{"id": 1}', 4, '{"body": "outer stale"}')$$);
SELECT * FROM notes ORDER BY id;

-- A trigger that writes another row of the same table through fenced_update()
-- with the same shape, while the outer call's cached plan is running.
CREATE TABLE chain (id int PRIMARY KEY, v int);
SELECT fencing.protect('chain');
INSERT INTO chain SELECT g, 0, 1 FROM generate_series(1, 5) g;
CREATE FUNCTION t.chain_next() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.id < 5 THEN
		PERFORM fencing.fenced_update('chain', jsonb_build_object('id', NEW.id + 1),
		                              NEW.last_fencing_token, jsonb_build_object('v', NEW.v + 1));
	END IF;
	RETURN NEW;
END
$$;
CREATE TRIGGER z_chain AFTER UPDATE ON chain FOR EACH ROW EXECUTE FUNCTION t.chain_next();
SELECT fencing.fenced_update('chain', '{"id": 1}', 2, '{"v": 10}');
SELECT * FROM chain ORDER BY id;
-- A stale write deep in the chain undoes the whole chain.
UPDATE chain SET last_fencing_token = 9 WHERE id = 4;
SELECT t.error_of($$SELECT fencing.fenced_update('chain', '{"id": 1}', 3, '{"v": 20}')$$);
SELECT * FROM chain ORDER BY id;
-- The cached plans survive the nesting.
SELECT fencing.fenced_update('chain', '{"id": 5}', 9, '{"v": 50}');

DROP TABLE notes, chain;
DROP DOMAIN t.note_text;
