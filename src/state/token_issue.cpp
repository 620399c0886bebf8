/*
 * Tokens are ordered by leadership first, then by the clock:
 *
 *     token = (512 + generation) * 2^42 + low          (always below 2^53)
 *
 * The generation grows with every promotion: it is the server's WAL timeline
 * plus a base fixed per system (per system identifier), so a promoted
 * standby, whose timeline is above every timeline it followed, issues only
 * tokens above every token its old primary can still issue - even while
 * that one keeps running (a network partition, a stalled HA agent), and
 * whatever the two clocks say.  A system seen for the first time (a restore
 * from a dump, pg_upgrade) starts above every generation recorded in
 * fencing.token_timelines, which is dumped with the data.
 *
 * Within a generation, low follows the server's clock in milliseconds since
 * 1970, as a hybrid logical clock does: max(previous + 1, now), plus
 * fencing.failover_margin on the first grant of a (system, timeline) that
 * has not issued tokens before in this database (its history sequence
 * says so).  That covers a dump restored into the same cluster, which has
 * no new timeline; a file-level copy restored on the same system has the
 * same history and relies on the clock alone (docs/leases.md).
 *
 * Tokens are never issued twice: the sequence fencing.token_seq always holds
 * a bound at or above every token handed out (a sequence does not roll back
 * with the transaction that set it), and that bound is flushed and confirmed
 * by the synchronous standbys before any token below it reaches a caller.
 * With shared_preload_libraries, a grant reserves a window above the token
 * it takes (one WAL record for many grants) and later grants are handed out
 * from shared memory until the window is used up; after a crash, grants
 * start above it.  Without, every grant sets the bound itself.
 */
#include "state/token_issue.hpp"
#include "base/rights.hpp"
#include "base/compat.hpp"
#include "base/late_load.hpp"
#include "legacy/token_issue_0_2_0.hpp"
#include "base/spi.hpp"
#include "base/token_compare.hpp"

#include <algorithm>

extern "C" {
#include "access/relation.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "catalog/namespace.h"
#include "commands/sequence.h"
#include "miscadmin.h"
#include "replication/syncrep.h"
#include "replication/walsender.h"
#include "replication/walsender_private.h"
#include "storage/bufmgr.h"
#include "storage/ipc.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "storage/lwlock.h"
#include "storage/spin.h"
#include "utils/fmgrprotos.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
#include "common/hashfn.h"
#include "lib/stringinfo.h"
}

