/*
 * Report-only guards: see rollout.hpp.  The groups are a fixed-size hash
 * table in shared memory under one LWLock (shared to count into an existing
 * group, exclusive to add one); counts are atomics, first and last seen
 * under the group's spinlock.
 *
 * A write is counted when its transaction commits, as fencing.stats counts
 * accepted writes: the transaction's writes wait in backend memory, one
 * PendingGroup per group and (sub)transaction level; a subtransaction's
 * abort drops its own, its commit hands them to its parent; PREPARE
 * TRANSACTION moves them into a slot in shared memory keyed by (database,
 * gid), which COMMIT PREPARED counts and ROLLBACK PREPARED drops, in
 * whatever session, once the command succeeded.  So a report-only write, or a
 * maintenance write, is counted once if it commits and never if it does not.
 */
#include "reporting/rollout.hpp"
#include "base/rights.hpp"
#include "reporting/stats.hpp"
#include "catalog/citus_names.hpp"
#include "reporting/errors.hpp"

extern "C" {
#include "access/twophase.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "mb/pg_wchar.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/spin.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
}

namespace fencing
{

int rollout_report_max = 1000;

namespace
{

/* A group of would-be refusals. */
struct ReportKey {
	Oid dbid;
	Oid relid; /* InvalidOid: the overflow group of its reason */
	Oid roleid;
	char application[NAMEDATALEN];
	int reason; /* Unfenced */
};

struct ReportGroup {
	ReportKey key;
	pg_atomic_uint64 count;
	slock_t mutex; /* protects the times */
	TimestampTz first_seen;
	TimestampTz last_seen;
};
FENCING_PLAIN_DATA(ReportGroup);

/*
 * Beyond fencing.rollout_report_max groups, each database's writes go to an
 * overflow group per reason (relation NULL), entries of the same table for
 * which this much room is kept: those of a database are its own (its
 * report shows them, its reset empties them).
 */
constexpr int overflow_databases = 64;
constexpr int overflow_room = 3 * overflow_databases;

/* The table's lock, and how many of its entries are overflow groups. */
struct Shared {
	LWLock *lock;
	int overflow_entries;
};
FENCING_PLAIN_DATA(Shared);

/* A group's writes in this transaction, not yet counted. */
struct PendingGroup {
	ReportKey key;
	int level; /* the (sub)transaction nest level whose writes these are */
	uint64 count;
	TimestampTz first_seen;
	TimestampTz last_seen;
};
FENCING_PLAIN_DATA(PendingGroup);

/* The pending groups a prepared transaction keeps until COMMIT or ROLLBACK PREPARED. */
constexpr int prepared_groups = 16;
struct PreparedGroups {
	bool in_use;
	Oid dbid;
	char gid[GIDSIZE];
	int count;
	PendingGroup groups[prepared_groups];
};
FENCING_PLAIN_DATA(PreparedGroups);

Shared *shared = nullptr;
HTAB *groups = nullptr;                   /* in shared memory; nullptr when not preloaded */
PreparedGroups *prepared_slots = nullptr; /* max_prepared_xacts of them (under shared->lock) */

/* This transaction's groups, deepest level last (TopMemoryContext). */
constexpr int max_pending = 65536; /* groups one transaction keeps; the rest are not counted */
PendingGroup *pending = nullptr;
int pending_count = 0;
int pending_room = 0;

/* The gid of the PREPARE TRANSACTION that ended the last statement, for its XACT_EVENT_PREPARE. */
char preparing_gid[GIDSIZE];
bool preparing_gid_known = false;

/* The statement's writes of one kind (reported, maintenance), for its LOG line. */
constexpr int detail_room = 512;
struct Pending {
	uint64 count;
	char first[detail_room];
};
Pending statement_writes[2]; /* [0]: reported, [1]: maintenance */
int executor_depth = 0; /* executors running (an error skips their end: reset at commit, abort) */

const char *const reason_names[] = {"stale", "missing", "maintenance"};

void start_group(ReportGroup *group, TimestampTz now)
{
	pg_atomic_init_u64(&group->count, 0);
	SpinLockInit(&group->mutex);
	group->first_seen = group->last_seen = now;
}

/*
 * Groups by role and application may take all but a quarter of the table:
 * the rest is kept for one group per relation and reason, with neither, so
 * that a relation's writes are still counted as its own (fencing.stats sums
 * them) when many roles or applications took the room.
 */
long detailed_room()
{
	return rollout_report_max - rollout_report_max / 4;
}

/* The group of `key`'s relation and reason, without role and application. */
ReportKey relation_key(const ReportKey &key)
{
	ReportKey relation;
	memset(&relation, 0, sizeof relation);
	relation.dbid = key.dbid;
	relation.relid = key.relid;
	relation.reason = key.reason;
	return relation;
}

/* The number of entries that are not overflow groups; lock held. */
long used_groups()
{
	return hash_get_num_entries(groups) - shared->overflow_entries;
}

/* The overflow group of `key`'s database and reason. */
ReportKey overflow_key(const ReportKey &key)
{
	ReportKey overflow;
	memset(&overflow, 0, sizeof overflow);
	overflow.dbid = key.dbid;
	overflow.reason = key.reason;
	return overflow;
}

void add_to(ReportGroup *group, uint64 count, TimestampTz first, TimestampTz last)
{
	pg_atomic_fetch_add_u64(&group->count, static_cast<int64>(count));
	SpinLockAcquire(&group->mutex);
	if (group->first_seen == 0 || first < group->first_seen)
		group->first_seen = first;
	group->last_seen = Max(group->last_seen, last);
	SpinLockRelease(&group->mutex);
}

/*
 * Counts a committed group's writes in its group, made if there is room;
 * else in its relation's group, made if there is room; else in its
 * database's overflow group (made in the room kept for those); else nowhere.
 */
void count_group(const PendingGroup &pending_group)
{
	const ReportKey &key = pending_group.key;
	ReportKey relation = relation_key(key);
	ReportKey overflow = overflow_key(key);
	bool found;
	LWLockAcquire(shared->lock, LW_SHARED);
	auto *group = static_cast<ReportGroup *>(hash_search(groups, &key, HASH_FIND, &found));
	if (group == nullptr && used_groups() >= detailed_room())
		group = static_cast<ReportGroup *>(hash_search(groups, &relation, HASH_FIND, &found));
	if (group == nullptr && used_groups() >= rollout_report_max)
		group = static_cast<ReportGroup *>(hash_search(groups, &overflow, HASH_FIND, &found));
	if (group == nullptr) {
		LWLockRelease(shared->lock);
		LWLockAcquire(shared->lock, LW_EXCLUSIVE);
		group = static_cast<ReportGroup *>(hash_search(groups, &key, HASH_FIND, &found));
		if (group == nullptr && used_groups() < detailed_room())
			group = static_cast<ReportGroup *>(hash_search(groups, &key, HASH_ENTER_NULL, &found));
		if (group == nullptr && used_groups() < rollout_report_max)
			group =
			    static_cast<ReportGroup *>(hash_search(groups, &relation, HASH_ENTER_NULL, &found));
		if (group == nullptr) {
			group = static_cast<ReportGroup *>(hash_search(groups, &overflow, HASH_FIND, &found));
			if (group == nullptr && shared->overflow_entries < overflow_room) {
				group = static_cast<ReportGroup *>(
				    hash_search(groups, &overflow, HASH_ENTER_NULL, &found));
				if (group != nullptr && !found)
					shared->overflow_entries++;
			}
		}
		if (group != nullptr && !found)
			start_group(group, 0);
	}
	if (group != nullptr)
		add_to(group, pending_group.count, pending_group.first_seen, pending_group.last_seen);
	LWLockRelease(shared->lock);
}

/* Notes one write of group `key` in the current (sub)transaction. */
void note_pending(const ReportKey &key)
{
	int level = GetCurrentTransactionNestLevel();
	TimestampTz now = GetCurrentTimestamp();
	for (int i = pending_count - 1; i >= 0 && pending[i].level == level; i--)
		if (memcmp(&pending[i].key, &key, sizeof key) == 0) {
			pending[i].count++;
			pending[i].last_seen = now;
			return;
		}
	if (pending_count == max_pending)
		return;
	if (pending_count == pending_room) {
		int room = pending_room == 0 ? 8 : pending_room * 2;
		Size size = sizeof(PendingGroup) * static_cast<Size>(room);
		pending = static_cast<PendingGroup *>(pending == nullptr
		                                          ? MemoryContextAlloc(TopMemoryContext, size)
		                                          : repalloc(pending, size));
		pending_room = room;
	}
	pending[pending_count++] = PendingGroup{key, level, 1, now, now};
}

/*
 * At PREPARE TRANSACTION `gid` (nullptr: not seen), the pending groups wait
 * in a slot.  The transaction is prepared already: nothing here may fail;
 * what finds no room is not counted, and a WARNING says so.
 */
void keep_until_prepared_ends(const char *gid)
{
	PreparedGroups *slot = nullptr;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (prepared_slots != nullptr && gid != nullptr)
		slot = claim_prepared_slot(prepared_slots, gid);
	int lost = 0;
	for (int i = 0; i < pending_count; i++) {
		PreparedGroups *s = slot;
		int kept = -1;
		for (int j = 0; s != nullptr && j < s->count && kept < 0; j++)
			if (memcmp(&s->groups[j].key, &pending[i].key, sizeof pending[i].key) == 0)
				kept = j;
		if (kept >= 0) {
			s->groups[kept].count += pending[i].count;
			s->groups[kept].first_seen = Min(s->groups[kept].first_seen, pending[i].first_seen);
			s->groups[kept].last_seen = Max(s->groups[kept].last_seen, pending[i].last_seen);
		} else if (s != nullptr && s->count < prepared_groups)
			s->groups[s->count++] = pending[i];
		else
			lost++;
	}
	LWLockRelease(shared->lock);
	if (lost > 0)
		ereport(WARNING,
		        (errmsg("fencing.rollout_report will not count %d group(s) of writes of prepared "
		                "transaction \"%s\"",
		                lost, gid ? gid : ""),
		         errdetail("Shared memory keeps up to %d groups for each of "
		                   "max_prepared_transactions (%d) prepared transactions.",
		                   prepared_groups, max_prepared_xacts)));
}

/* COMMIT PREPARED `gid` has succeeded (commit) or ROLLBACK PREPARED: count its groups or not. */
void settle_prepared(const char *gid, bool commit)
{
	PendingGroup settled[prepared_groups];
	int count = 0;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; prepared_slots != nullptr && i < max_prepared_xacts; i++) {
		PreparedGroups *slot = &prepared_slots[i];
		if (!slot->in_use || slot->dbid != MyDatabaseId || strcmp(slot->gid, gid) != 0)
			continue;
		if (commit)
			for (int j = 0; j < slot->count && count < prepared_groups; j++)
				settled[count++] = slot->groups[j];
		slot->in_use = false;
	}
	LWLockRelease(shared->lock);
	for (int i = 0; i < count; i++)
		count_group(settled[i]);
}

/* "Relation public.t, key (id)=(1): presented token 3, stored token 5 (monotonic mode)." */
const char *describe(Relation rel, Unfenced kind, const char *key, Mode mode, int64 presented,
                     int64 stored)
{
	const char *subject = key == all_rows
	                          ? psprintf("relation %s, all rows", relation_display_name(rel))
	                          : psprintf("relation %s, key %s", relation_display_name(rel),
	                                     key ? key : "(not visible)");
	const char *stored_text =
	    stored == hidden_token ? "(not visible)" : psprintf(INT64_FORMAT, stored);
	if (kind == Unfenced::missing)
		return psprintf("a write without a token to %s, stored token %s", subject, stored_text);
	if (kind == Unfenced::maintenance)
		return psprintf("a write by role %s to %s, which kept stored token %s",
		                GetUserNameFromId(GetUserId(), true), subject, stored_text);
	return psprintf("a write with stale token " INT64_FORMAT " to %s, stored token %s (%s mode)",
	                presented, subject, stored_text, mode_name(mode));
}

} // namespace

