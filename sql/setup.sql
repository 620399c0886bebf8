-- The extension's public surface, and helpers the other tests share.

-- Schema fencing holds exactly the documented objects.
SELECT p.oid::regprocedure AS function, pg_get_function_result(p.oid) AS returns,
       p.prosecdef AS security_definer
FROM pg_proc p WHERE p.pronamespace = 'fencing'::regnamespace ORDER BY p.oid::regprocedure::text;
SELECT pg_get_function_arguments('fencing.protect'::regproc);
SELECT pg_get_function_arguments('fencing.fenced_update'::regproc);
SELECT c.relname, c.relkind FROM pg_class c
WHERE c.relnamespace = 'fencing'::regnamespace AND c.relkind IN ('r', 'v', 'S') ORDER BY 1;
-- Schema fencing_monitor holds views only (what pg_monitor reads).
SELECT c.relname, c.relkind FROM pg_class c
WHERE c.relnamespace = 'fencing_monitor'::regnamespace ORDER BY 1;
SELECT count(*) AS functions FROM pg_proc p WHERE p.pronamespace = 'fencing_monitor'::regnamespace;
SELECT evtname, evtevent, evttags FROM pg_event_trigger ORDER BY 1;
SELECT extrelocatable FROM pg_extension WHERE extname = 'fencing';

-- Installing changed nothing outside the extension: no database or role
-- setting names it (pg_regress sets others of its own).
SELECT count(*) AS settings FROM pg_db_role_setting s, unnest(s.setconfig) c
WHERE c ~* 'fencing';

-- Every object has a comment; helpers that are not API start with an underscore.
SELECT p.proname FROM pg_proc p
WHERE p.pronamespace = 'fencing'::regnamespace AND obj_description(p.oid, 'pg_proc') IS NULL;
SELECT c.relname FROM pg_class c
WHERE c.relnamespace = 'fencing'::regnamespace AND c.relkind IN ('r', 'v', 'S')
  AND obj_description(c.oid, 'pg_class') IS NULL;

-- error_of(sql) runs a statement and returns "SQLSTATE: message" of its error.
CREATE SCHEMA t;
CREATE FUNCTION t.error_of(statement text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE statement;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;
GRANT USAGE ON SCHEMA t TO PUBLIC;

-- mark_key(images) names a key as fencing.deleted_keys does (src/catalog/keys.cpp),
-- written here independently: SHA-256 over length-prefixed fields, a version
-- tag first, then each key column's image (int8send(n) for integers, the
-- bytes of a text in the database encoding ...).
CREATE FUNCTION t.mark_key(VARIADIC images bytea[]) RETURNS bytea LANGUAGE sql AS $$
	SELECT sha256(string_agg(int4send(length(i)) || i, ''::bytea ORDER BY n))
	FROM unnest(ARRAY['fencing key 1'::bytea] || images) WITH ORDINALITY u(i, n)
$$;
-- The mark of a key of a table, or NULL.
CREATE FUNCTION t.mark(rel regclass, VARIADIC images bytea[]) RETURNS bigint LANGUAGE sql AS $$
	SELECT token FROM fencing.deleted_keys WHERE relid = rel AND key = t.mark_key(VARIADIC images)
$$;

-- A protected table for tests that must start in a session that has not
-- loaded the module yet (token_scope).
CREATE TABLE t.scoped (id int PRIMARY KEY, v text);
SELECT fencing.protect('t.scoped');
INSERT INTO t.scoped VALUES (1, 'one', 1);
-- Key column images for mark_key(): integers as int8send, strings as their bytes.
CREATE FUNCTION t.img(n bigint) RETURNS bytea LANGUAGE sql AS $$ SELECT int8send(n) $$;
CREATE FUNCTION t.img(s text) RETURNS bytea LANGUAGE sql AS $$ SELECT convert_to(s, 'UTF8') $$;
-- Marks of a key, by relation: "relation:token" in name order.
CREATE FUNCTION t.marks(VARIADIC images bytea[]) RETURNS text LANGUAGE sql AS $$
	SELECT string_agg(relid::text || ':' || token, ', ' ORDER BY relid::text)
	FROM fencing.deleted_keys WHERE key = t.mark_key(VARIADIC images)
$$;
