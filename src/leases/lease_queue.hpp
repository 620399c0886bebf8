/*
 * The queue of acquire() calls that wait for a lease: first come, first
 * served per resource, woken at the commit that frees the resource.  It lives
 * in shared memory, so it needs shared_preload_libraries = 'fencing';
 * without it queue_available() is false and acquire() polls (acquire.cpp).
 */
#pragma once

#include "base/boundary.hpp"
#include "base/shared_memory.hpp"

extern "C" {
#include "access/xact.h"
}

namespace fencing
{

/* A place in the queue of one resource, held by this backend while it waits. */
struct QueuePlace {
	uint64 resource; /* hash of (database, resource name) */
	int slot;        /* this backend's record */
};
FENCING_PLAIN_DATA(QueuePlace);

/* Is the shared queue there (the module was preloaded)? */
bool queue_available();

/* The hash that names `resource` of the current database in the queue. */
uint64 queue_key(const char *resource);

/* Does any backend wait for `resource` (or hold a grant from the queue not yet committed)? */
bool anyone_queued(uint64 resource);

/* Joins the queue of `resource` at its end; false if this backend has no record. */
bool join_queue(uint64 resource, QueuePlace *place);

/* Is this place the first of its resource's queue? */
bool first_in_queue(const QueuePlace *place);

/*
 * Forgets earlier wakeups: call before looking at what the sleep waits for;
 * a wakeup after this moment ends the next queue_sleep() at once.
 */
void prepare_queue_sleep(const QueuePlace *place);

/*
 * Sleeps until woken (first in line, and the lease may have been freed) or
 * `timeout_ms` passed; interrupts are served: a cancel or statement_timeout
 * raises 57014 from here.
 */
void queue_sleep(const QueuePlace *place, long timeout_ms);

/* Leaves the queue (also on error) and wakes the one behind, if it is now first. */
void leave_queue(QueuePlace *place);

/*
 * The place was granted: it stays first in line until the transaction (or
 * the subtransaction that granted it) ends, so that the next waiter sees the
 * lease held, not free, once it may try.
 */
void hold_place_until_commit(QueuePlace *place);

/* The current transaction freed `resource`: wake its waiters when it commits. */
void wake_queue_at_commit(const char *resource);

/*
 * The queue's shared memory (base/shared_memory.hpp) and its part of the
 * transaction callbacks (preloaded only), called by entry/module.cpp.
 */
extern const SharedArea lease_queue_area;
void lease_queue_end_of_transaction(XactEvent event);
void lease_queue_end_of_subtransaction(SubXactEvent event, SubTransactionId subid,
                                       SubTransactionId parent);

} // namespace fencing