namespace fencing
{

namespace
{

/* field4 of our advisory lock tag: "FN", distinct from pg_advisory_lock's 1 and 2. */
constexpr uint16 lock_class = 0x464E;

/*
 * The layout of a token.  Generations start at 512, above every token of
 * 0.2.0 (microseconds since 1970, below 2^51 until 2041); 1535 of them fit
 * below 2^53, and 2^42 milliseconds last until 2109.
 */
constexpr int low_bits = 42;
constexpr int64 first_generation_prefix = 512;
constexpr int64 max_generation = (int64{1} << (53 - low_bits)) - 1 - first_generation_prefix;
constexpr int64 max_low = (int64{1} << low_bits) - 1;

/* The tokens acquire() issues stay below 2^53, exact in a double (JavaScript, JSON). */
constexpr int64 max_issued_token = (int64{1} << 53) - 1;

/* The first token of a generation (generations are 1 to max_generation + 1). */
int64 generation_start(int64 generation)
{
	int64 prefix = first_generation_prefix + std::clamp(generation, int64{0}, max_generation + 1);
	return prefix * (int64{1} << low_bits);
}

/*
 * How far a grant reserves ahead, in tokens (milliseconds of clock while
 * grants are fewer than one per millisecond): after a crash, tokens go on at
 * most this far ahead of the clock.
 */
constexpr int64 window = 1000;

Oid token_sequence()
{
	Oid relid = get_relname_relid("token_seq", get_namespace_oid("fencing", false));
	if (!OidIsValid(relid))
		elog(ERROR, "fencing: sequence fencing.token_seq is missing");
	return relid;
}

/* The LSN of the sequence's last WAL record, which covers every value it was set to. */
XLogRecPtr sequence_lsn(Oid sequence)
{
	Relation rel = relation_open(sequence, AccessShareLock);
	Buffer buffer = ReadBuffer(rel, 0);
	LockBuffer(buffer, BUFFER_LOCK_SHARE);
	XLogRecPtr lsn = PageGetLSN(BufferGetPage(buffer));
	UnlockReleaseBuffer(buffer);
	relation_close(rel, AccessShareLock);
	return lsn;
}

/*
 * Has every synchronous standby flushed `lsn` (or is there none to wait for)?
 * Until the checkpointer has read synchronous_standby_names, go by this
 * backend's own value of it, as SyncRepWaitForLSN() does.  With
 * `any_session`, whatever this session's synchronous_commit says (a lease
 * change of another session may rely on it).
 */
bool standbys_have(XLogRecPtr lsn, bool any_session = false)
{
	if (any_session ? max_wal_senders == 0 : !SyncRepRequested())
		return true;
	LWLockAcquire(SyncRepLock, LW_SHARED);
	bits8 status = WalSndCtl->sync_standbys_status;
	bool defined = (status & SYNC_STANDBY_INIT)
	                   ? (status & SYNC_STANDBY_DEFINED) != 0
	                   : SyncRepStandbyNames != nullptr && SyncRepStandbyNames[0] != '\0';
	bool flushed = WalSndCtl->lsn[SYNC_REP_WAIT_FLUSH] >= lsn;
	LWLockRelease(SyncRepLock);
	return !defined || flushed;
}

} // namespace

int failover_margin = 10000;
const struct config_enum_entry confirmation_options[] = {
    {"off", confirm_off, false},
    {"standby", confirm_standby, false},
    {"synchronous", confirm_synchronous, false},
    {nullptr, 0, false}};
int grant_confirmation = confirm_off;
int standby_reply_timeout = 5000;

namespace
{

/*
 * The tokens granted in this transaction, for the warning at commit, each
 * with the subtransaction level it was granted in (a rolled-back savepoint
 * takes its grants with it).
 */
struct Grant {
	int64 token;
	int level;
};
FENCING_PLAIN_DATA(Grant);
constexpr int max_grants_named = 8;
Grant grants[max_grants_named];
int ngrants = 0;        /* how many of grants[] are used */
int64 grants_total = 0; /* grants of this transaction, also beyond grants[] */

/* A timestamp in microseconds since 1970 (PostgreSQL's epoch is 2000). */
int64 unix_microseconds(TimestampTz at)
{
	constexpr int64 unix_epoch_offset =
	    int64{POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE} * SECS_PER_DAY * USECS_PER_SEC;
	return saturating_add(at, unix_epoch_offset);
}

/* Now in milliseconds since 1970. */
int64 clock_milliseconds()
{
	return clock_token() / 1000;
}

/*
 * The history tokens were last issued on: a key of (system identifier,
 * timeline) kept in the sequence fencing.token_history.  A sequence, so that
 * setting it is neither undone by a rollback nor hidden from other sessions
 * by an open transaction: the first grant on a new history applies the
 * margin, and every later grant, in any session, sees that it was applied.
 * fencing.token_timelines keeps the readable record.
 */
int64 history_key()
{
	uint64 system = GetSystemIdentifier();
	uint32 timeline = GetWALInsertionTimeLine();
	char bytes[sizeof system + sizeof timeline];
	memcpy(bytes, &system, sizeof system);
	memcpy(bytes + sizeof system, &timeline, sizeof timeline);
	/* A positive bigint, never 1 (the sequence's value before the first grant). */
	uint64 hash = DatumGetUInt64(
	    hash_any_extended(reinterpret_cast<unsigned char *>(bytes), sizeof bytes, 0));
	return static_cast<int64>((hash >> 2) | 2);
}

/* The history this backend saw the history sequence (by its OID) hold, if any. */
Oid known_history_sequence = InvalidOid;
int64 known_history = 0;

SPIPlanPtr history_plan = nullptr;
SPIPlanPtr record_plan = nullptr;
SPIPlanPtr base_plan = nullptr;

Oid history_sequence()
{
	Oid relid = get_relname_relid("token_history", get_namespace_oid("fencing", false));
	if (!OidIsValid(relid))
		elog(ERROR, "fencing: sequence fencing.token_history is missing");
	return relid;
}

/* Does the history sequence hold this history?  Call with the reservation lock. */
bool history_current(Oid sequence, int64 key)
{
	if (sequence == known_history_sequence && key == known_history)
		return true;
	SPIPlanPtr plan =
	    kept_plan(&history_plan, "SELECT last_value FROM fencing.token_history", 0, nullptr);
	run_plan(plan, nullptr, nullptr, true, SPI_OK_SELECT);
	bool isnull;
	bool current = SPI_processed > 0 && DatumGetInt64(result_value(0, 1, &isnull)) == key;
	if (current) {
		known_history_sequence = sequence;
		known_history = key;
	}
	return current;
}

/*
 * The generation of this server's (system, timeline): its timeline plus the
 * system's base.  The base is the highest of what fencing.token_timelines
 * records for the system (generation - timeline of its rows) and one above
 * the highest generation recorded by any other system: a system seen for the
 * first time starts above every other, and so does one that sees its data
 * come back after it lived on another system (dumped there and restored here
 * again) - every generation recorded is one some system issued.  The same
 * answer on every copy of the same data, so a standby promoted before the
 * record reached it still gets a generation above its old primary's.
 * `recorded`: whether the table has this (system, timeline) with this
 * generation already.  0.1.0's and 0.2.0's objects record no generations
 * (legacy/token_issue_0_2_0.hpp).
 * Call inside SPI_connect.
 */
int64 generation_now(bool *recorded)
{
	int64 timeline = static_cast<int64>(GetWALInsertionTimeLine());
	int64 base = 1;
	*recorded = true;
	if (!generation_base_0_2_0(&base)) {
		Oid types[2] = {INT8OID, INT4OID};
		SPIPlanPtr plan = kept_plan(
		    &base_plan,
		    "SELECT GREATEST("
		    " (SELECT pg_catalog.max(t.generation OPERATOR(pg_catalog.-) t.timeline)"
		    "  FROM fencing.token_timelines t WHERE t.system_identifier OPERATOR(pg_catalog.=) $1),"
		    " (SELECT pg_catalog.max(t.generation) FROM fencing.token_timelines t"
		    "  WHERE t.system_identifier OPERATOR(pg_catalog.<>) $1) OPERATOR(pg_catalog.+) 1,"
		    " 1),"
		    " (SELECT t.generation FROM fencing.token_timelines t"
		    "  WHERE t.system_identifier OPERATOR(pg_catalog.=) $1"
		    "  AND t.timeline OPERATOR(pg_catalog.=) $2)",
		    2, types);
		Datum values[2] = {Int64GetDatum(static_cast<int64>(GetSystemIdentifier())),
		                   Int32GetDatum(static_cast<int32>(timeline))};
		run_plan(plan, values, nullptr, true, SPI_OK_SELECT);
		bool isnull = true;
		Datum value = SPI_processed > 0 ? result_value(0, 1, &isnull) : 0;
		if (!isnull)
			base = std::max(int64{1}, DatumGetInt64(value));
		Datum known = SPI_processed > 0 ? result_value(0, 2, &isnull) : 0;
		*recorded = !isnull && DatumGetInt64(known) >= saturating_add(base, timeline);
	}
	int64 generation = saturating_add(base, timeline);
	if (generation > max_generation)
		ereport(ERROR,
		        (errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
		         errmsg("the next fencing token would exceed 2^53 - 1"),
		         errdetail("This server is on token generation " INT64_FORMAT
		                   " (timeline %u); tokens have room for " INT64_FORMAT " generations.",
		                   generation, GetWALInsertionTimeLine(), max_generation),
		         errhint("Tokens stay below 2^53 so that every client reads them exactly.")));
	return generation;
}

/*
 * The lowest token this generation may issue at this moment, minus one: the
 * clock in milliseconds, plus the margin on a new history.
 */
int64 clock_floor(int64 generation, bool first_on_history)
{
	int64 low = clock_milliseconds();
	if (first_on_history) {
		require_configured("fencing.failover_margin");
		low = saturating_add(low, int64{failover_margin});
	}
	if (low > max_low) {
		ereport(WARNING,
		        (errmsg("the server clock is beyond what tokens can follow"),
		         errdetail("The clock part of a token ends in the year 2109; tokens now only "
		                   "increase by one per grant."),
		         errhint("Check the server's clock.")));
		low = 0;
	}
	return generation_start(generation) + low - 1;
}

/*
 * Records, for people to read and for the generations of other systems, that
 * this (system, timeline) issued tokens, the first being `token` (or the
 * first of a reservation after the first record rolled back), with its
 * generation (raised on a row recorded before with a lower one: the data
 * came back from another system that issued higher generations).  Rolled back
 * with its transaction (the history sequence is what counts for the margin;
 * the generation is computed again the same way).  While another transaction is
 * recording it, this one leaves it to that one rather than wait for it.
 */
void record_history(Oid sequence, int64 token, int64 generation)
{
	LOCKTAG tag;
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, sequence, 1, lock_class);
	if (LockAcquire(&tag, ExclusiveLock, false, true) == LOCKACQUIRE_NOT_AVAIL)
		return;
	if (record_history_0_2_0(token))
		return;
	Oid types[4] = {INT8OID, INT4OID, INT8OID, INT8OID};
	SPIPlanPtr plan = kept_plan(&record_plan,
	                            "INSERT INTO fencing.token_timelines"
	                            " (system_identifier, timeline, first_token, started_at,"
	                            " generation)"
	                            " VALUES ($1, $2, $3, pg_catalog.clock_timestamp(), $4)"
	                            " ON CONFLICT (system_identifier, timeline) DO UPDATE"
	                            " SET generation = EXCLUDED.generation"
	                            " WHERE token_timelines.generation"
	                            " OPERATOR(pg_catalog.<) EXCLUDED.generation",
	                            4, types);
	Datum values[4] = {Int64GetDatum(static_cast<int64>(GetSystemIdentifier())),
	                   Int32GetDatum(static_cast<int32>(GetWALInsertionTimeLine())),
	                   Int64GetDatum(token), Int64GetDatum(generation)};
	run_plan(plan, values, nullptr, false, SPI_OK_INSERT);
}

/*
 * The window of tokens reserved for one database's sequence, in shared
 * memory (with shared_preload_libraries).  Every token up to `reserved` may
 * be handed out without writing anything: the sequence was set to
 * `reserved`, flushed and confirmed before.  `last` is the last token handed
 * out.  A slot may be taken over by another database at any time: the
 * sequence, which is at or above every window, is the truth, so a database
 * whose slot is gone only reserves again.
 */
struct TokenWindow {
	Oid database;
	Oid sequence;
	uint32 timeline;
	int64 generation;
	int64 last;
	int64 reserved;
};
FENCING_PLAIN_DATA(TokenWindow);

constexpr int window_slots = 64;
struct SharedWindows {
	slock_t mutex;
	int next_victim;
	TokenWindow slots[window_slots];
	/*
	 * The end of the WAL that a lease change may rely on without the
	 * synchronous standbys having it: set to the end of WAL at the first
	 * lease call after shared memory was set up (a restart replays WAL the
	 * standbys may lack), and raised by every durable commit whose wait for
	 * them was cut short (a cancel, a terminated backend).
	 */
	bool unconfirmed_set;
	XLogRecPtr unconfirmed;
};
FENCING_PLAIN_DATA(SharedWindows);

SharedWindows *windows = nullptr; /* nullptr when not preloaded */

void attach_windows(void *memory, bool found, LWLockPadded *)
{
	windows = static_cast<SharedWindows *>(memory);
	if (!found)
		SpinLockInit(&windows->mutex);
}

/* The slot of (database, sequence), or nullptr.  Call with the mutex. */
TokenWindow *find_window(Oid sequence)
{
	for (auto &slot : windows->slots)
		if (slot.database == MyDatabaseId && slot.sequence == sequence)
			return &slot;
	return nullptr;
}

/*
 * A token from this database's window: above `floor` and the last one
 * handed out, at least the clock, within the window; 0 if there is none.
 */
int64 token_from_window(Oid sequence, uint32 timeline, int64 floor, int64 now_low)
{
	if (windows == nullptr)
		return 0;
	int64 token = 0;
	SpinLockAcquire(&windows->mutex);
	TokenWindow *slot = find_window(sequence);
	if (slot != nullptr && slot->timeline == timeline) {
		int64 lower =
		    std::max({floor, slot->last, generation_start(slot->generation) + now_low - 1});
		if (lower < slot->reserved) {
			token = lower + 1;
			slot->last = token;
		}
	}
	SpinLockRelease(&windows->mutex);
	return token;
}

/* The last token this database's window handed out (0 if it has none). */
int64 window_last(Oid sequence)
{
	if (windows == nullptr)
		return 0;
	SpinLockAcquire(&windows->mutex);
	TokenWindow *slot = find_window(sequence);
	int64 last = slot != nullptr ? slot->last : 0;
	SpinLockRelease(&windows->mutex);
	return last;
}

/* Sets this database's window (taking over a slot if it has none). */
void set_window(Oid sequence, uint32 timeline, int64 generation, int64 last, int64 reserved)
{
	if (windows == nullptr)
		return;
	SpinLockAcquire(&windows->mutex);
	TokenWindow *slot = find_window(sequence);
	if (slot == nullptr) {
		for (auto &candidate : windows->slots)
			if (candidate.database == InvalidOid) {
				slot = &candidate;
				break;
			}
		if (slot == nullptr) {
			slot = &windows->slots[windows->next_victim];
			windows->next_victim = (windows->next_victim + 1) % window_slots;
		}
	}
	*slot = TokenWindow{MyDatabaseId,
	                    sequence,
	                    timeline,
	                    generation,
	                    std::max(last, slot->database == MyDatabaseId && slot->sequence == sequence
	                                       ? slot->last
	                                       : 0),
	                    reserved};
	SpinLockRelease(&windows->mutex);
}

/*
 * After commit or PREPARE: if its wait for the synchronous standbys was
 * canceled, PostgreSQL only warns, and the lease changes of this transaction
 * may be missing on a standby promoted later.  Say so, with the tokens.
 */
void warn_unconfirmed(XLogRecPtr end, const char *what)
{
	if (standbys_have(end))
		return;
	if (windows != nullptr) {
		SpinLockAcquire(&windows->mutex);
		windows->unconfirmed = std::max(windows->unconfirmed, end);
		SpinLockRelease(&windows->mutex);
	}
	if (grants_total == 0) {
		ereport(WARNING,
		        (errmsg("the lease changes of this transaction may be lost if the server fails "
		                "over"),
		         errdetail("The %s was not confirmed by the synchronous standbys.", what)));
		return;
	}
	StringInfoData tokens;
	initStringInfo(&tokens);
	for (int i = 0; i < ngrants; i++)
		appendStringInfo(&tokens, "%s" INT64_FORMAT, i > 0 ? ", " : "", grants[i].token);
	if (grants_total > ngrants)
		appendStringInfo(&tokens, " and " INT64_FORMAT " more", grants_total - ngrants);
	ereport(WARNING,
	        (errmsg("the grant of token %s may be lost if the server fails over", tokens.data),
	         errdetail("The %s was not confirmed by the synchronous standbys. The tokens "
	                   "themselves were, so they will never be issued again; but a standby "
	                   "promoted now may grant the lease to another holder, with a higher token.",
	                   what),
	         errhint("Writes fenced with such a token stay safe: once a higher token is used, "
	                 "they are refused.")));
}

/* Has this transaction written a commit record of its own (it has a transaction id)? */
bool wrote = false;

/* Set when this transaction used the lease manager: its commit must be durable. */
bool durable_commit = false;

/*
 * Set when this transaction made a lease change that needs no flush (a
 * renewal within its row's grace_until, a release), with the end of the WAL
 * it had written then; `written_before` when it had written anything else
 * before such a change.
 */
bool flush_optional = false;
bool written_before = false;
XLogRecPtr flush_optional_end = InvalidXLogRecPtr;

/*
 * Just before commit, whatever the transaction set since: synchronous_commit
 * back to 'on' (flush, and wait for the synchronous standbys) and a forced
 * local flush.  A transaction whose only writes are lease changes that need
 * no flush commits with synchronous_commit = off; one that wrote anything
 * else keeps the session's setting.
 */
void enforce_durable_commit(XactEvent event, void *)
{
	switch (event) {
	case XACT_EVENT_PRE_COMMIT:
	case XACT_EVENT_PRE_PREPARE:
		if (durable_commit) {
			if (synchronous_commit < SYNCHRONOUS_COMMIT_ON)
				(void)set_config_option("synchronous_commit", "on", PGC_USERSET, PGC_S_SESSION,
				                        GUC_ACTION_LOCAL, true, 0, false);
			ForceSyncCommit();
			wrote = TransactionIdIsValid(GetTopTransactionIdIfAny());
		} else if (event == XACT_EVENT_PRE_COMMIT && flush_optional && !written_before &&
		           XactLastRecEnd == flush_optional_end &&
		           synchronous_commit > SYNCHRONOUS_COMMIT_OFF)
			(void)set_config_option("synchronous_commit", "off", PGC_USERSET, PGC_S_SESSION,
			                        GUC_ACTION_LOCAL, true, 0, false);
		break;
	case XACT_EVENT_COMMIT:
		if (durable_commit && wrote)
			warn_unconfirmed(XactLastCommitEnd, "commit");
		break;
	case XACT_EVENT_PREPARE:
		if (durable_commit && wrote)
			warn_unconfirmed(XactLastRecEnd, "PREPARE TRANSACTION");
		break;
	default:
		break;
	}
	switch (event) {
	case XACT_EVENT_COMMIT:
	case XACT_EVENT_ABORT:
	case XACT_EVENT_PREPARE:
	case XACT_EVENT_PARALLEL_COMMIT:
	case XACT_EVENT_PARALLEL_ABORT:
		durable_commit = false;
		wrote = false;
		flush_optional = false;
		written_before = false;
		flush_optional_end = InvalidXLogRecPtr;
		ngrants = 0;
		grants_total = 0;
		break;
	default:
		break;
	}
}

/* A rolled-back savepoint takes its grants with it. */
void forget_aborted_grants(SubXactEvent event, SubTransactionId, SubTransactionId, void *)
{
	if (event != SUBXACT_EVENT_ABORT_SUB)
		return;
	int level = GetCurrentTransactionNestLevel();
	int kept = 0;
	for (int i = 0; i < ngrants; i++)
		if (grants[i].level < level)
			grants[kept++] = grants[i];
	grants_total -= ngrants - kept;
	ngrants = kept;
}

/* Flushes `lsn` and waits for the synchronous standbys; errors if the wait was cut short. */
void make_durable(XLogRecPtr lsn)
{
	XLogFlush(lsn);
	require_durable_commit();
	/* As at commit: cancel and die end the wait themselves, checked below. */
	HOLD_INTERRUPTS();
	SyncRepWaitForLSN(lsn, false);
	RESUME_INTERRUPTS();
	/* A cancel or shutdown ends the wait with a WARNING only: refuse the token then. */
	if (!standbys_have(lsn))
		ereport(ERROR, (errcode(ERRCODE_QUERY_CANCELED),
		                errmsg("canceled before the new token reached the synchronous standbys"),
		                errdetail("The token was not returned and will never be issued.")));
}

/*
 * Refuses to issue a token above `lower` when that token would pass 2^53 - 1
 * - before the sequence is set forward to it, which no rollback would undo.
 */
void require_issuable(int64 lower)
{
	if (lower >= max_issued_token)
		ereport(ERROR,
		        (errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
		         errmsg("the next fencing token would exceed 2^53 - 1"),
		         errdetail("A token must exceed " INT64_FORMAT " (fencing.token_seq, or "
		                   "the resource's last token or floor).",
		                   lower),
		         errhint("Tokens stay below 2^53 so that every client reads them exactly.")));
}

/*
 * A token from a new window: under the reservation lock, above the
 * sequence, `floor`, the last token of the old window and the clock (with
 * the margin on a new history); the sequence is set to the window's top,
 * flushed and confirmed before the token is returned.
 */
int64 reserve(Oid sequence, int64 floor)
{
	/* 0.1.0's objects keep no history (legacy/token_issue_0_2_0.hpp). */
	Oid history = no_history_0_1_0() ? InvalidOid : history_sequence();
	uint32 timeline = GetWALInsertionTimeLine();
	LOCKTAG tag;
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, sequence, 0, lock_class);
	(void)LockAcquire(&tag, ExclusiveLock, false, false);

