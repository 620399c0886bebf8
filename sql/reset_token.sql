-- reset_token(target, key, token): the table's owner sets a row's stored
-- token (or a deleted key's marks) to a given token, lower than before: the
-- repair of a row a writer pinned at 2^63 - 1.  Logged; a maintainer or a
-- writer is refused; bad input changes nothing.

CREATE ROLE regress_rt_owner;
CREATE ROLE regress_rt_member IN ROLE regress_rt_owner;
CREATE ROLE regress_rt_maintainer;
CREATE ROLE regress_rt_writer;
GRANT USAGE ON SCHEMA fencing TO regress_rt_owner, regress_rt_maintainer, regress_rt_writer;
GRANT USAGE ON SCHEMA t TO regress_rt_owner, regress_rt_maintainer, regress_rt_writer;
CREATE TABLE rt_items (id int PRIMARY KEY, v text);
CREATE TABLE rt_pairs (a int, b text, v text, PRIMARY KEY (b, a));
CREATE TABLE rt_strict (id int PRIMARY KEY, v text);
CREATE TABLE rt_plain (id int PRIMARY KEY, last_fencing_token bigint NOT NULL DEFAULT 0);
CREATE TABLE rt_parted (id int PRIMARY KEY, v text) PARTITION BY RANGE (id);
CREATE TABLE rt_parted_low PARTITION OF rt_parted FOR VALUES FROM (0) TO (10);
CREATE TABLE rt_parted_high PARTITION OF rt_parted FOR VALUES FROM (10) TO (20);
ALTER TABLE rt_items OWNER TO regress_rt_owner;
ALTER TABLE rt_pairs OWNER TO regress_rt_owner;
ALTER TABLE rt_strict OWNER TO regress_rt_owner;
ALTER TABLE rt_plain OWNER TO regress_rt_owner;
ALTER TABLE rt_parted OWNER TO regress_rt_owner;
ALTER TABLE rt_parted_low OWNER TO regress_rt_owner;
ALTER TABLE rt_parted_high OWNER TO regress_rt_owner;
GRANT SELECT, INSERT, UPDATE, DELETE ON rt_items, rt_pairs, rt_strict, rt_parted
  TO regress_rt_writer, regress_rt_maintainer;
SET ROLE regress_rt_owner;
SELECT fencing.protect('rt_items', max_token => 9223372036854775807);
SELECT fencing.protect('rt_pairs');
SELECT fencing.protect('rt_strict', mode => 'strict');
SELECT fencing.protect('rt_parted');
SELECT fencing.set_maintainer('rt_items', 'regress_rt_maintainer');
INSERT INTO rt_items VALUES (1, 'a', 10), (2, 'b', 20), (3, 'c', 30);
INSERT INTO rt_pairs VALUES (1, 'x', 'p', 10);
INSERT INTO rt_strict VALUES (1, 'a', 10);
INSERT INTO rt_parted VALUES (5, 'low', 10), (15, 'high', 10);
RESET ROLE;

-- A writer pins a row at 2^63 - 1: every real token is refused after.
SET ROLE regress_rt_writer;
SELECT fencing.fenced_update('rt_items', '{"id": 1}', 9223372036854775807, '{"v": "pinned"}');
SELECT t.error_of($$SELECT fencing.fenced_update('rt_items', '{"id": 1}', 50, '{"v": "real"}')$$);
-- It may not repair it, nor may the maintainer (it cannot lower a token).
SELECT t.error_of($$SELECT fencing.reset_token('rt_items', '{"id": 1}', 40)$$);
RESET ROLE;
SET ROLE regress_rt_maintainer;
SELECT t.error_of($$SELECT fencing.reset_token('rt_items', '{"id": 1}', 40)$$);
RESET ROLE;
SELECT id, v, last_fencing_token FROM rt_items ORDER BY id;

-- The owner repairs it: one LOG line, the previous token returned; then a
-- real token is accepted again, and an older one still refused.
SET ROLE regress_rt_owner;
SET client_min_messages = log;
SELECT fencing.reset_token('rt_items', '{"id": 1}', 40);
RESET client_min_messages;
RESET ROLE;
SET ROLE regress_rt_writer;
SELECT t.error_of($$SELECT fencing.fenced_update('rt_items', '{"id": 1}', 39, '{"v": "old"}')$$);
SELECT fencing.fenced_update('rt_items', '{"id": 1}', 50, '{"v": "real"}');
BEGIN;
SET LOCAL fencing.token = 50;
UPDATE rt_items SET v = 'real again' WHERE id = 1;
COMMIT;
RESET ROLE;
SELECT id, v, last_fencing_token FROM rt_items ORDER BY id;

-- A member of the owning role may; a transaction's fencing.token and
-- fencing.maintenance do not get in the way; the token may also go up.
SET ROLE regress_rt_member;
BEGIN;
SET LOCAL fencing.token = 7;
SET LOCAL fencing.maintenance = on;
SELECT fencing.reset_token('rt_items', '{"id": 2}', 25);
COMMIT;
RESET ROLE;
SELECT id, last_fencing_token FROM rt_items WHERE id = 2;

-- A deleted key's mark pinned at 2^63 - 1: the key cannot come back under a
-- real token until the owner resets the mark.
SET ROLE regress_rt_writer;
BEGIN;
SET LOCAL fencing.token = 9223372036854775807;
DELETE FROM rt_items WHERE id = 3;
COMMIT;
SELECT t.error_of($$INSERT INTO rt_items VALUES (3, 'back', 60)$$);
RESET ROLE;
SELECT t.mark('rt_items', t.img(3));
SET ROLE regress_rt_owner;
SET client_min_messages = log;
SELECT fencing.reset_token('rt_items', '{"id": "3"}', 55);
RESET client_min_messages;
RESET ROLE;
SELECT t.mark('rt_items', t.img(3));
SET ROLE regress_rt_writer;
SELECT t.error_of($$INSERT INTO rt_items VALUES (3, 'too old', 54)$$);
INSERT INTO rt_items VALUES (3, 'back', 60);
RESET ROLE;
SELECT id, v, last_fencing_token FROM rt_items ORDER BY id;

-- A row with a mark of its own (deleted at 2^63 - 1, inserted again): both
-- go down, so a later DELETE and INSERT under real tokens work.
SET ROLE regress_rt_writer;
BEGIN;
SET LOCAL fencing.token = 9223372036854775807;
DELETE FROM rt_items WHERE id = 2;
INSERT INTO rt_items VALUES (2, 'again', 9223372036854775807);
COMMIT;
RESET ROLE;
SET ROLE regress_rt_owner;
SELECT fencing.reset_token('rt_items', '{"id": 2}', 70);
RESET ROLE;
SELECT t.mark('rt_items', t.img(2)), (SELECT last_fencing_token FROM rt_items WHERE id = 2);
SET ROLE regress_rt_writer;
BEGIN;
SET LOCAL fencing.token = 71;
DELETE FROM rt_items WHERE id = 2;
INSERT INTO rt_items VALUES (2, 'back', 71);
COMMIT;
RESET ROLE;
SELECT id, v, last_fencing_token FROM rt_items WHERE id = 2;

-- A composite key names every column, in any order.
SET ROLE regress_rt_owner;
SELECT fencing.reset_token('rt_pairs', '{"b": "x", "a": 1}', 5);
RESET ROLE;
SELECT a, b, last_fencing_token FROM rt_pairs;

-- Strict mode: after a reset to 40, 40 itself is refused, 41 accepted.
SET ROLE regress_rt_writer;
SELECT fencing.fenced_update('rt_strict', '{"id": 1}', 9223372036854775807);
RESET ROLE;
SET ROLE regress_rt_owner;
SELECT fencing.reset_token('rt_strict', '{"id": 1}', 40);
SELECT fencing.reset_token('rt_strict', '{"id": 1}', 40);
RESET ROLE;
SET ROLE regress_rt_writer;
SELECT t.error_of($$SELECT fencing.fenced_update('rt_strict', '{"id": 1}', 40)$$);
SELECT fencing.fenced_update('rt_strict', '{"id": 1}', 41);
RESET ROLE;

-- Partitioned: the key names a row of either partition through the root;
-- a deleted key's marks (under the partition and the root) go down too.
SET ROLE regress_rt_writer;
SELECT fencing.fenced_update('rt_parted', '{"id": 15}', 9223372036854775807);
BEGIN;
SET LOCAL fencing.token = 9223372036854775807;
DELETE FROM rt_parted WHERE id = 5;
COMMIT;
RESET ROLE;
SET ROLE regress_rt_owner;
SELECT fencing.reset_token('rt_parted', '{"id": 15}', 20);
SELECT fencing.reset_token('rt_parted', '{"id": 5}', 20);
RESET ROLE;
SELECT t.mark('rt_parted_low', t.img(5)) AS partition_mark, t.mark('rt_parted', t.img(5)) AS root_mark;
SET ROLE regress_rt_writer;
SELECT fencing.fenced_update('rt_parted', '{"id": 15}', 21, '{"v": "real"}');
INSERT INTO rt_parted VALUES (5, 'back', 21);
RESET ROLE;
SELECT tableoid::regclass, id, v, last_fencing_token FROM rt_parted ORDER BY id;

-- Report-only: the reset goes through as well.
SET ROLE regress_rt_owner;
SELECT fencing.set_enforce('rt_items', false);
SELECT fencing.reset_token('rt_items', '{"id": 1}', 45);
SELECT fencing.set_enforce('rt_items', true);
RESET ROLE;
SELECT id, last_fencing_token FROM rt_items WHERE id = 1;

-- A superuser resets another role's table as that table's owner: the
-- table's triggers run with the owner's rights, not the superuser's.
CREATE FUNCTION rt_who() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE NOTICE 'trigger runs as %', current_user;
	IF current_setting('rt.skip', true) = 'on' THEN
		RETURN NULL;
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER rt_who BEFORE UPDATE ON rt_items FOR EACH ROW EXECUTE FUNCTION rt_who();
SELECT fencing.reset_token('rt_items', '{"id": 1}', 46);
-- A BEFORE UPDATE trigger that skips the row: refused, nothing changes.
SET rt.skip = on;
SELECT t.error_of($$SELECT fencing.reset_token('rt_items', '{"id": 1}', 30)$$);
RESET rt.skip;
DROP TRIGGER rt_who ON rt_items;
SELECT id, v, last_fencing_token FROM rt_items WHERE id = 1;

-- Bad input: the right SQLSTATE, and nothing changes.
SET ROLE regress_rt_owner;
SELECT t.error_of($$SELECT fencing.reset_token(NULL, '{"id": 1}', 5)$$);
SELECT t.error_of($$SELECT fencing.reset_token('rt_items', NULL, 5)$$);
SELECT t.error_of($$SELECT fencing.reset_token('rt_items', '{"id": 1}', NULL)$$);
SELECT t.error_of($$SELECT fencing.reset_token('rt_items', '{"id": 1}', 0)$$);
SELECT t.error_of($$SELECT fencing.reset_token('rt_items', '{"id": 1}', -3)$$);
SELECT t.error_of($$SELECT fencing.reset_token('rt_items', '[1]', 5)$$);
SELECT t.error_of($$SELECT fencing.reset_token('rt_items', '{}', 5)$$);
SELECT t.error_of($$SELECT fencing.reset_token('rt_items', '{"id": 1, "v": "a"}', 5)$$);
SELECT t.error_of($$SELECT fencing.reset_token('rt_items', '{"id": 1, "nope": 1}', 5)$$);
SELECT t.error_of($$SELECT fencing.reset_token('rt_items', '{"id": null}', 5)$$);
SELECT t.error_of($$SELECT fencing.reset_token('rt_items', '{"id": "one"}', 5)$$);
SELECT t.error_of($$SELECT fencing.reset_token('rt_pairs', '{"a": 1}', 5)$$);
SELECT t.error_of($$SELECT fencing.reset_token('rt_items', '{"id": 99}', 5)$$);
SELECT t.error_of($$SELECT fencing.reset_token('rt_plain', '{"id": 1}', 5)$$);
SELECT fencing.protect('rt_plain', max_token => 100);
SELECT t.error_of($$SELECT fencing.reset_token('rt_plain', '{"id": 1}', 101)$$);
INSERT INTO rt_plain VALUES (1, 90);
SELECT fencing.compact('rt_plain', 80);
SELECT t.error_of($$SELECT fencing.reset_token('rt_plain', '{"id": 1}', 79)$$);
SELECT fencing.reset_token('rt_plain', '{"id": 1}', 80);
RESET ROLE;
SELECT t.error_of($$SELECT fencing.reset_token(12345678, '{"id": 1}', 5)$$);
CREATE VIEW rt_view AS SELECT * FROM rt_items;
SELECT t.error_of($$SELECT fencing.reset_token('rt_view', '{"id": 1}', 5)$$);
SELECT id, v, last_fencing_token FROM rt_items ORDER BY id;
SELECT id, last_fencing_token FROM rt_plain;

DROP VIEW rt_view;
DROP FUNCTION rt_who() CASCADE;
DROP TABLE rt_items, rt_pairs, rt_strict, rt_plain, rt_parted;
DROP ROLE regress_rt_member;
REVOKE USAGE ON SCHEMA fencing FROM regress_rt_owner, regress_rt_maintainer, regress_rt_writer;
REVOKE USAGE ON SCHEMA t FROM regress_rt_owner, regress_rt_maintainer, regress_rt_writer;
DROP ROLE regress_rt_owner, regress_rt_maintainer, regress_rt_writer;
