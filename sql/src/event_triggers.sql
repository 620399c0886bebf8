-- The event triggers on the functions of ddl.sql: install script only, since
-- CREATE EVENT TRIGGER has no OR REPLACE (an upgrade creates those its
-- release adds, and drops and creates again those whose WHEN changes).

CREATE EVENT TRIGGER fencing_after_table_ddl ON ddl_command_end
WHEN TAG IN ('CREATE TABLE', 'ALTER TABLE', 'CREATE SCHEMA', 'CREATE FOREIGN TABLE', 'ALTER TRIGGER',
              'CREATE TRIGGER', 'CREATE TABLE AS', 'SELECT INTO', 'ALTER EXTENSION')
EXECUTE FUNCTION fencing_internal._after_table_ddl();

CREATE EVENT TRIGGER fencing_forget_dropped_marks ON sql_drop
EXECUTE FUNCTION fencing_internal._forget_dropped_marks();

-- Every command, not only DROP TABLE: DROP EXTENSION, DROP OWNED, and any
-- DROP ... CASCADE (of a schema, a type, a function, a server) can drop a
-- table.
CREATE EVENT TRIGGER fencing_before_drop ON ddl_command_start
EXECUTE FUNCTION fencing_internal._before_drop();

-- Citus: what may go into schema fencing_citus (sql/src/citus.sql).
CREATE EVENT TRIGGER fencing_guard_citus_schema ON ddl_command_end
EXECUTE FUNCTION fencing_internal._guard_citus_schema();
