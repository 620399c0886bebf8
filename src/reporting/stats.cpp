/*
 * fencing.stats: a fixed-size hash table in shared memory, one entry per
 * (database, protected relation) and per (database, fenced resource), like
 * pg_stat_statements.  Counters are atomics; the last rejection of an entry
 * is guarded by its spinlock; the table by one LWLock (shared to count,
 * exclusive to add or evict an entry).  When it is full, the entry used
 * longest ago of the database with the most entries makes room.
 *
 * A transaction's accepted writes wait in backend memory (PendingCount) and
 * follow its subtransactions: each counter remembers the deepest open
 * subtransaction that saved its value before changing it, so the guard's
 * increment only compares that level with the current one; the first write
 * of a counter in a subtransaction saves its value (SavedCount), which the
 * subtransaction's abort restores and its commit hands to the parent.
 *
 * A PREPAREd transaction's counts cannot go into its two-phase state (an
 * extension adds nothing there): at PREPARE they move into a second table in
 * shared memory, one slot per possible prepared transaction
 * (max_prepared_transactions), keyed by (database, gid), which a
 * ProcessUtility hook learns from PREPARE TRANSACTION; COMMIT PREPARED adds
 * them to the counters and ROLLBACK PREPARED drops them, in whatever session,
 * once the command has succeeded.  A slot keeps the counts of up to
 * prepared_counters relations and resources: those beyond, or all when no
 * slot is free (only a slot left behind by a COMMIT or ROLLBACK PREPARED that
 * failed after ending the transaction could take one, until its gid is
 * prepared again), are not counted, and PREPARE TRANSACTION says so with a
 * WARNING: never a rolled-back write counted, at worst a committed one
 * missed.  The slots are shared memory, as the counters: a server restart
 * (or a failover: a standby has neither) empties both, and a transaction
 * still prepared then, recovered by PostgreSQL, counts nothing when it
 * commits.
 */
#include "reporting/stats.hpp"
#include "catalog/relation.hpp"
#include "catalog/citus_names.hpp"
#include "base/late_load.hpp"
#include "base/rights.hpp"

extern "C" {
#include "access/twophase.h"
#include "access/xact.h"
#include "catalog/partition.h"
#include "common/hashfn.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/spin.h"
#include "mb/pg_wchar.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
}