	/* Another grant may have reserved while this one waited. */
	int64 token = token_from_window(sequence, timeline, floor, clock_milliseconds());
	if (token != 0) {
		LockRelease(&tag, ExclusiveLock, false);
		return token;
	}
	int64 key = history_key();
	bool first_on_history = OidIsValid(history) && !history_current(history, key);
	bool recorded;
	int64 generation = generation_now(&recorded);
	int64 lower =
	    std::max({floor, window_last(sequence), clock_floor(generation, first_on_history)});
	require_issuable(lower);
	if (first_on_history)
		DirectFunctionCall3(setval3_oid, ObjectIdGetDatum(history), Int64GetDatum(key),
		                    BoolGetDatum(true));
	token = std::max(nextval_internal(sequence, false), one_above(lower));
	/* The last token of this generation: a token above it would be a newer leadership's. */
	int64 generation_end = generation_start(generation + 1) - 1;
	if (token > generation_end)
		ereport(ERROR,
		        (errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
		         errmsg("the tokens of generation " INT64_FORMAT " are used up", generation),
		         errdetail("The next token would be " INT64_FORMAT " (above fencing.token_seq and "
		                   "the resource's last token), but tokens above " INT64_FORMAT
		                   " belong to the next generation, a newer timeline's.",
		                   token, generation_end),
		         errhint("Check the server's clock: tokens follow it. A promoted standby issues "
		                 "the next generation's tokens.")));
	int64 top =
	    windows != nullptr ? std::min(saturating_add(token, window), generation_end) : token;
	DirectFunctionCall3(setval3_oid, ObjectIdGetDatum(sequence), Int64GetDatum(top),
	                    BoolGetDatum(true));
	make_durable(sequence_lsn(sequence));
	set_window(sequence, timeline, generation, token, top);
	LockRelease(&tag, ExclusiveLock, false);
	if (first_on_history) {
		known_history_sequence = history;
		known_history = key;
	}
	/* Until the record is there (the first one rolled back), every reservation tries again. */
	if (OidIsValid(history) && (first_on_history || !recorded))
		record_history(sequence, token, generation);
	return token;
}

