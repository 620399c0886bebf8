-- What DROP EXTENSION fencing does (docs/operations.md, "Removing it"): it
-- fails while a table is protected; CASCADE drops the guard triggers; the
-- tables keep their rows and token column; the extension's state goes; the
-- schema stays, empty; nothing else of the database changed.
SELECT current_database() AS regress_db \gset
CREATE DATABASE fencing_uninstall;
\c fencing_uninstall
\set VERBOSITY terse
CREATE TABLE orders (id text PRIMARY KEY, status text NOT NULL);
CREATE TABLE payments (id int PRIMARY KEY, amount numeric);
-- What the database holds before: settings, event triggers, schemas.
CREATE TEMP TABLE before AS
SELECT (SELECT count(*) FROM pg_db_role_setting) AS role_settings,
       (SELECT count(*) FROM pg_event_trigger) AS event_triggers,
       (SELECT array_agg(nspname ORDER BY nspname) FROM pg_namespace
        WHERE nspname NOT LIKE 'pg_temp%' AND nspname NOT LIKE 'pg_toast_temp%') AS schemas;
CREATE EXTENSION fencing;
SELECT fencing.protect('orders');
SELECT fencing.protect('payments');
INSERT INTO orders VALUES ('order:101', 'new', 33), ('order:102', 'new', 33);
DELETE FROM orders WHERE id = 'order:102' AND last_fencing_token = 33;  -- needs a token
BEGIN;
SET LOCAL fencing.token = 34;
DELETE FROM orders WHERE id = 'order:102';  -- a deleted-key mark
COMMIT;
SELECT fencing.acquire('order:101', 'worker-a', '10 s') > 0 AS leased;
SELECT fencing.unprotect('payments');
-- Refused while orders is protected: its guard triggers depend on it.
DROP EXTENSION fencing;
DROP EXTENSION fencing CASCADE;
-- The tables: rows, the token column with its NOT NULL and default, no
-- trigger left.
SELECT * FROM orders;
SELECT attrelid::regclass AS relation, attname, atttypid::regtype, attnotnull,
       pg_get_expr(adbin, adrelid) AS "default"
FROM pg_attribute LEFT JOIN pg_attrdef ON adrelid = attrelid AND adnum = attnum
WHERE attrelid IN ('orders'::regclass, 'payments'::regclass) AND attname = 'last_fencing_token'
ORDER BY 1;
SELECT count(*) AS triggers FROM pg_trigger
WHERE tgrelid IN ('orders'::regclass, 'payments'::regclass);
-- Writes are no longer checked.
UPDATE orders SET status = 'paid' WHERE id = 'order:101';
INSERT INTO orders VALUES ('order:102', 'back', 1);
-- The extension's objects and state are gone; its schema stays, empty.
SELECT count(*) AS extension FROM pg_extension WHERE extname = 'fencing';
SELECT (SELECT count(*) FROM pg_class WHERE relnamespace = 'fencing'::regnamespace) AS relations,
       (SELECT count(*) FROM pg_proc WHERE pronamespace = 'fencing'::regnamespace) AS functions,
       (SELECT count(*) FROM pg_type WHERE typnamespace = 'fencing'::regnamespace) AS types;
DROP SCHEMA fencing;
-- Nothing else changed.
SELECT b.role_settings = (SELECT count(*) FROM pg_db_role_setting) AS same_role_settings,
       b.event_triggers = (SELECT count(*) FROM pg_event_trigger) AS same_event_triggers,
       b.schemas = (SELECT array_agg(nspname ORDER BY nspname) FROM pg_namespace
                    WHERE nspname NOT LIKE 'pg_temp%' AND nspname NOT LIKE 'pg_toast_temp%') AS same_schemas
FROM before b;
\c :regress_db
DROP DATABASE fencing_uninstall;