namespace fencing
{

bool stats_on = true;
int stats_max = 1000;
int log_rejections = 0; /* 0 off, 1 stale, 2 all */

const config_enum_entry log_rejection_options[] = {
    {"off", 0, false}, {"stale", 1, false}, {"all", 2, false}, {nullptr, 0, false}};

namespace
{

/* What an entry counts: a relation (resource 0) or a resource (relid 0) of a database. */
struct Key {
	Oid dbid;
	Oid relid;
	uint64 resource; /* hash of the resource's name */
};

constexpr int shown = 128; /* bytes kept of a resource name or a key's text */

struct Entry {
	Key key;
	pg_atomic_uint64 accepted;
	pg_atomic_uint64 stale;
	pg_atomic_uint64 missing;
	slock_t mutex; /* protects the fields below */
	TimestampTz used_at;
	TimestampTz reset_at;
	TimestampTz rejected_at; /* 0: no rejection since the reset */
	bool rejected_stale;
	int64 presented;
	int64 stored;
	char resource[shown];
	char rejected_key[shown];
};
FENCING_PLAIN_DATA(Entry);

/* Relations and resources whose counts one prepared transaction keeps. */
constexpr int prepared_counters = 32;

/* One relation's or resource's accepted writes in a prepared transaction. */
struct PreparedCount {
	Key key;
	uint64 accepted;
	char resource[shown];
};

/* The counts of the prepared transaction `gid` of database `dbid` (in_use), until it ends. */
struct PreparedSlot {
	bool in_use;
	Oid dbid;
	char gid[GIDSIZE];
	int count;
	PreparedCount counts[prepared_counters];
};
FENCING_PLAIN_DATA(PreparedSlot);

LWLock *lock = nullptr;
HTAB *entries = nullptr;                /* in shared memory; nullptr when not preloaded */
LWLock *prepared_lock = nullptr;        /* guards the slots; taken before `lock` when both are */
PreparedSlot *prepared_slots = nullptr; /* max_prepared_xacts of them, in shared memory */

} // namespace

/* A pending count: accepted writes of this transaction, not yet in shared memory. */
struct PendingCount {
	Key key;
	uint64 accepted;
	int level; /* the deepest subtransaction that saved `accepted` before changing it; 1: none */
	char resource[shown];
};
FENCING_PLAIN_DATA(PendingCount);

namespace
{

/* What a pending count was when subtransaction `level` first changed it. */
struct SavedCount {
	PendingCount *counter;
	uint64 accepted;
	int counter_level; /* counter->level then */
	int level;
};
FENCING_PLAIN_DATA(SavedCount);

HTAB *pending = nullptr; /* backend memory */

/*
 * The nesting level of the current (sub)transaction (1: the top level),
 * kept by the callbacks so that counting does not ask for it.
 */
int nest_level = 1;

/* Saved counts of the open subtransactions, innermost last (levels never decrease). */
SavedCount *saved = nullptr;
int saved_count = 0;
int saved_room = 0;

/* The gid of PREPARE TRANSACTION, when this transaction is being prepared. */
char preparing_gid[GIDSIZE];
bool preparing_gid_known = false;

long stats_entries()
{
	return stats_max;
}

void attach_entries(void *memory, bool, LWLockPadded *locks)
{
	lock = &locks[0].lock;
	prepared_lock = &locks[1].lock;
	entries = static_cast<HTAB *>(memory);
}

void copy_text(char *to, const char *from)
{
	size_t length = from ? strlen(from) : 0;
	if (length >= shown)
		length = static_cast<size_t>(pg_mbcliplen(from, static_cast<int>(length), shown - 1));
	memcpy(to, from ? from : "", length);
	to[length] = '\0';
}

void init_entry(Entry *entry, const char *resource)
{
	pg_atomic_init_u64(&entry->accepted, 0);
	pg_atomic_init_u64(&entry->stale, 0);
	pg_atomic_init_u64(&entry->missing, 0);
	SpinLockInit(&entry->mutex);
	entry->used_at = entry->reset_at = GetCurrentTimestamp();
	entry->rejected_at = 0;
	entry->rejected_stale = false;
	entry->presented = entry->stored = 0;
	copy_text(entry->resource, resource);
	entry->rejected_key[0] = '\0';
}

/*
 * The entry that makes room when the table is full: the one used longest
 * ago of the database with the most entries, so that the roles of one
 * database, fencing as many resources as they like, evict their own
 * database's counters, not another's.  Two passes over the table, as one
 * eviction always took one; lock held exclusive.
 */
Entry *eviction_victim()
{
	struct Database {
		Oid dbid;
		long entries;
	};
	constexpr int tracked = 64; /* databases told apart; beyond them, the oldest entry of all */
	Database databases[tracked];
	int seen = 0;
	bool all_seen = true;
	HASH_SEQ_STATUS status;
	hash_seq_init(&status, entries);
	for (Entry *e; (e = static_cast<Entry *>(hash_seq_search(&status))) != nullptr;) {
		int d = 0;
		while (d < seen && databases[d].dbid != e->key.dbid)
			d++;
		if (d == seen && seen == tracked) {
			all_seen = false;
			continue;
		}
		if (d == seen)
			databases[seen++] = Database{e->key.dbid, 0};
		databases[d].entries++;
	}
	Oid richest = InvalidOid;
	long most = 0;
	for (int d = 0; all_seen && d < seen; d++)
		if (databases[d].entries > most) {
			richest = databases[d].dbid;
			most = databases[d].entries;
		}
	Entry *oldest = nullptr;
	hash_seq_init(&status, entries);
	for (Entry *e; (e = static_cast<Entry *>(hash_seq_search(&status))) != nullptr;)
		if ((!OidIsValid(richest) || e->key.dbid == richest) &&
		    (oldest == nullptr || e->used_at < oldest->used_at))
			oldest = e;
	return oldest;
}

/* The shared entry of `key`, made (evicting per eviction_victim()) if needed; lock held shared.
 */
Entry *shared_entry(const Key &key, const char *resource)
{
	bool found;
	auto *entry = static_cast<Entry *>(hash_search(entries, &key, HASH_FIND, &found));
	if (entry != nullptr)
		return entry;
	LWLockRelease(lock);
	LWLockAcquire(lock, LW_EXCLUSIVE);
	entry = static_cast<Entry *>(hash_search(entries, &key, HASH_ENTER_NULL, &found));
	if (entry == nullptr) {
		Entry *oldest = eviction_victim();
		hash_search(entries, &oldest->key, HASH_REMOVE, &found);
		entry = static_cast<Entry *>(hash_search(entries, &key, HASH_ENTER, &found));
	}
	if (!found)
		init_entry(entry, resource);
	LWLockRelease(lock);
	LWLockAcquire(lock, LW_SHARED);
	/* Evicted meanwhile by another backend making room: counted nowhere, as pg_stat_statements. */
	return static_cast<Entry *>(hash_search(entries, &key, HASH_FIND, &found));
}

/* Adds a transaction's `accepted` writes to the counter of `key`; `lock` held shared. */
void add_accepted(const Key &key, const char *resource, uint64 accepted, TimestampTz now)
{
	Entry *entry = shared_entry(key, resource);
	if (entry != nullptr) {
		pg_atomic_fetch_add_u64(&entry->accepted, static_cast<int64>(accepted));
		SpinLockAcquire(&entry->mutex);
		entry->used_at = now;
		SpinLockRelease(&entry->mutex);
	}
}

/*
 * At PREPARE TRANSACTION `gid` (nullptr: not seen), the transaction's counts
 * wait in a slot for its COMMIT or ROLLBACK PREPARED.  The transaction is
 * prepared already: nothing here may fail, what finds no room is not counted.
 */
void keep_until_prepared_ends(const char *gid)
{
	HASH_SEQ_STATUS status;
	int written = 0;
	hash_seq_init(&status, pending);
	for (PendingCount *count; (count = static_cast<PendingCount *>(hash_seq_search(&status)));)
		written += count->accepted > 0;
	if (written == 0)
		return;
	PreparedSlot *slot = nullptr;
	if (prepared_slots != nullptr && gid != nullptr) {
		LWLockAcquire(prepared_lock, LW_EXCLUSIVE);
		slot = claim_prepared_slot(prepared_slots, gid);
	}
	int lost = 0;
	hash_seq_init(&status, pending);
	for (PendingCount *count; (count = static_cast<PendingCount *>(hash_seq_search(&status)));) {
		if (count->accepted == 0)
			continue;
		if (slot == nullptr || slot->count == prepared_counters) {
			lost++;
			continue;
		}
		PreparedCount *kept = &slot->counts[slot->count++];
		kept->key = count->key;
		kept->accepted = count->accepted;
		memcpy(kept->resource, count->resource, sizeof kept->resource);
	}
	if (prepared_slots != nullptr && gid != nullptr)
		LWLockRelease(prepared_lock);
	if (lost > 0)
		ereport(WARNING,
		        (errmsg("fencing.stats will not count the writes of prepared transaction \"%s\" "
		                "to %d of the %d relations and resources it wrote to",
		                gid ? gid : "", lost, written),
		         errdetail("Shared memory keeps the counts of up to %d relations and resources "
		                   "for each of max_prepared_transactions (%d) prepared transactions.",
		                   prepared_counters, max_prepared_xacts)));
}

/* COMMIT PREPARED `gid` has succeeded (commit) or ROLLBACK PREPARED: count its writes or not. */
void settle_prepared(const char *gid, bool commit)
{
	if (prepared_slots == nullptr)
		return;
	LWLockAcquire(prepared_lock, LW_EXCLUSIVE);
	for (int i = 0; i < max_prepared_xacts; i++) {
		PreparedSlot *slot = &prepared_slots[i];
		if (!slot->in_use || slot->dbid != MyDatabaseId || strcmp(slot->gid, gid) != 0)
			continue;
		if (commit && slot->count > 0) {
			LWLockAcquire(lock, LW_SHARED);
			TimestampTz now = GetCurrentTimestamp();
			for (int j = 0; j < slot->count; j++)
				add_accepted(slot->counts[j].key, slot->counts[j].resource,
				             slot->counts[j].accepted, now);
			LWLockRelease(lock);
		}
		slot->in_use = false;
	}
	LWLockRelease(prepared_lock);
}

/*
 * At commit, the transaction's accepted writes go to shared memory; at
 * abort, nowhere; at PREPARE TRANSACTION, to a slot until it ends.
 */
void end_of_transaction(XactEvent event)
{
	bool commit = event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT;
	bool prepare = event == XACT_EVENT_PREPARE;
	if (!commit && !prepare && event != XACT_EVENT_ABORT && event != XACT_EVENT_PARALLEL_ABORT)
		return;
	nest_level = 1;
	saved_count = 0;
	bool gid_known = preparing_gid_known;
	preparing_gid_known = false;
	if (pending == nullptr || hash_get_num_entries(pending) == 0)
		return;
	if (prepare)
		keep_until_prepared_ends(gid_known ? preparing_gid : nullptr);
	HASH_SEQ_STATUS status;
	hash_seq_init(&status, pending);
	if (commit)
		LWLockAcquire(lock, LW_SHARED);
	TimestampTz now = GetCurrentTimestamp();
	for (PendingCount *count; (count = static_cast<PendingCount *>(hash_seq_search(&status)));) {
		if (commit && count->accepted > 0)
			add_accepted(count->key, count->resource, count->accepted, now);
		bool found;
		hash_search(pending, &count->key, HASH_REMOVE, &found);
	}
	if (commit)
		LWLockRelease(lock);
}

/*
 * A subtransaction starts: counting compares with its level.  It ends: the
 * counts it saved are put back (abort) or become its parent's (commit).
 */
void end_of_subtransaction(SubXactEvent event)
{
	if (event == SUBXACT_EVENT_START_SUB) {
		nest_level = GetCurrentTransactionNestLevel();
		return;
	}
	if (event != SUBXACT_EVENT_COMMIT_SUB && event != SUBXACT_EVENT_ABORT_SUB)
		return;
	int level = GetCurrentTransactionNestLevel(); /* still the ending one's */
	int first = saved_count;
	while (first > 0 && saved[first - 1].level >= level)
		first--;
	int kept = first;
	for (int i = first; i < saved_count; i++) {
		SavedCount s = saved[i];
		if (event == SUBXACT_EVENT_ABORT_SUB) {
			s.counter->accepted = s.accepted;
			s.counter->level = s.counter_level;
			continue;
		}
		/* Unless the parent saved the counter itself, the value saved here is the parent's. */
		s.counter->level = level - 1;
		if (s.counter_level < level - 1) {
			s.level = level - 1;
			saved[kept++] = s;
		}
	}
	saved_count = kept;
	nest_level = level - 1;
}

/* The first change of `counter` in the current subtransaction: its value is kept for an abort. */
void save_count(PendingCount *counter)
{
	Assert(counter->level < nest_level);
	if (saved_count == saved_room) {
		int room = saved_room == 0 ? 16 : saved_room * 2;
		Size size = sizeof(SavedCount) * static_cast<Size>(room);
		saved = static_cast<SavedCount *>(
		    saved == nullptr ? MemoryContextAlloc(TopMemoryContext, size) : repalloc(saved, size));
		saved_room = room;
	}
	saved[saved_count++] = SavedCount{counter, counter->accepted, counter->level, nest_level};
	counter->level = nest_level;
}

/* Remembers PREPARE TRANSACTION's gid; returns what stats_after_utility() settles. */
StatsUtility before_utility(const PlannedStmt *statement)
{
	const Node *parsed = statement->utilityStmt;
	StatsUtility seen{TRANS_STMT_BEGIN, ""};
	if (parsed != nullptr && IsA(parsed, TransactionStmt)) {
		const auto *transaction = reinterpret_cast<const TransactionStmt *>(parsed);
		seen.kind = transaction->kind;
		if (transaction->gid != nullptr)
			strlcpy(seen.gid, transaction->gid, sizeof seen.gid);
	}
	if (seen.kind == TRANS_STMT_PREPARE) {
		/* Used if the transaction gets prepared when this statement ends. */
		memcpy(preparing_gid, seen.gid, sizeof seen.gid);
		preparing_gid_known = true;
	}
	return seen;
}

PendingCount *pending_count(const Key &key, const char *resource)
{
	if (!stats_on || entries == nullptr)
		return nullptr;
	if (pending == nullptr) {
		HASHCTL ctl;
		ctl.keysize = sizeof(Key);
		ctl.entrysize = sizeof(PendingCount);
		ctl.hcxt = TopMemoryContext;
		pending =
		    hash_create("fencing pending counts", 16, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	bool found;
	auto *count = static_cast<PendingCount *>(hash_search(pending, &key, HASH_ENTER, &found));
	if (!found) {
		count->accepted = 0;
		count->level = 1;
		copy_text(count->resource, resource);
	}
	return count;
}

/* The relation a write to `rel` counts for: the partitioned table its guard was cloned from. */
Oid counted_relation(Relation rel)
{
	TriggerDesc *triggers = rel->trigdesc;
	for (int i = 0; triggers != nullptr && i < triggers->numtriggers; i++) {
		const Trigger *trigger = &triggers->triggers[i];
		if (trigger->tgisclone && strcmp(trigger->tgname, "fencing_guard") == 0) {
			List *ancestors = partition_ancestors(rel);
			if (ancestors != NIL)
				return llast_oid(ancestors);
		}
	}
	return RelationGetRelid(rel);
}

Key relation_key(Relation rel)
{
	Key key;
	memset(&key, 0, sizeof key);
	key.dbid = MyDatabaseId;
	key.relid = counted_relation(rel);
	return key;
}

Key resource_key(const char *resource)
{
	Key key;
	memset(&key, 0, sizeof key);
	key.dbid = MyDatabaseId;
	key.resource = hash_bytes_extended(reinterpret_cast<const unsigned char *>(resource),
	                                   static_cast<int>(strlen(resource)), 0);
	if (key.resource == 0)
		key.resource = 1;
	return key;
}

} // namespace

PendingCount *relation_counter(Relation rel)
{
	return stats_on && entries != nullptr ? pending_count(relation_key(rel), nullptr) : nullptr;
}

PendingCount *resource_counter(const char *resource)
{
	return stats_on && entries != nullptr ? pending_count(resource_key(resource), resource)
	                                      : nullptr;
}

void count_accepted(PendingCount *counter)
{
	if (counter == nullptr)
		return;
	if (unlikely(counter->level != nest_level))
		save_count(counter);
	counter->accepted++;
}

void note_rejection(Relation rel, const char *resource, Rejection kind, const char *key,
                    int64 presented, int64 stored)
{
	bool stale = kind == Rejection::stale;
	bool ceiling = kind == Rejection::ceiling;
	require_configured("fencing.log_rejections");
	if (log_rejections == 2 || (log_rejections == 1 && kind != Rejection::missing)) {
		const char *what = rel ? psprintf("relation %s", relation_display_name(rel))
		                       : psprintf("resource \"%s\"", resource);
		const char *write = stale ? psprintf("stale token " INT64_FORMAT, presented)
		                    : ceiling
		                        ? psprintf("token " INT64_FORMAT " above the max_token", presented)
		                        : "write without a token";
		ereport(LOG, (errmsg("fencing: %s rejected for %s, key %s: %s " INT64_FORMAT, write, what,
		                     key ? key : "-", ceiling ? "max_token" : "stored token", stored),
		              errhidestmt(true)));
	}
	if (ceiling || !stats_on || entries == nullptr)
		return;
	Key k = rel ? relation_key(rel) : resource_key(resource);
	LWLockAcquire(lock, LW_SHARED);
	Entry *entry = shared_entry(k, resource);
	if (entry != nullptr) {
		pg_atomic_fetch_add_u64(stale ? &entry->stale : &entry->missing, 1);
		SpinLockAcquire(&entry->mutex);
		entry->used_at = entry->rejected_at = GetCurrentTimestamp();
		entry->rejected_stale = stale;
		entry->presented = presented;
		entry->stored = stored;
		copy_text(entry->rejected_key, key);
		SpinLockRelease(&entry->mutex);
	}
	LWLockRelease(lock);
}

const SharedArea stats_area = shared_hash("fencing stats", stats_entries, sizeof(Key),
                                          sizeof(Entry), attach_entries, "fencing stats", 2);
const SharedArea stats_prepared_area =
    shared_struct("fencing prepared counts", size_per_prepared_xact<PreparedSlot>,
                  attach_pointer<PreparedSlot, &prepared_slots>);

StatsUtility stats_before_utility(const PlannedStmt *statement)
{
	return before_utility(statement);
}

int keep_dropped_databases(Oid *dbids, int count)
{
	int gone = 0;
	for (int i = 0; i < count; i++)
		if (!SearchSysCacheExists1(DATABASEOID, ObjectIdGetDatum(dbids[i])))
			dbids[gone++] = dbids[i];
	return gone;
}

void stats_after_utility(const StatsUtility &seen)
{
	if (seen.kind == TRANS_STMT_COMMIT_PREPARED || seen.kind == TRANS_STMT_ROLLBACK_PREPARED)
		settle_prepared(seen.gid, seen.kind == TRANS_STMT_COMMIT_PREPARED);
}

void stats_end_of_transaction(XactEvent event)
{
	end_of_transaction(event);
}

void stats_end_of_subtransaction(SubXactEvent event)
{
	end_of_subtransaction(event);
}

namespace
{

/* Calls f(entry) for each entry of the current database, under the table's shared lock. */
template <typename F> void each_entry_of_database(F f)
{
	if (entries == nullptr)
		return;
	LWLockAcquire(lock, LW_SHARED);
	HASH_SEQ_STATUS status;
	hash_seq_init(&status, entries);
	for (Entry *entry; (entry = static_cast<Entry *>(hash_seq_search(&status))) != nullptr;)
		if (entry->key.dbid == MyDatabaseId)
			f(entry);
	LWLockRelease(lock);
}

} // namespace

} // namespace fencing

using namespace fencing;

/* fencing_internal._stats(): the counters of the current database, one row per relation or
 * resource. */
FENCING_FUNCTION(stats)
{
	InitMaterializedSRF(fcinfo, 0);
	auto *rsinfo = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);
	if (entries == nullptr) {
		ereport(WARNING,
		        (errmsg("fencing.stats is empty: the module is not in shared_preload_libraries"),
		         errhint("Add 'fencing' to shared_preload_libraries and restart the server.")));
		return static_cast<Datum>(0);
	}
	/*
	 * A role without USAGE on schema fencing (a pg_monitor member, reading
	 * fencing_monitor.stats) sees no last rejection's kind, key or tokens.
	 */
	bool detail = has_fencing_usage();
	each_entry_of_database([rsinfo, detail](Entry *entry) {
		Datum values[11];
		bool nulls[11] = {false};
		SpinLockAcquire(&entry->mutex);
		Entry copy = *entry;
		SpinLockRelease(&entry->mutex);
		values[0] = ObjectIdGetDatum(copy.key.relid);
		nulls[0] = copy.key.relid == InvalidOid;
		values[1] = CStringGetTextDatum(copy.resource);
		nulls[1] = copy.key.relid != InvalidOid;
		values[2] = Int64GetDatum(pg_atomic_read_u64(&entry->accepted));
		values[3] = Int64GetDatum(pg_atomic_read_u64(&entry->stale));
		values[4] = Int64GetDatum(pg_atomic_read_u64(&entry->missing));
		bool rejected = copy.rejected_at != 0;
		values[5] = TimestampTzGetDatum(copy.rejected_at);
		values[6] = CStringGetTextDatum(copy.rejected_stale ? "stale" : "missing");
		values[7] = CStringGetTextDatum(copy.rejected_key);
		values[8] = Int64GetDatum(copy.presented);
		values[9] = Int64GetDatum(copy.stored);
		for (int i = 5; i <= 9; i++)
			nulls[i] = !rejected;
		nulls[8] = nulls[8] || !copy.rejected_stale;
		nulls[9] = nulls[9] || copy.stored == hidden_token;
		nulls[7] = nulls[7] || copy.rejected_key[0] == '\0';
		for (int i = 6; i <= 9 && !detail; i++)
			nulls[i] = true;
		values[10] = TimestampTzGetDatum(copy.reset_at);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	});
	return static_cast<Datum>(0);
}

/* fencing.stats_reset(): zeroes the counters of the current database. */
FENCING_FUNCTION(stats_reset)
{
	TimestampTz now = GetCurrentTimestamp();
	each_entry_of_database([now](Entry *entry) {
		pg_atomic_write_u64(&entry->accepted, 0);
		pg_atomic_write_u64(&entry->stale, 0);
		pg_atomic_write_u64(&entry->missing, 0);
		SpinLockAcquire(&entry->mutex);
		entry->reset_at = now;
		entry->rejected_at = 0;
		entry->rejected_key[0] = '\0';
		SpinLockRelease(&entry->mutex);
	});
	PG_RETURN_VOID();
}
