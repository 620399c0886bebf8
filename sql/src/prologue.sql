-- fencing: fencing tokens checked by the storage.  The install script of the
-- release, assembled by the Makefile from sql/src/*.sql; the upgrade scripts
-- take their definitions from the same files (docs/testing.md, "Where the SQL
-- lives").

\echo Use "CREATE EXTENSION fencing" to load this file. \quit

-- CREATE EXTENSION installs into a schema named fencing if one exists: it
-- must be the installing role's, empty, and let no other role create in it,
-- or another role could have planted objects there (or plant them later)
-- that the extension's own code or its callers would find.
DO $$
DECLARE
	schema oid := (SELECT n.oid FROM pg_catalog.pg_namespace n
	               WHERE n.nspname OPERATOR(pg_catalog.=) 'fencing');
BEGIN
	IF schema IS NULL THEN
		RETURN;
	END IF;
	IF (SELECT n.nspowner FROM pg_catalog.pg_namespace n WHERE n.oid OPERATOR(pg_catalog.=) schema)
	   OPERATOR(pg_catalog.<>) (SELECT r.oid FROM pg_catalog.pg_roles r
	                             WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER)
	   OR EXISTS (SELECT FROM pg_catalog.pg_namespace n, pg_catalog.aclexplode(n.nspacl) a
	              WHERE n.oid OPERATOR(pg_catalog.=) schema
	                AND a.privilege_type OPERATOR(pg_catalog.=) 'CREATE'
	                AND a.grantee OPERATOR(pg_catalog.<>) n.nspowner)
	   OR EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.relnamespace OPERATOR(pg_catalog.=) schema)
	   OR EXISTS (SELECT FROM pg_catalog.pg_proc p WHERE p.pronamespace OPERATOR(pg_catalog.=) schema)
	   OR EXISTS (SELECT FROM pg_catalog.pg_type t WHERE t.typnamespace OPERATOR(pg_catalog.=) schema)
	   OR EXISTS (SELECT FROM pg_catalog.pg_operator o
	              WHERE o.oprnamespace OPERATOR(pg_catalog.=) schema) THEN
		RAISE EXCEPTION 'schema "fencing" exists and is not an empty schema of the installing role'
			USING ERRCODE = 'insufficient_privilege',
			      DETAIL = 'Another role owns it, may create objects in it, or objects are already in it.',
			      HINT = 'Drop or rename that schema, then run CREATE EXTENSION fencing.';
	END IF;
END
$$;

-- Every object is schema-qualified and every function body pins search_path,
-- so nothing planted earlier in a caller's search_path is ever picked up.
-- Installing changes nothing outside the extension's own objects: no
-- database or server setting (README, "Installing").  The internal helpers
-- are in schema fencing_internal (internal.sql), not API.

