/*
 * fencing.acquire(resource, holder, ttl, wait): a try, or a wait for the
 * lease.  A try is one grant attempt (leases.cpp).  A wait takes a place in
 * the resource's queue (lease_queue.cpp) and attempts only when first in
 * line, each attempt in a subtransaction of its own that is rolled back when
 * the lease is still held: the row lock the attempt took goes with it, so a
 * waiter never delays the holder's renew() or release().  It sleeps until
 * woken by the commit that frees the resource, until the holder's expiry,
 * until `wait` passed (then NULL) or until lock_timeout (55P03); a cancel or
 * statement_timeout ends it as any statement (57014).
 *
 * Without shared_preload_libraries there is no queue: a wait polls, with a
 * backoff from 1 ms to 100 ms, never past the holder's expiry, and honours
 * the same timeouts, without order among the waiters (docs/leases.md).
 */
#include "base/arguments.hpp"
#include "base/compat.hpp"
#include "legacy/helpers_0_3_0.hpp"
#include "legacy/leases_0_3_0.hpp"
#include "state/lease_grace.hpp"
#include "reporting/errors.hpp"
#include "leases/lease_queue.hpp"
#include "leases/leases.hpp"
#include "reporting/lease_stats.hpp"
#include "base/spi.hpp"

extern "C" {
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"
}

using namespace fencing;

namespace
{

/* The live lease on a resource, as the caller's snapshot shows it (no lock). */
struct LiveLease {
	bool live;
	bool own; /* held by the holder that asks */
	int64 token;
	TimestampTz expires_at;
};
FENCING_PLAIN_DATA(LiveLease);

/*
 * The live lease and its expiry, held until its expires_at or its
 * grace_until (state/lease_grace.hpp); 0.3.0's rows (legacy/leases_0_3_0.hpp).
 */
Statement live_lease_statement = {
    "SELECT holder = $2, token, GREATEST(fencing_internal._lease_expiry(resource, holder, token,"
    " epoch, expires_at), CASE WHEN epoch OPERATOR(pg_catalog.<>)"
    " fencing_internal._lease_epoch() THEN grace_until END) FROM fencing.resources"
    " WHERE resource = $1 AND NOT released AND GREATEST(fencing_internal._lease_expiry(resource,"
    " holder, token, epoch, expires_at), CASE WHEN epoch"
    " OPERATOR(pg_catalog.<>) fencing_internal._lease_epoch() THEN grace_until END)"
    " > pg_catalog.clock_timestamp()",
    2,
    {TEXTOID, TEXTOID}};

/* The polling backoff without the queue. */
constexpr long first_backoff_ms = 1;
constexpr long last_backoff_ms = 100;

/* Reads the resource's live lease, if any, with a plain read (no row lock). */
LiveLease read_live_lease(const char *resource, const char *holder)
{
	return with_spi([&] {
		Datum values[2] = {CStringGetTextDatum(resource), CStringGetTextDatum(holder)};
		run_statement(for_installed_release(&live_lease_statement, &live_lease_0_3_0), values,
		              SPI_OK_SELECT);
		LiveLease lease = {false, false, 0, 0};
		if (SPI_processed > 0) {
			bool isnull;
			lease.live = true;
			Datum own = result_value(0, 1, &isnull);
			lease.own = !isnull && DatumGetBool(own);
			Datum token = result_value(0, 2, &isnull);
			lease.token = isnull ? 0 : DatumGetInt64(token);
			lease.expires_at = DatumGetTimestampTz(result_value(0, 3, &isnull));
		}
		return lease;
	});
}

/*
 * The holder asked for the lease it holds: acquire() returns NULL at once
 * (it never waits for itself), with a NOTICE of its own SQLSTATE that names
 * the token, for clients to raise their LeaseAlreadyHeld.
 */
void note_own_lease(const char *resource, const char *holder, int64 token)
{
	ereport(
	    NOTICE,
	    (errcode(ERRCODE_FENCING_LEASE_HELD),
	     errmsg("holder \"%s\" already holds the lease on resource \"%s\" with token " INT64_FORMAT,
	            holder, resource, token),
	     errdetail("acquire() returns NULL to the holder of a live lease and leaves the "
	               "lease as it is."),
	     errhint("Go on with token " INT64_FORMAT " and extend the lease with "
	             "fencing.renew(), or release it before acquiring it again.",
	             token)));
}

/* NULL for the holder of a live lease (with the NOTICE); false if it holds none. */
bool refused_as_own(const char *resource, const char *holder)
{
	LiveLease lease = read_live_lease(resource, holder);
	if (lease.live && lease.own)
		note_own_lease(resource, holder, lease.token);
	return lease.live && lease.own;
}

/*
 * The `wait` argument: false for a try (absent, NULL or zero), else true and
 * the moment it ends.  Negative raises 22023 (months and days make the sign of
 * '1 month -30 days' depend on the date: as for ttl, the clock decides).
 */
bool wait_until(FunctionCallInfo fcinfo, TimestampTz now, TimestampTz *deadline)
{
	if (PG_NARGS() < 4 || PG_ARGISNULL(3))
		return false;
	Datum wait = PG_GETARG_DATUM(3);
	*deadline = DatumGetTimestampTz(
	    DirectFunctionCall2(timestamptz_pl_interval, TimestampTzGetDatum(now), wait));
	if (*deadline < now)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		                errmsg("wait must not be negative, got \"%s\"",
		                       DatumGetCString(DirectFunctionCall1(interval_out, wait)))));
	return *deadline > now;
}