void note_reported(Relation rel, Oid relid, Unfenced kind, const char *key, Mode mode,
                   int64 presented, int64 stored)
{
	Pending &pending = statement_writes[kind == Unfenced::maintenance ? 1 : 0];
	if (pending.count++ == 0) {
		const char *detail = describe(rel, kind, key, mode, presented, stored);
		size_t length = strlen(detail);
		if (length >= detail_room)
			length = static_cast<size_t>(
			    pg_mbcliplen(detail, static_cast<int>(length), detail_room - 1));
		memcpy(pending.first, detail, length);
		pending.first[length] = '\0';
	}
	if (groups == nullptr || !stats_on)
		return;
	ReportKey group;
	memset(&group, 0, sizeof group);
	group.dbid = MyDatabaseId;
	group.relid = relid;
	group.roleid = GetUserId();
	const char *application = application_name ? application_name : "";
	size_t length = strlen(application);
	if (length >= NAMEDATALEN)
		length = static_cast<size_t>(
		    pg_mbcliplen(application, static_cast<int>(length), NAMEDATALEN - 1));
	memcpy(group.application, application, length);
	group.reason = static_cast<int>(kind);
	note_pending(group);
}

void rollout_executor_start()
{
	executor_depth++;
}

void rollout_executor_end()
{
	if (executor_depth > 0)
		executor_depth--;
	if (executor_depth == 0)
		rollout_flush_log();
}