/* Is `walsender` a standby that replied within fencing.standby_reply_timeout? */
bool replied_recently(int walsender, TimestampTz now)
{
	WalSnd *sender = &WalSndCtl->walsnds[walsender];
	SpinLockAcquire(&sender->mutex);
	bool recent = sender->pid != 0 && sender->state == WALSNDSTATE_STREAMING &&
	              walsender_is_physical(sender) &&
	              !TimestampDifferenceExceeds(sender->replyTime, now, standby_reply_timeout);
	SpinLockRelease(&sender->mutex);
	return recent;
}

} // namespace

int64 clock_token()
{
	return unix_microseconds(GetCurrentTimestamp());
}

int64 issuable_now()
{
	int64 generation = with_spi([]() {
		/* compact() runs as the table's owner, who need not read the extension's tables. */
		Rights saved = become(extension_owner(), 0, true);
		bool recorded;
		int64 now = generation_now(&recorded);
		restore(saved);
		return now;
	});
	return std::max(clock_token(), clock_floor(generation, false) + 1);
}

void note_grant(int64 token)
{
	if (ngrants < max_grants_named)
		grants[ngrants++] = Grant{token, GetCurrentTransactionNestLevel()};
	grants_total++;
}

int64 issue_token(int64 floor, bool note)
{
	if (RecoveryInProgress())
		ereport(ERROR, (errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
		                errmsg("cannot grant a lease during recovery"),
		                errhint("Call fencing.acquire() on the primary.")));
	Oid sequence = token_sequence();
	int64 token =
	    token_from_window(sequence, GetWALInsertionTimeLine(), floor, clock_milliseconds());
	if (token == 0)
		token = reserve(sequence, floor);
	require_durable_commit();
	if (note)
		note_grant(token);
	return token;
}

