/*
 * Backend caches keyed by relation OID whose entries go with the relation's
 * relcache invalidation (all of them with a full one): what the extension
 * read of its own tables about a relation, kept until a change of that
 * relation's row invalidates it (CacheInvalidateRelcacheByRelid at commit).
 *
 * Also the module's one relcache callback, which every cache of the module
 * listens to: PostgreSQL keeps ten relcache callbacks for all the modules a
 * backend loads (MAX_RELCACHE_CALLBACKS), and Citus takes five of them.
 */
#pragma once

#include "base/boundary.hpp"

extern "C" {
#include "utils/hsearch.h"
#include "utils/inval.h"
}

namespace fencing
{

/*
 * The cache in *cache, made on first use: a hash table of `entry_size`
 * entries whose first member is the relation's Oid.
 */
HTAB *relid_cache(HTAB **cache, const char *name, Size entry_size);

/*
 * Calls `listener(arg, relid)` on every relcache invalidation of this
 * database (relid InvalidOid: all of them), as CacheRegisterRelcacheCallback()
 * would, through the module's one callback.  No other file registers a
 * relcache callback (test/lint/subset).
 */
void on_relcache_invalidation(RelcacheCallbackFunction listener, Datum arg);

} // namespace fencing