void rollout_flush_log()
{
	executor_depth = 0;
	uint64 reported = statement_writes[0].count, maintenance = statement_writes[1].count;
	statement_writes[0].count = statement_writes[1].count = 0;
	if (reported > 0)
		ereport(LOG, (errmsg("fencing: report-only guard accepted " UINT64_FORMAT
		                     " write(s) that enforcement would refuse",
		                     reported),
		              errdetail("The first was %s.", statement_writes[0].first)));
	if (maintenance > 0)
		ereport(LOG, (errmsg("fencing: " UINT64_FORMAT " maintenance write(s) without a token",
		                     maintenance),
		              errdetail("The first was %s.", statement_writes[1].first)));
}

void rollout_end_of_transaction(XactEvent event)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_COMMIT)
		rollout_flush_log();
	bool commit = event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT;
	bool prepare = event == XACT_EVENT_PREPARE;
	if (!commit && !prepare && event != XACT_EVENT_ABORT && event != XACT_EVENT_PARALLEL_ABORT)
		return;
	bool gid_known = preparing_gid_known;
	preparing_gid_known = false;
	if (pending_count == 0 || groups == nullptr) {
		pending_count = 0;
		return;
	}
	if (prepare)
		keep_until_prepared_ends(gid_known ? preparing_gid : nullptr);
	for (int i = 0; commit && i < pending_count; i++)
		count_group(pending[i]);
	pending_count = 0;
}