void require_grant_confirmation()
{
	require_configured("fencing.grant_confirmation");
	if (grant_confirmation == confirm_off)
		return;
	require_configured("fencing.standby_reply_timeout");
	TimestampTz now = GetCurrentTimestamp();
	int confirming = 0;
	int needed = 1;
	const char *which = "standby";
	if (grant_confirmation == confirm_standby) {
		for (int i = 0; i < max_wal_senders; i++)
			if (replied_recently(i, now))
				confirming++;
	} else {
		which = "synchronous standby";
		/* Without synchronous_standby_names, no standby confirms anything before commit. */
		if (SyncRepConfig != nullptr && SyncRepStandbyNames != nullptr &&
		    SyncRepStandbyNames[0] != '\0') {
			needed = SyncRepConfig->num_sync;
			SyncRepStandbyData *standbys = nullptr;
			int candidates = SyncRepGetCandidateStandbys(&standbys);
			for (int i = 0; i < candidates; i++)
				if (replied_recently(standbys[i].walsnd_index, now))
					confirming++;
			if (standbys != nullptr)
				pfree(standbys);
		}
	}
	if (confirming < needed)
		ereport(ERROR,
		        (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		         errmsg("no %s can confirm this lease change", which),
		         errdetail("fencing.grant_confirmation is \"%s\": %d of the %d needed %ss replied "
		                   "within fencing.standby_reply_timeout (%d ms).",
		                   confirmation_options[grant_confirmation].name, confirming, needed, which,
		                   standby_reply_timeout),
		         errhint("This server may be cut off from its standbys: call the primary the "
		                 "standbys follow, or retry.")));
}

