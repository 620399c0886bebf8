/*
 * Statistics (fencing.stats) and rejection logging (fencing.log_rejections).
 *
 * Counters live in shared memory, so they cover every backend; that needs
 * shared_preload_libraries = 'fencing' (without it the view is empty).  The
 * guard's hot path only bumps a counter in backend memory; a transaction's
 * accepted writes reach shared memory when it commits, a prepared
 * transaction's when COMMIT PREPARED ends it (a write rolled back, also to a
 * savepoint or by ROLLBACK PREPARED, is not counted), rejections at once.
 */
#pragma once

#include "base/token_compare.hpp"

extern "C" {
#include "utils/rel.h"
}

namespace fencing
{

/* Where a relation's or a resource's accepted writes are counted until commit. */
struct PendingCount;

/*
 * The counter of the protected relation `rel` belongs to (a partition's, when
 * its guard was cloned from a partitioned table, is the partitioned table's),
 * or nullptr when statistics are off.  Valid until the transaction ends.
 */
PendingCount *relation_counter(Relation rel);

/* The counter of a resource fenced with fence(), or nullptr. */
PendingCount *resource_counter(const char *resource);

/* One accepted write (of the current subtransaction). */
void count_accepted(PendingCount *counter);

enum class Rejection { stale, missing };

/*
 * Counts and, per fencing.log_rejections, logs a rejected write to `rel`
 * (or to `resource` when rel is NULL); `key` may be NULL.
 */
void note_rejection(Relation rel, const char *resource, Rejection kind, const char *key,
                    int64 presented, int64 stored);

/*
 * Defines the settings and, when preloaded, requests the shared memory and
 * installs the transaction callbacks and the ProcessUtility hook that sees
 * PREPARE TRANSACTION, COMMIT and ROLLBACK PREPARED (from _PG_init).
 */
void install_stats();

} // namespace fencing
