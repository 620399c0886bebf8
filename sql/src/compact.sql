-- compact() and compact_resources().  Definitions (CREATE OR REPLACE).

-- Compaction: the state that only grows - a mark for every deleted key, a
-- row for every resource ever acquired or fenced - bounded by floors.  Safe
-- only when every token still in use is at or above the floor: tokens from
-- one source that only goes up (fencing.acquire(), or one counter for all
-- keys and resources), with the floor below every live holder's token; not
-- with per-resource counters that start at 1.
CREATE OR REPLACE FUNCTION fencing.compact(target regclass, below bigint)
RETURNS bigint
AS 'MODULE_PATHNAME', 'compact'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION fencing.compact(regclass, bigint) IS
'raises a protected table''s floor to below (no write may present a lower token) and removes the deleted-key marks under it; returns how many';

-- compact() a batch per transaction (src/admin/compact.cpp): the floor is raised
-- and committed first (writers wait for that moment only), then the marks go
-- a batch per transaction.  CALLed on its own.
CREATE OR REPLACE PROCEDURE fencing.compact_in_batches(target regclass, below bigint,
                                                       batch_size integer DEFAULT 1000,
                                                       INOUT removed bigint DEFAULT NULL)
AS 'MODULE_PATHNAME', 'compact_in_batches'
LANGUAGE C;
COMMENT ON PROCEDURE fencing.compact_in_batches(regclass, bigint, integer, bigint) IS
'compact() without holding writers off: raises the floor, then removes the marks under it batch_size at a time, committing each batch';

-- In C (src/admin/compact.cpp), SECURITY DEFINER: the tables it writes are the
-- extension owner's.  A floor is a token: not more than one above every token
-- the lock manager issued for the resources and what it can issue by now
-- (not the fences' tokens, which any caller picks: the floor is also
-- acquire()'s least token), with arithmetic that cannot overflow.
CREATE OR REPLACE FUNCTION fencing.compact_resources(below bigint, prefix text DEFAULT '')
RETURNS bigint
AS 'MODULE_PATHNAME', 'compact_resources'
LANGUAGE C VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION fencing.compact_resources(bigint, text) FROM PUBLIC;
COMMENT ON FUNCTION fencing.compact_resources(bigint, text) IS
'raises the floor of resources named prefix...: removes their idle leases and fences below it; returns how many';

-- compact_resources() a batch per transaction.  Not SECURITY DEFINER, which
-- would forbid its commits: revoked from PUBLIC, it works on the extension's
-- tables as their owner, in C.
CREATE OR REPLACE PROCEDURE fencing.compact_resources_in_batches(below bigint, prefix text DEFAULT '',
                                                                 batch_size integer DEFAULT 1000,
                                                                 INOUT removed bigint DEFAULT NULL)
AS 'MODULE_PATHNAME', 'compact_resources_in_batches'
LANGUAGE C;
REVOKE ALL ON PROCEDURE fencing.compact_resources_in_batches(bigint, text, integer, bigint) FROM PUBLIC;
COMMENT ON PROCEDURE fencing.compact_resources_in_batches(bigint, text, integer, bigint) IS
'compact_resources() a batch per transaction, the floor committed first; returns how many it removed';