/*
 * token_at(at timestamptz) RETURNS bigint: the lowest token this server
 * issues at `at` in its current generation (its clock then, without margin
 * or lead); a compaction floor for "every grant older than at".
 */
FENCING_FUNCTION(token_at)
{
	TimestampTz at = PG_GETARG_TIMESTAMPTZ(0);
	if (TIMESTAMP_NOT_FINITE(at))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		                errmsg("the time of a token must be finite")));
	int64 low = unix_microseconds(at) / 1000;
	if (low < 0 || low > max_low)
		ereport(ERROR,
		        (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		         errmsg("tokens follow the clock from 1970 to 2109 only"),
		         errdetail("The clock part of a token is milliseconds since 1970, below 2^42.")));
	int64 generation = with_spi([]() {
		bool recorded;
		return generation_now(&recorded);
	});
	PG_RETURN_INT64(generation_start(generation) + low);
}

const SharedArea token_windows_area =
    shared_struct("fencing token windows", size_of<SharedWindows>, attach_windows);

namespace
{

void register_commit_callbacks()
{
	static bool registered = false;
	if (!registered) {
		RegisterXactCallback(enforce_durable_commit, nullptr);
		RegisterSubXactCallback(forget_aborted_grants, nullptr);
		registered = true;
	}
}

} // namespace

