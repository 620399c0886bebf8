-- fencing 0.2.0 -> 0.3.0
\echo Use "ALTER EXTENSION fencing UPDATE TO '0.3.0'" to load this file. \quit

-- compact_resources() moves to C (src/compact.cpp): one token domain, and
-- arithmetic that a fence at 2^63 - 1 cannot overflow.  Its ACL, owner and
-- comment stay.
CREATE OR REPLACE FUNCTION fencing.compact_resources(below bigint, prefix text DEFAULT '')
RETURNS bigint
AS 'MODULE_PATHNAME', 'compact_resources'
LANGUAGE C VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
