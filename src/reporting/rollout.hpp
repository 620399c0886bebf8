/*
 * Report-only guards (fencing.protect(..., enforce => false)): the writes
 * that enforcement would refuse, accepted and reported instead; and
 * maintenance writes, accepted without a token.  Each is grouped in shared
 * memory by (database, protected table, role, application_name, reason) for
 * fencing.rollout_report and summed per table in fencing.stats; a
 * statement's reported writes make one LOG line when it ends (the first
 * one's DETAIL and a count), its maintenance writes another.
 *
 * The groups live in a fixed-size hash table of fencing.rollout_report_max
 * entries (only with shared_preload_libraries = 'fencing'): nothing durable,
 * emptied by a restart.  When it is full, a new group is not added: its
 * writes are counted in its database's overflow row per reason (no
 * relation) and still logged.  A write is counted when its transaction
 * commits (COMMIT PREPARED for a prepared one), never when it rolls back.
 */
#pragma once

#include "base/token_compare.hpp"
#include "reporting/stats.hpp"

namespace fencing
{

/* Why a write was accepted without a token enforcement would take. */
enum class Unfenced {
	stale,      /* report-only: a token enforcement would refuse as stale */
	missing,    /* report-only: no token */
	maintenance /* a maintenance write (fencing.maintenance) without a token */
};

/*
 * A write to `rel` (protected table `relid`) accepted for `kind`: counted
 * and kept for the statement's LOG line.  `key` may be NULL; `presented`
 * counts for a stale token only.
 */
void note_reported(Relation rel, Oid relid, Unfenced kind, const char *key, Mode mode,
                   int64 presented, int64 stored);

/*
 * An executor starts, and ends: the outermost one's end (not that of the
 * SQL the guard or a trigger runs inside the statement) flushes the LOG line.
 */
void rollout_executor_start();
void rollout_executor_end();

/*
 * A utility statement (COPY FROM) or the transaction ends: the LOG line of
 * its reported writes, if any.
 */
void rollout_flush_log();

/*
 * The end of a (sub)transaction: the LOG line (at commit and abort, for
 * any write no statement's end flushed), and the transaction's groups
 * counted at commit, kept at PREPARE, dropped at abort; a subtransaction's
 * become its parent's or are dropped.
 */
void rollout_end_of_transaction(XactEvent event);
void rollout_end_of_subtransaction(SubXactEvent event);

/*
 * After ProcessUtility (only when preloaded): PREPARE TRANSACTION's gid is
 * remembered; COMMIT and ROLLBACK PREPARED settle its groups.
 */
void rollout_after_utility(const StatsUtility &seen);

/* The setting fencing.rollout_report_max (entry/settings.cpp). */
extern int rollout_report_max;

/* The overflow, the prepared transactions' groups, the groups (only when preloaded;
 * base/shared_memory.hpp). */
extern const SharedArea rollout_overflow_area;
extern const SharedArea rollout_prepared_area;
extern const SharedArea rollout_report_area;

} // namespace fencing