bool lease_horizons_confirmed()
{
	if (windows == nullptr)
		return true;
	SpinLockAcquire(&windows->mutex);
	bool set = windows->unconfirmed_set;
	XLogRecPtr unconfirmed = windows->unconfirmed;
	SpinLockRelease(&windows->mutex);
	if (!set) {
		/* Outside the mutex: GetXLogInsertRecPtr() takes a spinlock of its own. */
		XLogRecPtr end = GetXLogInsertRecPtr();
		SpinLockAcquire(&windows->mutex);
		if (!windows->unconfirmed_set) {
			windows->unconfirmed = std::max(windows->unconfirmed, end);
			windows->unconfirmed_set = true;
		}
		unconfirmed = windows->unconfirmed;
		SpinLockRelease(&windows->mutex);
	}
	return standbys_have(unconfirmed, true);
}

void note_lease_change_start()
{
	register_commit_callbacks();
	if (TransactionIdIsValid(GetTopTransactionIdIfAny()) &&
	    !(flush_optional && XactLastRecEnd == flush_optional_end))
		written_before = true;
}

void allow_commit_without_flush()
{
	register_commit_callbacks();
	flush_optional = true;
	flush_optional_end = XactLastRecEnd;
}

void require_durable_commit()
{
	register_commit_callbacks();
	durable_commit = true;
	/* Also now, so that the wait for the standbys in make_durable() happens. */
	if (synchronous_commit < SYNCHRONOUS_COMMIT_ON)
		(void)set_config_option("synchronous_commit", "on", PGC_USERSET, PGC_S_SESSION,
		                        GUC_ACTION_LOCAL, true, 0, false);
}

} // namespace fencing