void rollout_end_of_subtransaction(SubXactEvent event)
{
	if (pending_count == 0 ||
	    (event != SUBXACT_EVENT_COMMIT_SUB && event != SUBXACT_EVENT_ABORT_SUB))
		return;
	/* The groups of the ending subtransaction (and deeper) are the last ones. */
	int level = GetCurrentTransactionNestLevel();
	int first = pending_count;
	while (first > 0 && pending[first - 1].level >= level)
		first--;
	if (event == SUBXACT_EVENT_ABORT_SUB) {
		pending_count = first;
		return;
	}
	/* Committed: its groups are the parent's, merged into those the parent has. */
	int parent_first = first;
	while (parent_first > 0 && pending[parent_first - 1].level == level - 1)
		parent_first--;
	int kept = first;
	for (int i = first; i < pending_count; i++) {
		PendingGroup moved = pending[i];
		moved.level = level - 1;
		int into = -1;
		for (int j = parent_first; j < kept && into < 0; j++)
			if (memcmp(&pending[j].key, &moved.key, sizeof moved.key) == 0)
				into = j;
		if (into < 0) {
			pending[kept++] = moved;
			continue;
		}
		pending[into].count += moved.count;
		pending[into].first_seen = Min(pending[into].first_seen, moved.first_seen);
		pending[into].last_seen = Max(pending[into].last_seen, moved.last_seen);
	}
	pending_count = kept;
}

void rollout_after_utility(const StatsUtility &seen)
{
	if (seen.kind == TRANS_STMT_PREPARE) {
		/* Used if the transaction gets prepared when this statement ends. */
		memcpy(preparing_gid, seen.gid, sizeof seen.gid);
		preparing_gid_known = true;
	}
	if (groups != nullptr &&
	    (seen.kind == TRANS_STMT_COMMIT_PREPARED || seen.kind == TRANS_STMT_ROLLBACK_PREPARED))
		settle_prepared(seen.gid, seen.kind == TRANS_STMT_COMMIT_PREPARED);
}

namespace
{

void attach_overflow(void *memory, bool found, LWLockPadded *locks)
{
	shared = static_cast<Shared *>(memory);
	if (!found)
		shared->lock = &locks[0].lock;
}

long report_entries()
{
	return rollout_report_max + overflow_room;
}

} // namespace

const SharedArea rollout_overflow_area = shared_struct(
    "fencing rollout overflow", size_of<Shared>, attach_overflow, "fencing rollout report", 1);
const SharedArea rollout_prepared_area =
    shared_struct("fencing rollout prepared", size_per_prepared_xact<PreparedGroups>,
                  attach_pointer<PreparedGroups, &prepared_slots>);
