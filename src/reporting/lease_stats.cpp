/*
 * Lease counters and lease health: one row per (database, resource prefix)
 * in shared memory, a fixed array of prefix_rows; the prefix of a resource
 * is its name up to and including its first ':' (the whole name without
 * one).  The rows are shared out fairly between the databases that count
 * calls: a database has at most rows_per_database rows of prefixes, and when
 * no row is free, a database that needs one takes it from the database with
 * the most rows, if that one has at least two more than it: its prefix used
 * longest ago is folded into its row "other" (counters summed, histograms
 * merged, maxima kept), so nothing counted is lost, only the prefix it was
 * counted under.  So whatever names the roles of some databases choose,
 * every database that counts keeps about an equal share of the rows (all 33
 * it may have while 7 databases count, 8 rows each with 32), and a prefix
 * that finds no room is counted in its own database's row "other".  The rows
 * of a database that was dropped are freed by the next reader of the views,
 * and by a call for a new prefix that finds the rows full (at most once a
 * second per backend).  Beside them, a
 * set-associative table remembers the last lease of up to tracked_max
 * resources (its token, when it was granted and last renewed, when it
 * expires), from which renewal gaps, hold times and expiries while held
 * are measured: a resource has tracked_ways places of its own (chosen by
 * the hash of its name), and when they are full, a released lease among
 * them, else the one renewed longest ago, makes room (a lease it forgot is
 * still counted, only not measured).  One LWLock guards both; every call
 * counted under it costs a bounded time (a scan of the prefix rows and of
 * tracked_ways places, never of the whole table), and a transaction's calls
 * are counted calls_per_lock at a time, so that a transaction with many
 * calls does not hold up the commits of the others.
 *
 * The lease path only appends a call to a list in backend memory: the
 * calls of a transaction are counted when it commits (a rolled-back grant
 * is no grant, a rolled-back renewal no renewal), dropped when it or the
 * subtransaction they were made in rolls back, and dropped at PREPARE
 * TRANSACTION.  A stale refusal of fence() rolls its transaction back, so
 * it is matched against the leases at once.
 *
 * Durations go into histograms of log2 buckets of milliseconds (bucket 0:
 * below 1 ms, bucket b: from 2^(b-1) to 2^b ms, the last one unbounded); a
 * percentile is the upper bound of its bucket (at most twice the true
 * value), capped by the exact maximum; in the last bucket, the maximum.
 */
#include "reporting/lease_stats.hpp"
#include "reporting/stats.hpp"

extern "C" {
#include "common/hashfn.h"
#include "datatype/timestamp.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "port/pg_bitutils.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
}

#include <cmath>

