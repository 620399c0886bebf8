/*
 * Tokens come from one sequence for all resources, so every grant gets a
 * number no grant ever had: not after a rollback (sequences are not
 * transactional), not after a crash or a failover to a synchronous standby
 * (the sequence's WAL record is flushed and confirmed by the synchronous
 * standbys before the token is returned).
 *
 * And they follow the server's clock, as a hybrid logical clock does: a token
 * is max(previous + 1, now in microseconds since 1970), plus a margin
 * (fencing.failover_margin) for the first grant on a timeline or system that
 * has not issued tokens before.  So a server that lost the tail of another's
 * history - a promoted asynchronous standby, a point-in-time restore, a
 * restored dump - still issues only tokens above everything issued there, as
 * long as its clock is behind the old server's by less than the margin plus
 * the time between the last lost grant and its first one (docs/leases.md,
 * "Durability").
 */
#include "tokens.hpp"
#include "layout.hpp"
#include "spi.hpp"
#include "token.hpp"

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
#include "storage/lmgr.h"
#include "storage/lock.h"
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

Oid token_sequence()
{
	Oid relid = get_relname_relid("token_seq", get_namespace_oid("fencing", false));
	if (!OidIsValid(relid))
		elog(ERROR, "fencing: sequence fencing.token_seq is missing");
	return relid;
}

/* The LSN of the sequence's last WAL record, which covers every value handed out so far. */
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
 * backend's own value of it, as SyncRepWaitForLSN() does.
 */
