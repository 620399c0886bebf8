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
#include "base/shared_memory.hpp"

extern "C" {
#include "access/twophase.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "nodes/plannodes.h"
#include "utils/guc.h"
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

/* ceiling: a token above the table's max_token (`stored`: the max_token). */
enum class Rejection { stale, missing, ceiling };

/*
 * Counts and, per fencing.log_rejections, logs a rejected write to `rel`
 * (or to `resource` when rel is NULL); `key` may be NULL.  A ceiling
 * rejection is logged as a stale one is, and not counted: fencing.stats
 * counts the writes its guard refuses by the stored token.
 */
void note_rejection(Relation rel, const char *resource, Rejection kind, const char *key,
                    int64 presented, int64 stored);

/*
 * The settings (defined in entry/settings.cpp): fencing.stats (stats_on),
 * fencing.stats_max, fencing.log_rejections (0 off, 1 stale, 2 all).
 */
extern bool stats_on;
extern int stats_max;
extern int log_rejections;
extern const config_enum_entry log_rejection_options[];

/* The counts and the prepared transactions' counts (only when preloaded; base/shared_memory.hpp).
 */
extern const SharedArea stats_area;
extern const SharedArea stats_prepared_area;

/*
 * Keeps, at the start of `dbids`, those of its `count` databases that no
 * longer exist, and returns how many: shared rows of a dropped database
 * are freed by whoever sees them (a dropped database resets nothing).
 */
int keep_dropped_databases(Oid *dbids, int count);

/*
 * The slot of prepared transaction `gid` of this database among the
 * max_prepared_xacts `slots` (each with in_use, dbid, gid and count),
 * claimed empty: one that a transaction of that gid left, ended unseen, is
 * reused.  nullptr if none is free.  The slots' lock held exclusive.
 */
template <typename Slot> Slot *claim_prepared_slot(Slot *slots, const char *gid)
{
	Slot *slot = nullptr;
	for (int i = 0; i < max_prepared_xacts; i++) {
		Slot *s = &slots[i];
		if (s->in_use && s->dbid == MyDatabaseId && strcmp(s->gid, gid) == 0)
			s->in_use = false;
		if (!s->in_use && slot == nullptr)
			slot = s;
	}
	if (slot != nullptr) {
		slot->in_use = true;
		slot->dbid = MyDatabaseId;
		strlcpy(slot->gid, gid, sizeof slot->gid);
		slot->count = 0;
	}
	return slot;
}

/* What ProcessUtility runs, as stats_after_utility() needs it. */
struct StatsUtility {
	TransactionStmtKind kind;
	char gid[GIDSIZE];
};
FENCING_PLAIN_DATA(StatsUtility);

/*
 * Around ProcessUtility (only when preloaded): PREPARE TRANSACTION's gid is
 * remembered; COMMIT and ROLLBACK PREPARED settle its counts once they
 * succeed.
 */
StatsUtility stats_before_utility(const PlannedStmt *statement);
void stats_after_utility(const StatsUtility &seen);

/*
 * At the end of a transaction (only when preloaded): its accepted writes go
 * to shared memory at commit, to a slot at PREPARE, nowhere at abort; a
 * subtransaction's are its parent's or dropped.
 */
void stats_end_of_transaction(XactEvent event);
void stats_end_of_subtransaction(SubXactEvent event);

} // namespace fencing