namespace fencing
{

namespace
{

constexpr int prefix_length = 64;     /* bytes kept of a prefix, with the terminator */
constexpr int prefix_rows = 256;      /* rows for the whole server */
constexpr int rows_per_database = 32; /* rows of prefixes one database may have, besides "other" */
constexpr int64 reclaim_every_us = 1000000; /* a backend looks for dropped databases this often */
constexpr const char *other_name = "other";
constexpr int tracked_ways = 8;                 /* places a resource may take */
constexpr int tracked_max = 512 * tracked_ways; /* leases remembered */
constexpr int calls_per_lock = 256;             /* calls counted per hold of the lock at commit */
constexpr int buckets = 32;
constexpr int max_calls = 65536; /* calls of one transaction counted; the rest are not */

struct Histogram {
	uint64 counts[buckets];
	int64 max_us;
};

/* The counters of one resource prefix of one database. */
struct PrefixRow {
	bool in_use;
	bool other;
	Oid dbid;
	char prefix[prefix_length];
	uint64 grants;
	uint64 refused;
	uint64 waits;
	int64 wait_us;
	int64 wait_max_us;
	uint64 renewals;
	uint64 failed_renewals;
	uint64 expired;
	uint64 releases;
	uint64 failed_releases;
	uint64 late_renewals;
	uint64 expired_then_stale;
	int64 max_overrun_us;
	int64 max_late_gap_us;
	Histogram gaps;
	Histogram holds;
	TimestampTz reset_at;
	TimestampTz used_at; /* its last counted call: the row used longest ago is given away first */
};
FENCING_PLAIN_DATA(PrefixRow);

struct TrackedKey {
	Oid dbid;
	uint64 resource; /* hash of the name */
};

/* The last lease of a resource, as the committed calls showed it. */
struct Tracked {
	bool in_use;
	TrackedKey key;
	int64 token;
	TimestampTz granted_at;
	TimestampTz last_at; /* grant or last renewal */
	TimestampTz expires_at;
	bool released;
	bool expiry_counted;
	int64 expired_token;         /* the lease before, if it expired while held; else 0 */
	TimestampTz expired_at;      /* ... its expiry */
	TimestampTz expired_last_at; /* ... its grant or last renewal */
	bool stale_counted;          /* a stale refusal of the expired lease was counted */
};
FENCING_PLAIN_DATA(Tracked);

struct Shared {
	bool full; /* a row was wanted and none was free */
	PrefixRow rows[prefix_rows];
	Tracked leases[tracked_max]; /* tracked_ways places per set, tracked_max / tracked_ways sets */
};
FENCING_PLAIN_DATA(Shared);

LWLock *lock = nullptr;
Shared *shared = nullptr; /* nullptr when not preloaded */

enum class Call : uint8 { grant, refused, renewed, renew_failed, released, release_failed };

/* One call of this transaction, counted at commit. */
struct PendingCall {
	Call call;
	bool waited;
	int level; /* the (sub)transaction nest level that made it */
	uint64 resource;
	int64 token;
	TimestampTz at;
	int64 ttl_us;
	int64 waited_us;
	char prefix[prefix_length];
};
FENCING_PLAIN_DATA(PendingCall);

PendingCall *calls = nullptr; /* TopMemoryContext */
TimestampTz last_reclaim = 0; /* this backend's last look for the rows of dropped databases */
int call_count = 0;
int call_room = 0;

void attach_shared(void *memory, bool, LWLockPadded *locks)
{
	lock = &locks[0].lock;
	shared = static_cast<Shared *>(memory);
}

int64 interval_us(Datum ttl)
{
	const Interval *span = DatumGetIntervalP(ttl);
	return span->time + (int64{span->month} * DAYS_PER_MONTH + span->day) * USECS_PER_DAY;
}

uint64 resource_hash(const char *resource)
{
	return hash_bytes_extended(reinterpret_cast<const unsigned char *>(resource),
	                           static_cast<int>(strlen(resource)), 0);
}

/* The prefix of `resource`: up to and including its first ':', at most prefix_length - 1 bytes. */
void cut_prefix(const char *resource, char *prefix)
{
	const char *colon = strchr(resource, ':');
	size_t kept = colon != nullptr ? static_cast<size_t>(colon - resource) + 1 : strlen(resource);
	if (kept >= prefix_length)
		kept =
		    static_cast<size_t>(pg_mbcliplen(resource, static_cast<int>(kept), prefix_length - 1));
	memcpy(prefix, resource, kept);
	prefix[kept] = '\0';
}

/*
 * Frees the rows, and the remembered leases, of databases that no longer
 * exist: a database's rows are otherwise freed only by its own
 * lease_stats_reset(), which a dropped database never calls.  The catalog
 * is read without the lock held.
 */
void reclaim_dropped_databases()
{
	Oid seen[prefix_rows];
	int count = 0;
	LWLockAcquire(lock, LW_SHARED);
	for (const PrefixRow &row : shared->rows) {
		if (!row.in_use || row.dbid == MyDatabaseId)
			continue;
		int i = 0;
		while (i < count && seen[i] != row.dbid)
			i++;
		if (i == count)
			seen[count++] = row.dbid;
	}
	LWLockRelease(lock);
	int gone = keep_dropped_databases(seen, count);
	LWLockAcquire(lock, LW_EXCLUSIVE);
	for (int i = 0; i < gone; i++) {
		for (PrefixRow &row : shared->rows)
			if (row.in_use && row.dbid == seen[i])
				row.in_use = false;
		for (Tracked &lease : shared->leases)
			if (lease.in_use && lease.key.dbid == seen[i])
				lease.in_use = false;
	}
	if (gone > 0)
		shared->full = false;
	LWLockRelease(lock);
}

/* Has this database no row for `prefix` yet (read under the shared lock)? */
bool needs_row(const char *prefix)
{
	bool found = false;
	LWLockAcquire(lock, LW_SHARED);
	for (const PrefixRow &row : shared->rows)
		if (row.in_use && row.dbid == MyDatabaseId && !row.other && strcmp(row.prefix, prefix) == 0)
			found = true;
	LWLockRelease(lock);
	return !found;
}

void record(Call call, const char *resource, int64 token, int64 ttl_us, bool waited,
            int64 waited_us)
{
	if (!stats_on || shared == nullptr || call_count >= max_calls)
		return;
	char prefix[prefix_length];
	cut_prefix(resource, prefix);
	if (shared->full && needs_row(prefix) &&
	    GetCurrentTimestamp() - last_reclaim >= reclaim_every_us) {
		last_reclaim = GetCurrentTimestamp();
		reclaim_dropped_databases();
	}
	if (call_count == call_room) {
		int room = call_room == 0 ? 16 : call_room * 2;
		Size size = sizeof(PendingCall) * static_cast<Size>(room);
		calls = static_cast<PendingCall *>(
		    calls == nullptr ? MemoryContextAlloc(TopMemoryContext, size) : repalloc(calls, size));
		call_room = room;
	}
	PendingCall *c = &calls[call_count++];
	c->call = call;
	c->waited = waited;
	c->level = GetCurrentTransactionNestLevel();
	c->resource = resource_hash(resource);
	memcpy(c->prefix, prefix, sizeof c->prefix);
	c->token = token;
	c->at = GetCurrentTimestamp();
	c->ttl_us = ttl_us;
	c->waited_us = waited_us;
}

void init_row(PrefixRow *row, Oid dbid, const char *prefix, bool other)
{
	memset(row, 0, sizeof *row);
	row->in_use = true;
	row->other = other;
	row->dbid = dbid;
	strlcpy(row->prefix, prefix, sizeof row->prefix);
	row->reset_at = GetCurrentTimestamp();
}

/* Adds the counts of `from` to `into` (the "other" row of the same database). */
void fold_row(PrefixRow *into, const PrefixRow &from)
{
	into->grants += from.grants;
	into->refused += from.refused;
	into->waits += from.waits;
	into->wait_us += from.wait_us;
	into->wait_max_us = Max(into->wait_max_us, from.wait_max_us);
	into->renewals += from.renewals;
	into->failed_renewals += from.failed_renewals;
	into->expired += from.expired;
	into->releases += from.releases;
	into->failed_releases += from.failed_releases;
	into->late_renewals += from.late_renewals;
	into->expired_then_stale += from.expired_then_stale;
	into->max_overrun_us = Max(into->max_overrun_us, from.max_overrun_us);
	into->max_late_gap_us = Max(into->max_late_gap_us, from.max_late_gap_us);
	Histogram *histograms[2] = {&into->gaps, &into->holds};
	const Histogram *added[2] = {&from.gaps, &from.holds};
	for (int h = 0; h < 2; h++) {
		for (int b = 0; b < buckets; b++)
			histograms[h]->counts[b] += added[h]->counts[b];
		histograms[h]->max_us = Max(histograms[h]->max_us, added[h]->max_us);
	}
	into->used_at = Max(into->used_at, from.used_at);
}

/* The rows of database `dbid`, and its "other" row (nullptr if none); lock held. */
int rows_of(Oid dbid, PrefixRow **other)
{
	int count = 0;
	*other = nullptr;
	for (PrefixRow &row : shared->rows)
		if (row.in_use && row.dbid == dbid) {
			count++;
			if (row.other)
				*other = &row;
		}
	return count;
}

/* The prefix row of database `dbid` used longest ago, or nullptr; lock held. */
PrefixRow *oldest_prefix_row(Oid dbid)
{
	PrefixRow *oldest = nullptr;
	for (PrefixRow &row : shared->rows)
		if (row.in_use && row.dbid == dbid && !row.other &&
		    (oldest == nullptr || row.used_at < oldest->used_at))
			oldest = &row;
	return oldest;
}

/*
 * Folds the prefix row of `dbid` used longest ago into its "other" row
 * (which that prefix row becomes, if it has none) and returns the row freed,
 * or nullptr when nothing was freed; lock held exclusive.
 */
PrefixRow *fold_oldest(Oid dbid)
{
	PrefixRow *other;
	(void)rows_of(dbid, &other);
	PrefixRow *oldest = oldest_prefix_row(dbid);
	if (oldest != nullptr && other == nullptr) {
		oldest->other = true;
		strlcpy(oldest->prefix, other_name, sizeof oldest->prefix);
		other = oldest;
		oldest = oldest_prefix_row(dbid);
	}
	if (oldest == nullptr)
		return nullptr;
	fold_row(other, *oldest);
	oldest->in_use = false;
	return oldest;
}

/*
 * A row for database `dbid`, which has `count` rows: a free one, else one
 * taken from the database with the most rows if it has at least two more
 * (ties: the one whose prefix rows were used longest ago); nullptr if none.
 * One pass over the rows, and one over the databases seen for each.  Lock
 * held exclusive.
 */
PrefixRow *room_for(Oid dbid, int count)
{
	struct Database {
		Oid dbid;
		int rows;
		TimestampTz oldest; /* of its prefix rows */
	};
	Database databases[prefix_rows];
	int seen = 0;
	for (PrefixRow &row : shared->rows) {
		if (!row.in_use)
			return &row;
		if (row.dbid == dbid)
			continue;
		int d = 0;
		while (d < seen && databases[d].dbid != row.dbid)
			d++;
		if (d == seen)
			databases[seen++] = Database{row.dbid, 0, DT_NOEND};
		databases[d].rows++;
		if (!row.other)
			databases[d].oldest = Min(databases[d].oldest, row.used_at);
	}
	shared->full = true;
	const Database *richest = nullptr;
	for (int d = 0; d < seen; d++)
		if (richest == nullptr || databases[d].rows > richest->rows ||
		    (databases[d].rows == richest->rows && databases[d].oldest < richest->oldest))
			richest = &databases[d];
	if (richest == nullptr || richest->rows < count + 2)
		return nullptr;
	return fold_oldest(richest->dbid);
}

/*
 * The row of (dbid, prefix), made if there is room, else the database's
 * "other" (made if there is room for it; else the database's own prefix
 * used longest ago becomes "other"); nullptr when the database has no row and
 * finds none.  Lock held exclusive.
 */
PrefixRow *prefix_row(Oid dbid, const char *prefix)
{
	/* A resource named "other" counts in that row: two rows of one name would be one series twice.
	 */
	bool wants_other = strcmp(prefix, other_name) == 0;
	int prefixes = 0;
	PrefixRow *other = nullptr;
	for (PrefixRow &row : shared->rows) {
		if (!row.in_use || row.dbid != dbid)
			continue;
		if (row.other)
			other = &row;
		else if (!wants_other && strcmp(row.prefix, prefix) == 0)
			return &row;
		else
			prefixes++;
	}
	int count = prefixes + (other != nullptr ? 1 : 0);
	if (!wants_other && prefixes < rows_per_database) {
		PrefixRow *room = room_for(dbid, count);
		if (room != nullptr) {
			init_row(room, dbid, prefix, false);
			return room;
		}
	}
	if (other != nullptr)
		return other;
	PrefixRow *room = room_for(dbid, count);
	if (room != nullptr) {
		init_row(room, dbid, other_name, true);
		return room;
	}
	/* No room anywhere: this database's own oldest prefix becomes its "other". */
	PrefixRow *oldest = oldest_prefix_row(dbid);
	if (oldest != nullptr) {
		oldest->other = true;
		strlcpy(oldest->prefix, other_name, sizeof oldest->prefix);
	}
	return oldest;
}

void add_duration(Histogram *histogram, int64 us)
{
	if (us < 0)
		us = 0;
	uint64 ms = static_cast<uint64>(us / 1000);
	int bucket = ms == 0 ? 0 : pg_leftmost_one_pos64(ms) + 1;
	histogram->counts[Min(bucket, buckets - 1)]++;
	histogram->max_us = Max(histogram->max_us, us);
}

/*
 * The remembered lease of a resource; made (taking the place of another of
 * its set if they are all used) when `make`.  Looks at tracked_ways places.
 */
Tracked *tracked_lease(uint64 resource, bool make)
{
	Tracked *set = &shared->leases[(resource % (tracked_max / tracked_ways)) * tracked_ways];
	Tracked *victim = nullptr;
	for (int way = 0; way < tracked_ways; way++) {
		Tracked *t = &set[way];
		if (t->in_use && t->key.dbid == MyDatabaseId && t->key.resource == resource)
			return t;
		if (victim == nullptr || !t->in_use ||
		    (victim->in_use && ((t->released && !victim->released) ||
		                        (t->released == victim->released && t->last_at < victim->last_at))))
			victim = t;
	}
	if (!make)
		return nullptr;
	memset(victim, 0, sizeof *victim);
	victim->in_use = true;
	victim->key.dbid = MyDatabaseId;
	victim->key.resource = resource;
	victim->released = true;
	return victim;
}

/*
 * A renew() or release() by the holder of `token` failed.  The lease it
 * names is the resource's last one and was not released: it is no longer
 * live, so it expired while held (judged by what the server decided, not by
 * comparing clocks here, which lag the server's by the call's duration).
 */
void note_failed_call(PrefixRow *row, Tracked *lease, const PendingCall &c)
{
	if (lease == nullptr)
		return;
	if (lease->token == c.token && !lease->released) {
		if (!lease->expiry_counted) {
			row->expired++;
			add_duration(&row->holds, lease->expires_at - lease->granted_at);
			lease->expiry_counted = true;
		}
		row->max_overrun_us = Max(row->max_overrun_us, Max(c.at - lease->expires_at, 0));
		row->max_late_gap_us = Max(row->max_late_gap_us, c.at - lease->last_at);
	} else if (lease->expired_token != 0 && lease->expired_token == c.token) {
		/* Taken over already (and counted then): its holder came back now. */
		row->max_overrun_us = Max(row->max_overrun_us, Max(c.at - lease->expired_at, 0));
		row->max_late_gap_us = Max(row->max_late_gap_us, c.at - lease->expired_last_at);
	}
}

/* Counts one committed call; lock held exclusive. */
void count_call(const PendingCall &c)
{
	PrefixRow *row = prefix_row(MyDatabaseId, c.prefix);
	PrefixRow ignored;
	memset(&ignored, 0, sizeof ignored);
	if (row == nullptr)
		row = &ignored; /* no room: measured into a row nobody reads */
	row->used_at = Max(row->used_at, c.at);
	Tracked *lease = tracked_lease(c.resource, c.call == Call::grant);
	if (c.waited && (c.call == Call::grant || c.call == Call::refused)) {
		row->waits++;
		row->wait_us += c.waited_us;
		row->wait_max_us = Max(row->wait_max_us, c.waited_us);
	}
	switch (c.call) {
	case Call::grant: {
		row->grants++;
		/* The server granted: the last lease, not released, was no longer live. */
		bool expired = lease->token != 0 && lease->token != c.token && !lease->released;
		if (expired && !lease->expiry_counted) {
			row->expired++;
			add_duration(&row->holds, lease->expires_at - lease->granted_at);
		}
		lease->expired_token = expired ? lease->token : 0;
		lease->expired_at = lease->expires_at;
		lease->expired_last_at = lease->last_at;
		lease->stale_counted = false;
		lease->token = c.token;
		lease->granted_at = lease->last_at = c.at;
		lease->expires_at = c.at + c.ttl_us;
		lease->released = false;
		lease->expiry_counted = false;
		break;
	}
	case Call::refused:
		row->refused++;
		break;
	case Call::renewed:
		row->renewals++;
		if (lease != nullptr && lease->token == c.token && !lease->released) {
			add_duration(&row->gaps, c.at - lease->last_at);
			if ((lease->expires_at - c.at) * 10 < lease->expires_at - lease->last_at)
				row->late_renewals++;
			lease->last_at = c.at;
			lease->expires_at = c.at + c.ttl_us;
		}
		break;
	case Call::renew_failed:
		row->failed_renewals++;
		note_failed_call(row, lease, c);
		break;
	case Call::released:
		row->releases++;
		if (lease != nullptr && lease->token == c.token && !lease->released) {
			/* The stretch up to the release is one the TTL had to cover too. */
			add_duration(&row->gaps, c.at - lease->last_at);
			add_duration(&row->holds, c.at - lease->granted_at);
			lease->released = true;
		}
		break;
	case Call::release_failed:
		row->failed_releases++;
		note_failed_call(row, lease, c);
		break;
	}
}

} // namespace

void count_acquire(const char *resource, int64 token, Datum ttl, bool waited, TimestampTz started)
{
	if (!stats_on || shared == nullptr)
		return;
	record(token != 0 ? Call::grant : Call::refused, resource, token, interval_us(ttl), waited,
	       waited ? GetCurrentTimestamp() - started : 0);
}

void count_renewal(const char *resource, int64 token, Datum ttl, bool renewed)
{
	if (!stats_on || shared == nullptr)
		return;
	record(renewed ? Call::renewed : Call::renew_failed, resource, token, interval_us(ttl), false,
	       0);
}

void count_release(const char *resource, int64 token, bool released)
{
	record(released ? Call::released : Call::release_failed, resource, token, 0, false, 0);
}

void count_stale_lease_token(const char *resource, int64 presented)
{
	if (!stats_on || shared == nullptr)
		return;
	uint64 hash = resource_hash(resource);
	LWLockAcquire(lock, LW_EXCLUSIVE);
	Tracked *lease = tracked_lease(hash, false);
	if (lease != nullptr && !lease->stale_counted &&
	    ((lease->expired_token != 0 && lease->expired_token == presented) ||
	     (lease->token == presented && lease->expiry_counted))) {
		char prefix[prefix_length];
		cut_prefix(resource, prefix);
		PrefixRow *row = prefix_row(MyDatabaseId, prefix);
		if (row != nullptr) {
			row->expired_then_stale++;
			row->used_at = Max(row->used_at, GetCurrentTimestamp());
		}
		lease->stale_counted = true;
	}
	LWLockRelease(lock);
}

const SharedArea lease_stats_area =
    shared_struct("fencing lease stats", size_of<Shared>, attach_shared, "fencing lease stats", 1);

void lease_stats_end_of_transaction(XactEvent event)
{
	bool commit = event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT;
	if (!commit && event != XACT_EVENT_PREPARE && event != XACT_EVENT_ABORT &&
	    event != XACT_EVENT_PARALLEL_ABORT)
		return;
	if (call_count == 0)
		return;
	if (commit && shared != nullptr)
		for (int first = 0; first < call_count; first += calls_per_lock) {
			LWLockAcquire(lock, LW_EXCLUSIVE);
			for (int i = first; i < Min(call_count, first + calls_per_lock); i++)
				count_call(calls[i]);
			LWLockRelease(lock);
		}
	call_count = 0;
}

void lease_stats_end_of_subtransaction(SubXactEvent event)
{
	if (call_count == 0 || (event != SUBXACT_EVENT_COMMIT_SUB && event != SUBXACT_EVENT_ABORT_SUB))
		return;
	/* The calls made since the subtransaction began are the last ones, of its level or deeper. */
	int level = GetCurrentTransactionNestLevel();
	int first = call_count;
	while (first > 0 && calls[first - 1].level >= level)
		first--;
	if (event == SUBXACT_EVENT_ABORT_SUB)
		call_count = first;
	else
		for (int i = first; i < call_count; i++)
			calls[i].level = level - 1;
}

namespace
{

Datum interval_datum(int64 us)
{
	auto *span = static_cast<Interval *>(palloc0(sizeof(Interval)));
	span->time = us;
	return IntervalPGetDatum(span);
}

/* The upper bound of the bucket that holds the `fraction` percentile, at most the maximum. */
int64 percentile_us(const Histogram &histogram, double fraction)
{
	uint64 total = 0;
	for (uint64 count : histogram.counts)
		total += count;
	if (total == 0)
		return -1;
	auto rank = static_cast<uint64>(ceil(fraction * static_cast<double>(total)));
	uint64 seen = 0;
	int bucket = 0;
	for (; bucket < buckets - 1; bucket++) {
		seen += histogram.counts[bucket];
		if (seen >= rank)
			break;
	}
	/* The last bucket has no upper bound (2^31 ms is under 25 days; a TTL may be 366). */
	if (bucket == buckets - 1)
		return histogram.max_us;
	int64 bound = (int64{1} << bucket) * 1000;
	return Min(bound, histogram.max_us);
}

uint64 samples(const Histogram &histogram)
{
	uint64 total = 0;
	for (uint64 count : histogram.counts)
		total += count;
	return total;
}

/* Copies the rows of the current database (under the shared lock) into palloc'd memory. */
int copy_rows(PrefixRow **rows)
{
	*rows = static_cast<PrefixRow *>(palloc(sizeof(PrefixRow) * prefix_rows));
	int n = 0;
	LWLockAcquire(lock, LW_SHARED);
	for (const PrefixRow &row : shared->rows)
		if (row.in_use && row.dbid == MyDatabaseId)
			(*rows)[n++] = row;
	LWLockRelease(lock);
	return n;
}

ReturnSetInfo *rows_or_warning(FunctionCallInfo fcinfo, const char *view)
{
	InitMaterializedSRF(fcinfo, 0);
	if (shared == nullptr)
		ereport(WARNING,
		        (errmsg("%s is empty: the module is not in shared_preload_libraries", view),
		         errhint("Add 'fencing' to shared_preload_libraries and restart the server.")));
	return reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);
}

/* One result row per prefix of the current database, from `row_of` (fills values and nulls). */
template <int Columns, typename RowOf>
Datum return_prefix_rows(FunctionCallInfo fcinfo, const char *view, RowOf row_of)
{
	ReturnSetInfo *rsinfo = rows_or_warning(fcinfo, view);
	if (shared == nullptr)
		return static_cast<Datum>(0);
	reclaim_dropped_databases();
	PrefixRow *rows;
	int n = copy_rows(&rows);
	for (int i = 0; i < n; i++) {
		Datum values[Columns];
		bool nulls[Columns] = {false};
		row_of(rows[i], values, nulls);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return static_cast<Datum>(0);
}

} // namespace

} // namespace fencing