const SharedArea rollout_report_area =
    shared_hash("fencing rollout report", report_entries, sizeof(ReportKey), sizeof(ReportGroup),
                attach_pointer<HTAB, &groups>);

/* Removes the groups of the databases for which `remove` (a dbid) is true; lock held exclusive. */
template <typename Remove> void remove_groups(Remove remove)
{
	HASH_SEQ_STATUS status;
	hash_seq_init(&status, groups);
	for (ReportGroup *group;
	     (group = static_cast<ReportGroup *>(hash_seq_search(&status))) != nullptr;)
		if (remove(group->key.dbid)) {
			if (!OidIsValid(group->key.relid))
				shared->overflow_entries--;
			(void)hash_search(groups, &group->key, HASH_REMOVE, nullptr);
		}
}

/* Frees the groups of databases that no longer exist (none reads or resets them). */
void reclaim_dropped_databases()
{
	Oid seen[overflow_databases * 4];
	int count = 0;
	LWLockAcquire(shared->lock, LW_SHARED);
	HASH_SEQ_STATUS status;
	hash_seq_init(&status, groups);
	for (ReportGroup *group;
	     (group = static_cast<ReportGroup *>(hash_seq_search(&status))) != nullptr;) {
		int i = 0;
		while (i < count && seen[i] != group->key.dbid)
			i++;
		if (i == count && count < static_cast<int>(lengthof(seen)) &&
		    group->key.dbid != MyDatabaseId)
			seen[count++] = group->key.dbid;
	}
	LWLockRelease(shared->lock);
	int gone = keep_dropped_databases(seen, count);
	if (gone == 0)
		return;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	remove_groups([&](Oid dbid) {
		for (int i = 0; i < gone; i++)
			if (seen[i] == dbid)
				return true;
		return false;
	});
	LWLockRelease(shared->lock);
}

} // namespace fencing

using namespace fencing;

/*
 * fencing_internal._rollout_report(): the groups of this database (its overflow
 * groups, relation NULL, among them).
 */
FENCING_FUNCTION(fencing_rollout_report)
{
	InitMaterializedSRF(fcinfo, 0);
	auto *rsinfo = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);
	/* Not preloaded: empty (fencing.stats, which reads it too, says why). */
	if (groups == nullptr)
		return static_cast<Datum>(0);
	/*
	 * A role without USAGE on schema fencing (a pg_monitor member, reading
	 * fencing_monitor.stats) sees no role or application_name.
	 */
	bool detail = has_fencing_usage();
	auto emit = [rsinfo, detail](ReportGroup *group) {
		uint64 count = pg_atomic_read_u64(&group->count);
		if (count == 0)
			return;
		SpinLockAcquire(&group->mutex);
		TimestampTz first = group->first_seen, last = group->last_seen;
		SpinLockRelease(&group->mutex);
		bool overflow = group->key.relid == InvalidOid;
		bool whole_relation = !OidIsValid(group->key.roleid);
		Datum values[7] = {ObjectIdGetDatum(group->key.relid),
		                   ObjectIdGetDatum(group->key.roleid),
		                   CStringGetTextDatum(group->key.application),
		                   CStringGetTextDatum(reason_names[group->key.reason]),
		                   Int64GetDatum(static_cast<int64>(count)),
		                   TimestampTzGetDatum(first),
		                   TimestampTzGetDatum(last)};
		bool hidden = whole_relation || !detail;
		bool nulls[7] = {overflow, hidden, hidden, false, false, false, false};
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	};
	reclaim_dropped_databases();
	LWLockAcquire(shared->lock, LW_SHARED);
	HASH_SEQ_STATUS status;
	hash_seq_init(&status, groups);
	for (ReportGroup *group;
	     (group = static_cast<ReportGroup *>(hash_seq_search(&status))) != nullptr;)
		if (group->key.dbid == MyDatabaseId)
			emit(group);
	LWLockRelease(shared->lock);
	return static_cast<Datum>(0);
}

/* fencing.rollout_report_reset(): empties the report of the current database. */
FENCING_FUNCTION(fencing_rollout_report_reset)
{
	if (groups == nullptr)
		PG_RETURN_VOID();
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	remove_groups([](Oid dbid) { return dbid == MyDatabaseId; });
	LWLockRelease(shared->lock);
	reclaim_dropped_databases();
	PG_RETURN_VOID();
}
