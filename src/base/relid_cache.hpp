/*
 * Backend caches keyed by relation OID whose entries go with the relation's
 * relcache invalidation (all of them with a full one): what the extension
 * read of its own tables about a relation, kept until a change of that
 * relation's row invalidates it (CacheInvalidateRelcacheByRelid at commit).
 */
#pragma once

#include "base/boundary.hpp"

extern "C" {
#include "utils/hsearch.h"
}

namespace fencing
{

/*
 * The cache in *cache, made on first use: a hash table of `entry_size`
 * entries whose first member is the relation's Oid.
 */
HTAB *relid_cache(HTAB **cache, const char *name, Size entry_size);

/*
 * Calls forget(arg, relid) on every relcache invalidation (relid
 * InvalidOid: all relations), as CacheRegisterRelcacheCallback() would.
 * PostgreSQL has 10 such callbacks per backend for everyone (Citus takes
 * five, PostgreSQL some): the extension's caches share one, registered on
 * first use.  Call once per cache.
 */
void watch_relations(void (*forget)(Datum arg, Oid relid), Datum arg);

} // namespace fencing
