-- C++ exceptions at the C++/PostgreSQL boundary become ordinary errors, and
-- leave PostgreSQL's error handling as they found it.
CREATE FUNCTION throw_bad_alloc() RETURNS void
AS '$libdir/fencing_boundary_test', 'throw_bad_alloc' LANGUAGE C;
CREATE FUNCTION throw_inside_pg_try() RETURNS void
AS '$libdir/fencing_boundary_test', 'throw_inside_pg_try' LANGUAGE C;
CREATE FUNCTION throw_with_error_context() RETURNS void
AS '$libdir/fencing_boundary_test', 'throw_with_error_context' LANGUAGE C;

-- std::bad_alloc is out of memory.
SELECT throw_bad_alloc();
\echo :LAST_ERROR_SQLSTATE

-- After a throw inside PG_TRY, the next errors are ordinary errors.
SELECT throw_inside_pg_try();
\echo :LAST_ERROR_SQLSTATE
SELECT 1 / 0;
DO $$ BEGIN PERFORM throw_inside_pg_try(); EXCEPTION WHEN internal_error THEN RAISE NOTICE 'caught: %', SQLERRM; END $$;
SELECT 1 / 0;

-- After a throw with an error context pushed, later errors carry no stale context.
SELECT throw_with_error_context();
SELECT 1 / 0;
DO $$ BEGIN RAISE EXCEPTION 'a later error'; END $$;
SELECT 'still connected' AS session;
