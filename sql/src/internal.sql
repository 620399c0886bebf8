-- Schema fencing_internal: the extension's internal helpers (functions whose
-- names start with an underscore), apart from the API of schema fencing, so
-- that \df fencing.* lists the API alone.  A member of the extension:
-- CREATE SCHEMA fails if a schema of that name exists, so no other role's
-- schema is ever taken for it, and the library calls a helper there only
-- where pg_extension says 0.4.0 or later is installed
-- (src/legacy/helpers_0_3_0.cpp).
-- USAGE to PUBLIC, CREATE to no one: protect() and the event trigger run
-- some helpers as the protected table's owner.  Who may execute each helper
-- is set with its definition: those that change anything check USAGE on
-- schema fencing first, the rest are revoked from PUBLIC unless an ordinary
-- role's code calls them.
CREATE SCHEMA fencing_internal;
GRANT USAGE ON SCHEMA fencing_internal TO PUBLIC;
COMMENT ON SCHEMA fencing_internal IS 'internal helpers of the fencing extension (not API)';
