/*
 * Report-only guards: see rollout.hpp.  The groups are a fixed-size hash
 * table in shared memory under one LWLock (shared to count into an existing
 * group, exclusive to add one); counts are atomics, first and last seen
 * under the group's spinlock.
 */
#include "reporting/rollout.hpp"
#include "base/rights.hpp"
#include "catalog/citus_names.hpp"
#include "reporting/errors.hpp"

extern "C" {
#include "miscadmin.h"
#include "mb/pg_wchar.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
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

/* The overflow groups (one per reason, for every database) and the table's lock. */
struct Shared {
	LWLock *lock;
	ReportGroup overflow[3];
};
FENCING_PLAIN_DATA(Shared);

Shared *shared = nullptr;
HTAB *groups = nullptr; /* in shared memory; nullptr when not preloaded */

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

void count_in(ReportGroup *group, TimestampTz now)
{
	pg_atomic_fetch_add_u64(&group->count, 1);
	SpinLockAcquire(&group->mutex);
	if (group->first_seen == 0)
		group->first_seen = now;
	group->last_seen = now;
	SpinLockRelease(&group->mutex);
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

/*
 * Counts one write in its group, made if there is room; else in its
 * relation's group, made if there is room; else in the overflow group.
 */
void count_group(const ReportKey &key)
{
	TimestampTz now = GetCurrentTimestamp();
	ReportKey relation = relation_key(key);
	bool found;
	LWLockAcquire(shared->lock, LW_SHARED);
	auto *group = static_cast<ReportGroup *>(hash_search(groups, &key, HASH_FIND, &found));
	if (group == nullptr && hash_get_num_entries(groups) >= detailed_room())
		group = static_cast<ReportGroup *>(hash_search(groups, &relation, HASH_FIND, &found));
	if (group == nullptr) {
		LWLockRelease(shared->lock);
		LWLockAcquire(shared->lock, LW_EXCLUSIVE);
		group = static_cast<ReportGroup *>(hash_search(groups, &key, HASH_FIND, &found));
		if (group == nullptr && hash_get_num_entries(groups) < detailed_room())
			group = static_cast<ReportGroup *>(hash_search(groups, &key, HASH_ENTER_NULL, &found));
		if (group == nullptr)
			group =
			    static_cast<ReportGroup *>(hash_search(groups, &relation, HASH_ENTER_NULL, &found));
		if (group != nullptr && !found)
			start_group(group, now);
	}
	count_in(group != nullptr ? group : &shared->overflow[key.reason], now);
	LWLockRelease(shared->lock);
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
	count_group(group);
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

void rollout_request_shmem()
{
	RequestAddinShmemSpace(add_size(MAXALIGN(sizeof(Shared)),
	                                hash_estimate_size(rollout_report_max, sizeof(ReportGroup))));
	RequestNamedLWLockTranche("fencing rollout report", 1);
}

void rollout_startup_shmem()
{
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	bool found;
	shared =
	    static_cast<Shared *>(ShmemInitStruct("fencing rollout overflow", sizeof(Shared), &found));
	if (!found) {
		shared->lock = &GetNamedLWLockTranche("fencing rollout report")[0].lock;
		for (ReportGroup &group : shared->overflow) {
			memset(&group.key, 0, sizeof group.key);
			start_group(&group, 0);
		}
		for (int i = 0; i < 3; i++)
			shared->overflow[i].key.reason = i;
	}
	HASHCTL ctl;
	ctl.keysize = sizeof(ReportKey);
	ctl.entrysize = sizeof(ReportGroup);
	groups = ShmemInitHash("fencing rollout report", rollout_report_max, rollout_report_max, &ctl,
	                       HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
	LWLockRelease(AddinShmemInitLock);
}

} // namespace fencing

using namespace fencing;

/*
 * fencing_internal._rollout_report(): the groups of this database (and the overflow
 * groups, relation NULL, when they counted anything).
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
	LWLockAcquire(shared->lock, LW_SHARED);
	HASH_SEQ_STATUS status;
	hash_seq_init(&status, groups);
	for (ReportGroup *group;
	     (group = static_cast<ReportGroup *>(hash_seq_search(&status))) != nullptr;)
		if (group->key.dbid == MyDatabaseId)
			emit(group);
	for (ReportGroup &group : shared->overflow)
		emit(&group);
	LWLockRelease(shared->lock);
	return static_cast<Datum>(0);
}

/* fencing.rollout_report_reset(): empties the report of the current database. */
FENCING_FUNCTION(fencing_rollout_report_reset)
{
	if (groups == nullptr)
		PG_RETURN_VOID();
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	HASH_SEQ_STATUS status;
	hash_seq_init(&status, groups);
	for (ReportGroup *group;
	     (group = static_cast<ReportGroup *>(hash_seq_search(&status))) != nullptr;)
		if (group->key.dbid == MyDatabaseId)
			(void)hash_search(groups, &group->key, HASH_REMOVE, nullptr);
	for (ReportGroup &group : shared->overflow) {
		pg_atomic_write_u64(&group.count, 0);
		group.first_seen = group.last_seen = 0;
	}
	LWLockRelease(shared->lock);
	PG_RETURN_VOID();
}
