-- The check every write goes through: the token comparison, the guard
-- trigger and fenced_update().  Definitions (CREATE OR REPLACE): in the
-- install script and in every upgrade script.

-- The token comparison, as a predicate for SQL that fenced_update() builds.
CREATE OR REPLACE FUNCTION fencing.token_accepts(stored bigint, presented bigint, strict boolean)
RETURNS boolean
AS 'MODULE_PATHNAME', 'token_accepts'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION fencing.token_accepts(bigint, bigint, boolean) IS
'may a write presenting token "presented" follow the stored token? (strict: only a greater one; NULL stored counts as 0)';

-- The storage guard: the triggers installed by fencing.protect().
CREATE OR REPLACE FUNCTION fencing.guard()
RETURNS trigger
AS 'MODULE_PATHNAME', 'guard'
LANGUAGE C;
COMMENT ON FUNCTION fencing.guard() IS
'trigger function of the storage guard; installed by fencing.protect(), not called directly';

-- One fenced write: apply changes and advance the token iff the row accepts it.
CREATE OR REPLACE FUNCTION fencing.fenced_update(
	target regclass,
	key jsonb,
	token bigint,
	changes jsonb DEFAULT '{}',
	on_stale text DEFAULT 'error')
RETURNS boolean
AS 'MODULE_PATHNAME', 'fenced_update'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION fencing.fenced_update(regclass, jsonb, bigint, jsonb, text) IS
'updates one row, named by its primary key, iff its stored token accepts the token; true if applied';
