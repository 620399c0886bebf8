-- In the install script, and in the 0.2.0 -> 0.3.0 upgrade, which adds it.

-- The registry: the tables fencing.protect() guards, with their settings and
-- the identity of the primary key their marks were made under (key columns
-- in order, their types, collations and type modifiers; collations by name,
-- since pg_upgrade keeps no collation OIDs).  Written only by protect(),
-- unprotect() (src/admin/protect.cpp) and the DDL the extension follows
-- (src/admin/ddl.cpp), with the extension owner's rights; the extension
-- knows its tables from here, never
-- from trigger names.  An unprotected table keeps its row (protected =
-- false): protecting it again under another key identity raises its floor.
CREATE TABLE fencing.registry (
	relid regclass PRIMARY KEY,
	token_column name NOT NULL CHECK (token_column <> ''),
	mode text NOT NULL CHECK (mode IN ('monotonic', 'strict')),
	protected boolean NOT NULL,
	key_columns name[],
	key_types regtype[],
	key_collations text[],
	key_typmods integer[],
	recorded_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
SELECT pg_catalog.pg_extension_config_dump('fencing.registry', '');
REVOKE ALL ON fencing.registry FROM PUBLIC;
COMMENT ON TABLE fencing.registry IS
'tables protected by fencing.protect() (and formerly protected ones), with their settings and key identity';