using namespace fencing;

/* fencing_internal._lease_stats(): the lease counters of the current database, one row per prefix.
 */
FENCING_FUNCTION(fencing_lease_stats)
{
	return return_prefix_rows<12>(
	    fcinfo, "fencing.lease_stats", [](const PrefixRow &row, Datum *values, bool *) {
		    values[0] = CStringGetTextDatum(row.prefix);
		    values[1] = Int64GetDatum(static_cast<int64>(row.grants));
		    values[2] = Int64GetDatum(static_cast<int64>(row.refused));
		    values[3] = Int64GetDatum(static_cast<int64>(row.waits));
		    values[4] = interval_datum(row.wait_us);
		    values[5] = interval_datum(row.wait_max_us);
		    values[6] = Int64GetDatum(static_cast<int64>(row.renewals));
		    values[7] = Int64GetDatum(static_cast<int64>(row.failed_renewals));
		    values[8] = Int64GetDatum(static_cast<int64>(row.expired));
		    values[9] = Int64GetDatum(static_cast<int64>(row.releases));
		    values[10] = Int64GetDatum(static_cast<int64>(row.failed_releases));
		    values[11] = TimestampTzGetDatum(row.reset_at);
	    });
}

/*
 * fencing_internal._lease_health(): renewal gaps (from a grant or renewal to the next
 * renewal or release) and hold times per prefix, late
 * renewals, expiries while held and the stale refusals that followed them,
 * and the suggested TTL: the larger of 3 x the p99 renewal gap and 2 x the
 * longest gap of a holder that came back to a lease expired while held.
 */
