-- Bad input: each gets a clear error with the standard SQLSTATE, and changes nothing.

CREATE TABLE acct (id int PRIMARY KEY, owner text NOT NULL, balance numeric(10,2), opened date);
INSERT INTO acct VALUES (1, 'ann', 10.00, '2026-01-01');
SELECT fencing.protect('acct');
SELECT fencing.fenced_update('acct', '{"id": 1}', 10, '{"balance": 11}');
CREATE TABLE snapshot_before AS SELECT * FROM acct;

-- Tokens: NULL is 22004, zero or negative 22023.
SELECT t.error_of($$SELECT fencing.fenced_update('acct', '{"id": 1}', NULL, '{"balance": 1}')$$);
SELECT t.error_of($$SELECT fencing.fenced_update('acct', '{"id": 1}', 0, '{"balance": 1}')$$);
SELECT t.error_of($$SELECT fencing.fenced_update('acct', '{"id": 1}', -10, '{"balance": 1}')$$);

-- The target: NULL, unknown, dropped, not a table.
SELECT t.error_of($$SELECT fencing.fenced_update(NULL, '{"id": 1}', 11)$$);
SELECT t.error_of($$SELECT fencing.fenced_update('no_such_table', '{"id": 1}', 11)$$);
CREATE TABLE gone (id int PRIMARY KEY, last_fencing_token bigint NOT NULL DEFAULT 0);
SELECT 'gone'::regclass::oid AS gone_oid \gset
DROP TABLE gone;
SELECT regexp_replace(t.error_of(format($$SELECT fencing.fenced_update(%s, '{"id": 1}', 11)$$, :gone_oid)),
                      'OID \d+', 'OID N');
CREATE VIEW acct_view AS SELECT * FROM acct;
SELECT t.error_of($$SELECT fencing.fenced_update('acct_view', '{"id": 1}', 11)$$);
CREATE TABLE no_pk (id int, last_fencing_token bigint NOT NULL DEFAULT 0);
SELECT t.error_of($$SELECT fencing.fenced_update('no_pk', '{"id": 1}', 11)$$);
CREATE TABLE no_token (id int PRIMARY KEY);
SELECT t.error_of($$SELECT fencing.fenced_update('no_token', '{"id": 1}', 11)$$);
CREATE TABLE int_token (id int PRIMARY KEY, last_fencing_token int NOT NULL DEFAULT 0);
SELECT t.error_of($$SELECT fencing.fenced_update('int_token', '{"id": 1}', 11)$$);

-- The key: NULL, not an object, missing a key column, naming a non-key or unknown column, NULL value.
SELECT t.error_of($$SELECT fencing.fenced_update('acct', NULL, 11)$$);
SELECT t.error_of($$SELECT fencing.fenced_update('acct', '[1]', 11)$$);
SELECT t.error_of($$SELECT fencing.fenced_update('acct', '1', 11)$$);
SELECT t.error_of($$SELECT fencing.fenced_update('acct', '{}', 11)$$);
SELECT t.error_of($$SELECT fencing.fenced_update('acct', '{"id": 1, "owner": "ann"}', 11)$$);
SELECT t.error_of($$SELECT fencing.fenced_update('acct', '{"idd": 1}', 11)$$);
SELECT t.error_of($$SELECT fencing.fenced_update('acct', '{"id": null}', 11)$$);
SELECT t.error_of($$SELECT fencing.fenced_update('acct', '{"id": "one"}', 11)$$);

-- The changes: NULL, not an object, the token column, a key column, unknown or system columns.
SELECT t.error_of($$SELECT fencing.fenced_update('acct', '{"id": 1}', 11, NULL)$$);
SELECT t.error_of($$SELECT fencing.fenced_update('acct', '{"id": 1}', 11, '"balance"')$$);
SELECT t.error_of($$SELECT fencing.fenced_update('acct', '{"id": 1}', 11, '{"last_fencing_token": 99}')$$);
SELECT t.error_of($$SELECT fencing.fenced_update('acct', '{"id": 1}', 11, '{"id": 2}')$$);
SELECT t.error_of($$SELECT fencing.fenced_update('acct', '{"id": 1}', 11, '{"nope": 2}')$$);
SELECT t.error_of($$SELECT fencing.fenced_update('acct', '{"id": 1}', 11, '{"ctid": "(0,1)"}')$$);

