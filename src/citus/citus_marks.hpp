/*
 * The marks of a Citus distributed table, beside its shards (citus.hpp),
 * behind the interface of state/mark_store.hpp: the guard of a shard reads
 * and writes its co-located marks shard and the floors on its node, found
 * once per statement; fenced_update(), TRUNCATE and compact() on the
 * distributed table go through Citus.
 */
#pragma once

#include "state/mark_store.hpp"

namespace fencing
{

/* Makes open_mark_store() hand Citus tables this implementation (_PG_init). */
void register_citus_marks();

} // namespace fencing
