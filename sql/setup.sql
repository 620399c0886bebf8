-- The extension's public surface, and helpers the other tests share.

-- Schema fencing holds exactly the documented objects.
SELECT p.oid::regprocedure AS function, pg_get_function_result(p.oid) AS returns,
       p.prosecdef AS security_definer
FROM pg_proc p WHERE p.pronamespace = 'fencing'::regnamespace ORDER BY 1::text;
SELECT pg_get_function_arguments('fencing.protect'::regproc);
SELECT pg_get_function_arguments('fencing.fenced_update'::regproc);
SELECT c.relname, c.relkind FROM pg_class c
WHERE c.relnamespace = 'fencing'::regnamespace AND c.relkind IN ('r', 'v') ORDER BY 1;
SELECT extrelocatable FROM pg_extension WHERE extname = 'fencing';

-- Unless the server preloads the module, CREATE EXTENSION made new sessions of
-- this database load it (test/check's server does not), so that the setting
-- below is checked.
SELECT current_setting('shared_preload_libraries') ~ 'fencing' OR EXISTS (
	SELECT FROM pg_db_role_setting s, unnest(s.setconfig) c
	WHERE s.setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
	  AND c = 'session_preload_libraries=fencing') AS module_preloaded;

-- The fencing.token setting accepts positive bigints only.
SET fencing.token = 34;
SHOW fencing.token;
SET fencing.token = ' 9223372036854775807 ';
RESET fencing.token;
SET fencing.token = 0;
\echo :LAST_ERROR_SQLSTATE
SET fencing.token = -5;
SET fencing.token = 'abc';
SET fencing.token = '12abc';
SET fencing.token = '9223372036854775808';
SHOW fencing.token;

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
