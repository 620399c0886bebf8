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
 * the time between the last lost grant and its first one (README,
 * "Durability").
 */
#include "tokens.hpp"
#include "spi.hpp"

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

/* The token granted in this transaction, for the warning at commit. */
int64 granted_token = 0;

/* Tokens stay below 2^53, exact in a double (JavaScript, JSON): the clock is followed up to there. */
constexpr int64 max_clock_token = (int64{1} << 53) - (int64{1} << 40);

/* Microseconds between 1970-01-01 and PostgreSQL's epoch, 2000-01-01. */
constexpr int64 unix_epoch_offset =
    int64{POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE} * SECS_PER_DAY * USECS_PER_SEC;

/*
 * The value the next token must exceed by the clock: now in microseconds
 * since 1970, minus one, plus the failover margin on a new history.  A clock
 * past year 2255 (2^53 microseconds) is not followed.
 */
int64 clock_floor(bool first_on_history)
{
	int64 now = GetCurrentTimestamp() + unix_epoch_offset;
	if (first_on_history)
		now += int64{failover_margin} * 1000;
	if (now > max_clock_token) {
		ereport(WARNING, (errmsg("the server clock is beyond what tokens can follow"),
		                  errdetail("Tokens stay below 2^53; they now only increase by one per grant."),
		                  errhint("Check the server's clock.")));
		return 0;
	}
	return now - 1;
}

/* The (system, timeline) this backend knows tokens were issued on, if any. */
uint64 known_system = 0;
TimeLineID known_timeline = 0;

SPIPlanPtr history_plan = nullptr;
SPIPlanPtr record_plan = nullptr;

/* Has this server's (system, timeline) issued tokens before (a row in fencing.token_timelines)? */
bool history_known()
{
	uint64 system = GetSystemIdentifier();
	TimeLineID timeline = GetWALInsertionTimeLine();
	if (system == known_system && timeline == known_timeline)
		return true;
	Oid types[2] = {INT8OID, INT4OID};
	SPIPlanPtr plan = kept_plan(&history_plan,
	                            "SELECT FROM fencing.token_timelines"
	                            " WHERE system_identifier = $1 AND timeline = $2",
	                            2, types);
	Datum values[2] = {Int64GetDatum(static_cast<int64>(system)),
	                   Int32GetDatum(static_cast<int32>(timeline))};
	run_plan(plan, values, nullptr, false, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return false;
	known_system = system;
	known_timeline = timeline;
	return true;
}

/*
 * Records that this (system, timeline) issued tokens, the first being
 * `token`.  If the transaction rolls back, a later grant applies the margin
 * again, which only moves tokens further up.  While another transaction is
 * recording it (its row not yet committed), this one leaves it to that one
 * rather than wait for it: an INSERT would wait until that transaction ends.
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
 * After commit: if the commit's wait for the synchronous standbys was
 * canceled, PostgreSQL only warns, and the lease changes of this transaction
 * may be missing on a standby promoted later.  Say so, with the token.
 */
void warn_unconfirmed_commit()
{
	if (standbys_have(XactLastCommitEnd))
		return;
	if (granted_token > 0)
		ereport(WARNING,
		        (errmsg("the grant of token %lld may be lost if the server fails over",
		                static_cast<long long>(granted_token)),
		         errdetail("The commit was not confirmed by the synchronous standbys. The token "
		                   "itself was, so it will never be issued again; but a standby promoted "
		                   "now may grant the lease to another holder, with a higher token."),
		         errhint("Writes fenced with this token stay safe: once a higher token is used, "
		                 "they are refused.")));
	else
		ereport(WARNING,
		        (errmsg("the lease changes of this transaction may be lost if the server fails "
		                "over"),
		         errdetail("The commit was not confirmed by the synchronous standbys.")));
}

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
		}
		break;
	case XACT_EVENT_COMMIT:
		if (durable_commit)
			warn_unconfirmed_commit();
		durable_commit = false;
		granted_token = 0;
		break;
	case XACT_EVENT_ABORT:
	case XACT_EVENT_PREPARE:
	case XACT_EVENT_PARALLEL_COMMIT:
	case XACT_EVENT_PARALLEL_ABORT:
		durable_commit = false;
		granted_token = 0;
		break;
	default:
		break;
	}
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


} // namespace

int64 issue_token(int64 floor)
{
	if (RecoveryInProgress())
		ereport(ERROR, (errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
		                errmsg("cannot grant a lease during recovery"),
		                errhint("Call fencing.acquire() on the primary.")));
	Oid sequence = token_sequence();
	bool first_on_history = !history_known();
	int64 lower = std::max(floor, clock_floor(first_on_history));
	LOCKTAG tag;
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, sequence, 0, lock_class);

	/*
	 * Grants share the sequence; setting it forward excludes them, so it
	 * never moves back.  Faster than one grant per microsecond, the
	 * sequence runs ahead of the clock and the share lock suffices.
	 */
	(void)LockAcquire(&tag, ShareLock, false, false);
	int64 token = nextval_internal(sequence, false);
	LockRelease(&tag, ShareLock, false);
	if (token <= lower) {
		(void)LockAcquire(&tag, ExclusiveLock, false, false);
		token = nextval_internal(sequence, false);
		if (token <= lower) {
			token = lower + 1;
			DirectFunctionCall3(setval3_oid, ObjectIdGetDatum(sequence), Int64GetDatum(token),
			                    BoolGetDatum(true));
		}
		LockRelease(&tag, ExclusiveLock, false);
	}
	make_durable(sequence_lsn(sequence));
	granted_token = token;
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
		registered = true;
	}
	durable_commit = true;
	/* Also now, so that the wait for the standbys in make_durable() happens. */
	if (synchronous_commit < SYNCHRONOUS_COMMIT_ON)
		(void)set_config_option("synchronous_commit", "on", PGC_USERSET, PGC_S_SESSION,
		                        GUC_ACTION_LOCAL, true, 0, false);
}

} // namespace fencing
