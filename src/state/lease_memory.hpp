/*
 * The lease memory: the effective expiry of leases renewed without writing
 * their row (leases/renew_memory.cpp), in shared memory (preloaded only).
 * An entry names its grant exactly - resource, holder, token and the row's
 * epoch - and holds the expiry its last renewal set; every reader of a
 * lease's expiry takes the later of the row's and the entry's
 * (fencing_internal._lease_expiry(), the expiry in state/lease_grace.hpp).
 * The memory is lost with a restart, a crash or a promotion: the row's
 * grace_until, which bounds every expiry kept here, then holds the lease.
 */
#pragma once

#include "base/boundary.hpp"
#include "base/shared_memory.hpp"

extern "C" {
#include "datatype/timestamp.h"
}

namespace fencing
{

/* fencing.lease_memory: the entries (0: none, renewals write their row); entry/settings.cpp. */
extern int lease_memory_size;

/* Resource and holder together longer than this (bytes) are never kept in memory. */
constexpr int lease_memory_key_max = 200;

/* One grant, as the memory names it; the texts are not copied. */
struct LeaseKey {
	const char *resource;
	int resource_len;
	const char *holder;
	int holder_len;
	int64 token;
	int64 epoch;
};
FENCING_PLAIN_DATA(LeaseKey);

/* Is there a lease memory (preloaded, fencing.lease_memory > 0)? */
bool lease_memory_enabled();

/* The expiry the memory keeps for this grant, or 0; takes the partition's lock shared. */
TimestampTz lease_memory_expiry(const LeaseKey &key);

/*
 * A renewal's access: lease_memory_lock() takes the resource's partition
 * lock exclusively (held until lease_memory_unlock(); an error releases it
 * with the transaction's abort), and returns the partition.  Between them,
 * lease_memory_find() tells the expiry kept for this grant (0 if none) and
 * whether the memory holds a later grant of the resource (a higher token);
 * lease_memory_store() keeps the new expiry, false if the partition is full.
 */
int lease_memory_lock(const LeaseKey &key);
void lease_memory_unlock(int partition);
TimestampTz lease_memory_find(int partition, const LeaseKey &key, bool *later_grant);
bool lease_memory_store(int partition, const LeaseKey &key, TimestampTz expires, TimestampTz now);

/* The table and its partitions' locks (only when preloaded; base/shared_memory.hpp). */
extern const SharedArea lease_memory_area;

} // namespace fencing
