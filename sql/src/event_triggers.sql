-- The event triggers on the functions of ddl.sql: install script only, since
-- CREATE EVENT TRIGGER has no OR REPLACE (an upgrade creates those its
-- release adds).

CREATE EVENT TRIGGER fencing_after_table_ddl ON ddl_command_end
WHEN TAG IN ('CREATE TABLE', 'ALTER TABLE', 'CREATE SCHEMA', 'CREATE FOREIGN TABLE', 'ALTER TRIGGER',
              'CREATE TRIGGER')
EXECUTE FUNCTION fencing._after_table_ddl();

CREATE EVENT TRIGGER fencing_forget_dropped_marks ON sql_drop
EXECUTE FUNCTION fencing._forget_dropped_marks();

CREATE EVENT TRIGGER fencing_before_drop ON ddl_command_start
WHEN TAG IN ('DROP TABLE', 'DROP FOREIGN TABLE', 'DROP SCHEMA', 'DROP OWNED')
EXECUTE FUNCTION fencing._before_drop();