FENCING_FUNCTION(fencing_lease_health)
{
	return return_prefix_rows<15>(
	    fcinfo, "fencing.lease_health", [](const PrefixRow &row, Datum *values, bool *nulls) {
		    values[0] = CStringGetTextDatum(row.prefix);
		    const Histogram *histograms[2] = {&row.gaps, &row.holds};
		    for (int h = 0; h < 2; h++) {
			    int column = 1 + 4 * h;
			    uint64 count = samples(*histograms[h]);
			    values[column] = Int64GetDatum(static_cast<int64>(count));
			    values[column + 1] = interval_datum(percentile_us(*histograms[h], 0.5));
			    values[column + 2] = interval_datum(percentile_us(*histograms[h], 0.99));
			    values[column + 3] = interval_datum(histograms[h]->max_us);
			    for (int c = column + 1; c <= column + 3; c++)
				    nulls[c] = count == 0;
		    }
		    values[9] = Int64GetDatum(static_cast<int64>(row.late_renewals));
		    values[10] = Int64GetDatum(static_cast<int64>(row.expired));
		    values[11] = Int64GetDatum(static_cast<int64>(row.expired_then_stale));
		    values[12] = interval_datum(row.max_overrun_us);
		    values[13] = interval_datum(row.max_late_gap_us);
		    nulls[12] = nulls[13] = row.max_late_gap_us == 0;
		    int64 gap_p99 = percentile_us(row.gaps, 0.99);
		    int64 suggested = Max(gap_p99 > 0 ? 3 * gap_p99 : 0, 2 * row.max_late_gap_us);
		    values[14] = interval_datum(suggested);
		    nulls[14] = suggested == 0;
	    });
}

/* fencing.lease_stats_reset(): the lease counters and health of the current database start anew. */
FENCING_FUNCTION(fencing_lease_stats_reset)
{
	if (shared != nullptr) {
		LWLockAcquire(lock, LW_EXCLUSIVE);
		for (PrefixRow &row : shared->rows)
			if (row.in_use && row.dbid == MyDatabaseId)
				row.in_use = false;
		shared->full = false;
		LWLockRelease(lock);
		reclaim_dropped_databases();
	}
	PG_RETURN_VOID();
}
