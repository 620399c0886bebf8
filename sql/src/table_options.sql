-- In the install script, and in the 0.3.0 -> 0.4.0 upgrade, which adds it.

-- The rollout options of a protected table: whether its guard enforces
-- (refuses) or only reports the writes it would refuse, the highest token
-- it accepts (NULL: no ceiling), and the role that may make maintenance
-- writes besides its owner (NULL: none).  Written only by protect(),
-- set_enforce() and set_maintainer() (src/state/table_options.cpp) with the extension owner's
-- rights; a row goes with its registry row (a dropped table) and with
-- unprotect().  A table without a row enforces and has no ceiling.
CREATE TABLE fencing.table_options (
	relid regclass PRIMARY KEY REFERENCES fencing.registry (relid) ON DELETE CASCADE,
	enforce boolean NOT NULL DEFAULT true,
	max_token bigint CHECK (max_token > 0),
	maintainer regrole,
	changed_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
SELECT pg_catalog.pg_extension_config_dump('fencing.table_options', '');
REVOKE ALL ON fencing.table_options FROM PUBLIC;
COMMENT ON TABLE fencing.table_options IS
'rollout options of protected tables: enforcing or report-only, and the highest token accepted';
