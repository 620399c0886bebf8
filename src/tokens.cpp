/*
 * Tokens come from one sequence for all resources, so every grant gets a
 * number no grant ever had: not after a rollback (sequences are not
 * transactional), not after a crash or a failover (the sequence's WAL record
 * is flushed and confirmed by the synchronous standbys before the token is
 * returned), not after pg_dump/restore (the sequence is dumped).
 */
#include "tokens.hpp"

extern "C" {
#include "access/relation.h"
#include "access/xact.h"
#include "access/xlog.h"
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
	case XACT_EVENT_ABORT:
	case XACT_EVENT_PREPARE:
	case XACT_EVENT_PARALLEL_COMMIT:
	case XACT_EVENT_PARALLEL_ABORT:
		durable_commit = false;
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
	Oid sequence = token_sequence();
	LOCKTAG tag;
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, sequence, 0, lock_class);

	/* Grants share the sequence; raising it above a floor excludes them, so it never moves back. */
	(void)LockAcquire(&tag, ShareLock, false, false);
	int64 token = nextval_internal(sequence, false);
	LockRelease(&tag, ShareLock, false);
	if (token <= floor) {
		(void)LockAcquire(&tag, ExclusiveLock, false, false);
		token = nextval_internal(sequence, false);
		if (token <= floor) {
			DirectFunctionCall2(setval_oid, ObjectIdGetDatum(sequence), Int64GetDatum(floor));
			token = nextval_internal(sequence, false);
		}
		LockRelease(&tag, ExclusiveLock, false);
	}
	make_durable(sequence_lsn(sequence));
	return token;
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
