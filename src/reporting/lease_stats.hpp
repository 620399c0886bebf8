/*
 * Lease counters and lease health (fencing.lease_stats, fencing.lease_health):
 * per resource prefix, in shared memory (shared_preload_libraries), counted
 * at the commit of the transaction that called acquire(), renew(),
 * renew_all() or release(); a stale refusal of fence() at once.
 */
#pragma once

#include "base/boundary.hpp"
#include "base/shared_memory.hpp"

extern "C" {
#include "access/xact.h"
}

namespace fencing
{

/*
 * acquire() on `resource` returns `token` (0: NULL) for a lease of `ttl`
 * (an interval Datum); `waited`: called with a wait, from `started`.
 */
void count_acquire(const char *resource, int64 token, Datum ttl, bool waited, TimestampTz started);

/* renew() or renew_all() of (resource, token) for `ttl`: renewed or not. */
void count_renewal(const char *resource, int64 token, Datum ttl, bool renewed);

/* release() of (resource, token): released or not. */
void count_release(const char *resource, int64 token, bool released);

/* fence() refuses `presented` for `resource` as stale (counted at once). */
void count_stale_lease_token(const char *resource, int64 presented);

/* The lease counters' shared memory (only when preloaded; base/shared_memory.hpp). */
extern const SharedArea lease_stats_area;

/* The end of a (sub)transaction (only when preloaded): its calls are counted or dropped. */
void lease_stats_end_of_transaction(XactEvent event);
void lease_stats_end_of_subtransaction(SubXactEvent event);

} // namespace fencing