bool standbys_have(XLogRecPtr lsn)
{
	if (!SyncRepRequested())
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

/* fencing.failover_margin, in milliseconds. */
int failover_margin = 10000;

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

/*
 * The tokens acquire() issues stay below 2^53, exact in a double
 * (JavaScript, JSON), though the domain goes on to 2^63 - 1 (token.hpp);
 * the clock is followed up to near there.
 */
constexpr int64 max_issued_token = (int64{1} << 53) - 1;
constexpr int64 max_clock_token = (int64{1} << 53) - (int64{1} << 40);

/*
 * The value the next token must exceed by the clock: now in microseconds
 * since 1970, minus one, plus the failover margin on a new history.  A clock
 * past year 2255 (2^53 microseconds) is not followed.
 */
int64 clock_floor(bool first_on_history)
{
	int64 now = clock_token();
	if (first_on_history)
		now = saturating_add(now, int64{failover_margin} * 1000);
	if (now > max_clock_token) {
		ereport(WARNING,
		        (errmsg("the server clock is beyond what tokens can follow"),
		         errdetail("Tokens stay below 2^53; they now only increase by one per grant."),
		         errhint("Check the server's clock.")));
		return 0;
	}
	return now - 1;
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

Oid history_sequence()
{
	Oid relid = get_relname_relid("token_history", get_namespace_oid("fencing", false));
	if (!OidIsValid(relid))
		elog(ERROR, "fencing: sequence fencing.token_history is missing");
	return relid;
}

/* Does the history sequence hold this history?  Call with the sequence's exclusive lock. */
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
 * Records, for people to read, that this (system, timeline) issued tokens,
 * the first being `token`.  Rolled back with its transaction (the history
 * sequence is what counts).  While another transaction is recording it, this
 * one leaves it to that one rather than wait for it.
 */
void record_history(Oid sequence, int64 token)
{
	LOCKTAG tag;
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, sequence, 1, lock_class);
	if (LockAcquire(&tag, ExclusiveLock, false, true) == LOCKACQUIRE_NOT_AVAIL)
		return;
	Oid types[3] = {INT8OID, INT4OID, INT8OID};
	SPIPlanPtr plan = kept_plan(&record_plan,
	                            "INSERT INTO fencing.token_timelines"
	                            " (system_identifier, timeline, first_token, started_at)"
	                            " VALUES ($1, $2, $3, pg_catalog.clock_timestamp())"
	                            " ON CONFLICT DO NOTHING",
	                            3, types);
	Datum values[3] = {Int64GetDatum(static_cast<int64>(GetSystemIdentifier())),
	                   Int32GetDatum(static_cast<int32>(GetWALInsertionTimeLine())),
	                   Int64GetDatum(token)};
	run_plan(plan, values, nullptr, false, SPI_OK_INSERT);
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
 * Just before commit, whatever the transaction set since: synchronous_commit
 * back to 'on' (flush, and wait for the synchronous standbys) and a forced
 * local flush.
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
		}
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

/* Notes a grant of this transaction. */
void note_grant(int64 token)
{
	if (ngrants < max_grants_named)
		grants[ngrants++] = Grant{token, GetCurrentTransactionNestLevel()};
	grants_total++;
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

} // namespace

int64 clock_token()
{
	/* Microseconds between 1970-01-01 and PostgreSQL's epoch, 2000-01-01. */
	constexpr int64 unix_epoch_offset =
	    int64{POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE} * SECS_PER_DAY * USECS_PER_SEC;
	return saturating_add(GetCurrentTimestamp(), unix_epoch_offset);
}

int64 issue_token(int64 floor)
{
	if (RecoveryInProgress())
		ereport(ERROR, (errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
		                errmsg("cannot grant a lease during recovery"),
		                errhint("Call fencing.acquire() on the primary.")));
	Oid sequence = token_sequence();
	/* 0.1.0's objects (layout.hpp) keep no history: no margin, the clock still bounds tokens. */
	Oid history = installed_layout() == Layout::v0_1_0 ? InvalidOid : history_sequence();
	int64 key = history_key();
	LOCKTAG tag;
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, sequence, 0, lock_class);

	/*
	 * Grants share the sequence; setting it forward excludes them, so it
	 * never moves back.  Faster than one grant per microsecond, the
	 * sequence runs ahead of the clock and the share lock suffices.  The
	 * first grant on a new history sets tokens the margin ahead of the
	 * clock, and marks the history as seen, under the exclusive lock.
	 */
	bool first_on_history = false;
	int64 token = 0;
	if (OidIsValid(history) && history == known_history_sequence && key == known_history) {
		(void)LockAcquire(&tag, ShareLock, false, false);
		token = nextval_internal(sequence, false);
		LockRelease(&tag, ShareLock, false);
	}
	int64 lower = std::max(floor, clock_floor(false));
	if (token <= lower) {
		require_issuable(lower);
		(void)LockAcquire(&tag, ExclusiveLock, false, false);
		if (OidIsValid(history) && !history_current(history, key)) {
			first_on_history = true;
			lower = std::max(floor, clock_floor(true));
			require_issuable(lower);
			DirectFunctionCall3(setval3_oid, ObjectIdGetDatum(history), Int64GetDatum(key),
			                    BoolGetDatum(true));
		}
		token = nextval_internal(sequence, false);
		if (token <= lower) {
			token = one_above(lower);
			DirectFunctionCall3(setval3_oid, ObjectIdGetDatum(sequence), Int64GetDatum(token),
			                    BoolGetDatum(true));
		}
		LockRelease(&tag, ExclusiveLock, false);
	}
	require_issuable(token - 1);
	make_durable(sequence_lsn(sequence));
	note_grant(token);
	if (first_on_history)
		record_history(sequence, token);
	return token;
}

void define_token_settings()
{
	DefineCustomIntVariable(
	    "fencing.failover_margin",
	    "How far the first token on a new timeline or system is set ahead of the server clock.",
	    "Covers a clock that is behind the old primary's, after a failover to an asynchronous "
	    "standby or a point-in-time restore.",
	    &failover_margin, 10000, 0, 3600000, PGC_SUSET, GUC_UNIT_MS, nullptr, nullptr, nullptr);
}

void require_durable_commit()
{
	static bool registered = false;
	if (!registered) {
		RegisterXactCallback(enforce_durable_commit, nullptr);
		RegisterSubXactCallback(forget_aborted_grants, nullptr);
		registered = true;
	}
	durable_commit = true;
	/* Also now, so that the wait for the standbys in make_durable() happens. */
	if (synchronous_commit < SYNCHRONOUS_COMMIT_ON)
		(void)set_config_option("synchronous_commit", "on", PGC_USERSET, PGC_S_SESSION,
		                        GUC_ACTION_LOCAL, true, 0, false);
}

} // namespace fencing