-- Values that do not convert fail with the type's own error, naming the column.
SELECT t.error_of($$SELECT fencing.fenced_update('acct', '{"id": 1}', 11, '{"balance": "lots"}')$$);
SELECT t.error_of($$SELECT fencing.fenced_update('acct', '{"id": 1}', 11, '{"balance": 123456789012}')$$);
SELECT t.error_of($$SELECT fencing.fenced_update('acct', '{"id": 1}', 11, '{"opened": "yesterday-ish"}')$$);
SELECT t.error_of($$SELECT fencing.fenced_update('acct', '{"id": 1}', 11, '{"owner": null}')$$);

-- on_stale: NULL or anything but 'error' and 'skip'.
SELECT t.error_of($$SELECT fencing.fenced_update('acct', '{"id": 1}', 11, '{}', NULL)$$);
SELECT t.error_of($$SELECT fencing.fenced_update('acct', '{"id": 1}', 11, '{}', 'ignore')$$);

-- Nothing above changed the row.
SELECT (SELECT row(a.*)::text FROM acct a) = (SELECT row(s.*)::text FROM snapshot_before s) AS unchanged;

-- protect(): NULL arguments, not a table, no primary key, bad token column, bad mode.
SELECT t.error_of($$SELECT fencing.protect(NULL)$$);
SELECT t.error_of($$SELECT fencing.protect('acct', NULL)$$);
SELECT t.error_of($$SELECT fencing.protect('acct', mode => NULL)$$);
SELECT t.error_of($$SELECT fencing.protect('no_such_table')$$);
SELECT t.error_of($$SELECT fencing.protect('acct_view')$$);
SELECT t.error_of($$SELECT fencing.protect('no_pk')$$);
SELECT t.error_of($$SELECT fencing.protect('int_token')$$);
SELECT t.error_of($$SELECT fencing.protect('acct', 'owner')$$);
SELECT t.error_of($$SELECT fencing.protect('acct', 'id')$$);
CREATE TABLE big_pk (id bigint PRIMARY KEY);
SELECT t.error_of($$SELECT fencing.protect('big_pk', 'id')$$);
CREATE TABLE bare (id int);
SELECT t.error_of($$SELECT fencing.protect('bare')$$);
SELECT t.error_of($$SELECT fencing.protect('acct', mode => 'eventual')$$);
-- Keys whose equal values print differently ('1 day' = '24 hours') cannot be
-- remembered once deleted; a DEFERRABLE key does not wait for concurrent deletes.
CREATE TABLE interval_key (id interval PRIMARY KEY);
CREATE TABLE jsonb_key (id jsonb PRIMARY KEY);
CREATE TABLE deferred_key (id int PRIMARY KEY DEFERRABLE);
CREATE TABLE scaled_key (id numeric(12,2) PRIMARY KEY, at timestamptz, UNIQUE (at));
SELECT t.error_of($$SELECT fencing.protect('interval_key')$$);
SELECT t.error_of($$SELECT fencing.protect('jsonb_key')$$);
SELECT t.error_of($$SELECT fencing.protect('deferred_key')$$);
SELECT fencing.protect('scaled_key');
SELECT t.error_of($$SELECT fencing.unprotect(NULL)$$);
-- ... and none of them changed a table.
SELECT count(*) AS guards FROM pg_trigger WHERE tgname = 'fencing_guard'
  AND tgrelid IN ('no_pk'::regclass, 'int_token'::regclass, 'acct_view'::regclass,
                  'big_pk'::regclass, 'bare'::regclass, 'interval_key'::regclass,
                  'jsonb_key'::regclass, 'deferred_key'::regclass);
SELECT attname FROM pg_attribute WHERE attrelid = 'bare'::regclass AND attnum > 0 ORDER BY attnum;
SELECT * FROM fencing.protected_tables WHERE relation = 'acct'::regclass;

DROP VIEW acct_view;
DROP TABLE acct, snapshot_before, no_pk, no_token, int_token, big_pk, bare, interval_key, jsonb_key,
	deferred_key, scaled_key;