/* A wait needs a snapshot per attempt: refused (0A000) where the transaction keeps one. */
void require_fresh_snapshots()
{
	if (!IsolationUsesXactSnapshot())
		return;
	ereport(ERROR,
	        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
	         errmsg("fencing.acquire() cannot wait in a %s transaction",
	                IsolationIsSerializable() ? "SERIALIZABLE" : "REPEATABLE READ"),
	         errdetail("The transaction reads from one snapshot, in which the lease would never "
	                   "be released."),
	         errhint("Wait in a READ COMMITTED transaction, or call fencing.acquire() without "
	                 "wait.")));
}

[[noreturn]] void report_lock_timeout(const char *resource)
{
	ereport(ERROR, (errcode(ERRCODE_LOCK_NOT_AVAILABLE),
	                errmsg("canceling the wait for the lease on resource \"%s\" due to lock "
	                       "timeout",
	                       resource),
	                errdetail("lock_timeout is %d ms.", LockTimeout)));
	pg_unreachable();
}

/* Milliseconds from `now` to `then`, rounded up, at least 1. */
long ms_until(TimestampTz now, TimestampTz then)
{
	if (then <= now)
		return 1;
	int64 diff = then - now; /* no overflow: `then` may be infinity (the maximum), `now` is > 0 */
	int64 ms = diff / 1000 + (diff % 1000 != 0 ? 1 : 0);
	return static_cast<long>(Max(Min(ms, int64{3600000}), int64{1}));
}

/*
 * One grant attempt in a subtransaction of its own: kept (released into the
 * caller's) when granted, rolled back otherwise, which also lets go of the
 * row lock the attempt took on a held lease.  An error rolls it back too,
 * then goes on: the caller's exception handler (a PL/pgSQL block, say) then
 * ends its own subtransaction, not this one.
 *
 * The resource's row may be locked by another open transaction (a try's
 * uncommitted grant, a renewal, a prepared transaction): the attempt waits
 * for that lock no longer than the wait lasts, by lock_timeout set for the
 * attempt alone to what is left of it (or of the caller's lock_timeout, if
 * that ends first: its 55P03 then goes on).  A lock wait that the wait's end
 * stopped is no grant (0), and the caller sees the wait passed.
 */
int64 attempt_grant_until(const char *resource, const char *holder, Datum ttl, long lock_ms,
                          bool wait_ends_first, TimestampTz wait_end)
{
	MemoryContext context = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile int64 token = 0;
	BeginInternalSubTransaction(nullptr);
	MemoryContextSwitchTo(context);
	PG_TRY();
	{
		int nest = NewGUCNestLevel();
		(void)set_config_option("lock_timeout", psprintf("%ld", lock_ms), PGC_USERSET,
		                        PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
		token = grant_if_free(resource, holder, ttl);
		AtEOXact_GUC(true, nest);
		if (token != 0)
			ReleaseCurrentSubTransaction();
		else
			RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(context);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(context);
		ErrorData *error = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(context);
		CurrentResourceOwner = owner;
		if (!(wait_ends_first && error->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE &&
		      GetCurrentTimestamp() >= wait_end))
			ReThrowError(error);
		FreeErrorData(error);
	}
	PG_END_TRY();
	return token;
}

int64 attempt_grant(const char *resource, const char *holder, Datum ttl, TimestampTz deadline,
                    TimestampTz lock_deadline)
{
	bool wait_ends_first = lock_deadline == 0 || deadline <= lock_deadline;
	TimestampTz until = wait_ends_first ? deadline : lock_deadline;
	return attempt_grant_until(resource, holder, ttl, ms_until(GetCurrentTimestamp(), until),
	                           wait_ends_first, deadline);
}

/* What a waiter does next: attempt the grant, or sleep until `wake_at`. */
struct Step {
	bool attempt;
	TimestampTz wake_at;
};
FENCING_PLAIN_DATA(Step);

/*
 * Looks at the lease: attempt if it is free (unless an attempt just failed
 * on it: then 1 ms later, the commit of the grant that beat us is near),
 * else sleep until its expiry or `deadline`.
 */
Step next_step(const char *resource, const char *holder, TimestampTz deadline, bool just_failed)
{
	LiveLease lease = read_live_lease(resource, holder);
	if (!lease.live)
		return just_failed ? Step{false, Min(deadline, GetCurrentTimestamp() + 1000)}
		                   : Step{true, deadline};
	/* The server's clock passes expires_at in this microsecond or the next. */
	return Step{false, Min(deadline, lease.expires_at + 1)};
}

/* The wait in the queue: the token, or 0 when `deadline` passed. */
int64 wait_in_queue(const char *resource, const char *holder, Datum ttl, TimestampTz deadline,
                    TimestampTz lock_deadline, QueuePlace *place)
{
	volatile int64 token = 0;
	PG_TRY();
	{
		bool just_failed = false;
		for (;;) {
			/* First, so that a wakeup after the look below is not lost. */
			prepare_queue_sleep(place);
			TimestampTz wake_at = deadline;
			if (first_in_queue(place)) {
				Step step = next_step(resource, holder, deadline, just_failed);
				if (step.attempt) {
					token = attempt_grant(resource, holder, ttl, deadline, lock_deadline);
					if (token != 0)
						break;
					just_failed = true;
					continue;
				}
				wake_at = step.wake_at;
			}
			just_failed = false;
			TimestampTz now = GetCurrentTimestamp();
			if (lock_deadline != 0 && now >= lock_deadline)
				report_lock_timeout(resource);
			if (now >= deadline)
				break;
			if (lock_deadline != 0)
				wake_at = Min(wake_at, lock_deadline);
			queue_sleep(place, ms_until(now, wake_at));
		}
	}
	PG_CATCH();
	{
		leave_queue(place);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (token != 0)
		hold_place_until_commit(place);
	else
		leave_queue(place);
	return token;
}

/* The wait without the queue (not preloaded): polls with a backoff. */
int64 wait_polling(const char *resource, const char *holder, Datum ttl, TimestampTz deadline,
                   TimestampTz lock_deadline)
{
	long backoff = first_backoff_ms;
	bool just_failed = false;
	for (;;) {
		Step step = next_step(resource, holder, deadline, just_failed);
		if (step.attempt) {
			int64 token = attempt_grant(resource, holder, ttl, deadline, lock_deadline);
			if (token != 0)
				return token;
			just_failed = true;
			continue;
		}
		just_failed = false;
		TimestampTz now = GetCurrentTimestamp();
		if (lock_deadline != 0 && now >= lock_deadline)
			report_lock_timeout(resource);
		if (now >= deadline)
			return 0;
		TimestampTz wake_at = Min(step.wake_at, now + backoff * 1000);
		if (lock_deadline != 0)
			wake_at = Min(wake_at, lock_deadline);
		(void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
		                ms_until(now, wake_at), lease_wait_event());
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		backoff = Min(backoff * 2, last_backoff_ms);
	}
}

} // namespace

/*
 * acquire(resource, holder, ttl[, wait]): a new token if the lease is (or,
 * waiting, becomes) free, else NULL.  0.3.0's objects call it with three
 * arguments.
 */
FENCING_FUNCTION(acquire)
{
	char *resource = require_name(fcinfo, 0, "resource");
	char *holder = require_name(fcinfo, 1, "holder");
	Datum ttl = require_ttl(fcinfo, 2);
	TimestampTz start = GetCurrentTimestamp();
	TimestampTz deadline = 0;
	bool waiting = wait_until(fcinfo, start, &deadline);
	uint64 key = 0;
	if (queue_available())
		key = queue_key(resource);

	if (!waiting) {
		/* A try does not pass those who wait. */
		if (queue_available() && anyone_queued(key)) {
			(void)refused_as_own(resource, holder);
			count_acquire(resource, 0, ttl, false, start);
			PG_RETURN_NULL();
		}
		int64 token = grant_if_free(resource, holder, ttl);
		count_acquire(resource, token, ttl, false, start);
		if (token != 0)
			PG_RETURN_INT64(token);
		(void)refused_as_own(resource, holder);
		PG_RETURN_NULL();
	}

	require_fresh_snapshots();
	/* Refused now (25006), not after a wait that could never end in a grant. */
	PreventCommandIfReadOnly("fencing.acquire() with wait");
	PreventCommandDuringRecovery("fencing.acquire() with wait");
	if (refused_as_own(resource, holder)) {
		count_acquire(resource, 0, ttl, true, start);
		PG_RETURN_NULL();
	}
	TimestampTz lock_deadline = LockTimeout > 0 ? start + int64{LockTimeout} * 1000 : 0;
	QueuePlace place;
	int64 token = queue_available() && join_queue(key, &place)
	                  ? wait_in_queue(resource, holder, ttl, deadline, lock_deadline, &place)
	                  : wait_polling(resource, holder, ttl, deadline, lock_deadline);
	count_acquire(resource, token, ttl, true, start);
	if (token == 0)
		PG_RETURN_NULL();
	PG_RETURN_INT64(token);
}
