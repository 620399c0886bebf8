/*
 * fencing.acquire / renew / release: leases with a TTL judged by the database
 * server's clock at the moment of the call (clock_timestamp()), with the
 * semantics of Redis' SET NX PX + INCR.
 */
#include "base/arguments.hpp"
#include "base/compat.hpp"
#include "legacy/leases_0_2_0.hpp"
#include "legacy/helpers_0_3_0.hpp"
#include "legacy/leases_0_3_0.hpp"
#include "leases/lease_queue.hpp"
#include "leases/leases.hpp"
#include "leases/renew_memory.hpp"
#include "leases/resources.hpp"
#include "reporting/lease_stats.hpp"
#include "base/spi.hpp"
#include "base/token_compare.hpp"
#include "state/lease_grace.hpp"
#include "state/token_issue.hpp"

extern "C" {
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "storage/proc.h"
#include "utils/builtins.h"
}

using namespace fencing;

namespace
{

/*
 * renew: the new expiry from one reading of the clock; grace_until and the
 * epoch kept when the new expiry stays within it and the flush may be
 * skipped ($5) - a row of an earlier epoch stays held until its grace_until,
 * also against the old primary still renewing it after a promotion - else
 * grace_until advanced to the new expiry + the grace ($6), in this epoch.
 * Returns whether it advanced: then the commit must be durable.  The lease
 * held by (holder, token) must be live, held until its expiry or its
 * grace_until (state/lease_grace.hpp), for renew and release.
 */
Statement renew_statement = {
    "UPDATE fencing.resources r SET expires_at = c.now + $4,"
    " epoch = CASE WHEN $5 AND c.now + $4 <= r.grace_until THEN r.epoch"
    " ELSE fencing_internal._lease_epoch() END,"
    " grace_until = CASE WHEN $5 AND c.now + $4 <= r.grace_until THEN r.grace_until"
    " ELSE c.now + $4 + $6 END"
    " FROM (SELECT pg_catalog.clock_timestamp() AS now) c"
    " WHERE r.resource = $1 AND r.holder = $2 AND r.token = $3 AND NOT r.released"
    " AND GREATEST(fencing_internal._lease_expiry(r.resource, r.holder, r.token, r.epoch,"
    " r.expires_at), CASE WHEN r.epoch OPERATOR(pg_catalog.<>) fencing_internal._lease_epoch()"
    " THEN r.grace_until END) > c.now"
    " RETURNING r.grace_until = c.now + $4 + $6",
    6,
    {TEXTOID, TEXTOID, INT8OID, INTERVALOID, BOOLOID, INTERVALOID}};

Statement release_statement = {
    "UPDATE fencing.resources r SET released = true"
    " FROM (SELECT pg_catalog.clock_timestamp() AS now) c"
    " WHERE r.resource = $1 AND r.holder = $2 AND r.token = $3 AND NOT r.released"
    " AND GREATEST(fencing_internal._lease_expiry(r.resource, r.holder, r.token, r.epoch,"
    " r.expires_at), CASE WHEN r.epoch OPERATOR(pg_catalog.<>) fencing_internal._lease_epoch()"
    " THEN r.grace_until END) > c.now",
    3,
    {TEXTOID, TEXTOID, INT8OID}};

/*
 * The grant in one statement, on a resource row that exists and holds no live
 * lease: the UPDATE locks the row, and the token is issued in its SET list,
 * after the row passed the WHERE on its newest version (a concurrent change
 * makes the executor check the newest version again and compute the SET list
 * anew, with that version's token as the floor), so it is above the
 * resource's last token and floor when the row is written.  Every name
 * qualified, every operator OPERATOR(pg_catalog.x), although the search_path
 * is pinned.  No row: the resource has no row yet or holds a live lease;
 * acquire() then takes the path that locks (and creates) the row first.
 */
Statement grant_free_statement = {
    "UPDATE fencing.resources r"
    " SET holder = $2, released = false,"
    " token = fencing_internal._grant_token(pg_catalog.int8larger(COALESCE(r.token, 0),"
    "  COALESCE((SELECT pg_catalog.max(f.token) FROM fencing.resource_floors f"
    "   WHERE pg_catalog.starts_with($1, f.prefix)), 0)), $4),"
    " (granted_at, expires_at, grace_until, epoch) = (SELECT c.now, c.now OPERATOR(pg_catalog.+) "
    "$3,"
    " c.now OPERATOR(pg_catalog.+) $3 OPERATOR(pg_catalog.+) $5,"
    " fencing_internal._lease_epoch() FROM (SELECT pg_catalog.clock_timestamp() AS now) c)"
    " WHERE r.resource OPERATOR(pg_catalog.=) $1"
    " AND (r.released OR r.expires_at IS NULL"
    "  OR pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>=)"
    " GREATEST(fencing_internal._lease_expiry(r.resource, r.holder, r.token, r.epoch,"
    " r.expires_at), CASE WHEN r.epoch OPERATOR(pg_catalog.<>) fencing_internal._lease_epoch()"
    " THEN r.grace_until END))"
    " RETURNING r.token",
    5,
    {TEXTOID, TEXTOID, INTERVALOID, INT8OID, INTERVALOID}};

/* The grant after lock_lease() found the lease free (a new row, a live lease that ended meanwhile).
 */
Statement grant_statement = {
    "UPDATE fencing.resources"
    " SET holder = $2, token = $3, released = false, epoch = fencing_internal._lease_epoch(),"
    " (granted_at, expires_at, grace_until) = (SELECT now, now + $4, now + $4 + $5 FROM"
    " (SELECT pg_catalog.clock_timestamp() AS now) c)"
    " WHERE resource = $1",
    5,
    {TEXTOID, TEXTOID, INT8OID, INTERVALOID, INTERVALOID}};

/*
 * The local transaction in which acquire() runs grant_free_sql, or 0:
 * _grant_token() issues tokens for that statement only.  An error ends the
 * transaction (or subtransaction), and with it the permission.
 */
LocalTransactionId granting = InvalidLocalTransactionId;
SubTransactionId granting_in = InvalidSubTransactionId;

/*
 * A random number, new for each run of grant_free_sql and passed to
 * _grant_token() as a parameter of that statement only: other code that runs
 * inside the UPDATE in the same transaction and subtransaction (a trigger on
 * fencing.resources or fencing.token_timelines, which its owner may add, and
 * whose PL/pgSQL expressions may run without an executor of their own) cannot
 * read it, so it cannot issue tokens.  One wrong guess fails the statement,
 * and catching that error takes a subtransaction, which is refused anyway.
 */
int64 grant_nonce = 0;

} // namespace

/*
 * _grant_token(floor, nonce) RETURNS bigint: a new token above floor, for
 * acquire()'s UPDATE only, which passes the nonce (refused anywhere else,
 * and revoked from PUBLIC).
 */
FENCING_FUNCTION(grant_token)
{
	if (granting == InvalidLocalTransactionId || granting != local_transaction_id() ||
	    granting_in != GetCurrentSubTransactionId() || PG_ARGISNULL(0) || PG_ARGISNULL(1) ||
	    grant_nonce == 0 || PG_GETARG_INT64(1) != grant_nonce)
		ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
		                errmsg("fencing_internal._grant_token() is for fencing.acquire() only"),
		                errhint("Call fencing.acquire().")));
	int64 floor = PG_GETARG_INT64(0);
	int64 token = with_spi([floor]() {
		/*
		 * Its errors (tokens used up, a canceled wait for the standbys) read as
		 * acquire()'s own, without the internal UPDATE as their context; an
		 * error restores the stack.
		 */
		ErrorContextCallback *context = error_context_stack;
		error_context_stack = nullptr;
		int64 issued = issue_token(floor, false);
		error_context_stack = context;
		return issued;
	});
	PG_RETURN_INT64(token);
}

namespace
{

/* What acquire() got: a token, granted in one statement or after locking the row; or a live lease.
 */
struct Grant {
	int64 token;
	bool in_one_statement;
	bool live;
};
FENCING_PLAIN_DATA(Grant);

/* acquire()'s work with SPI connected. */
Grant grant_lease(const char *resource, const char *holder, Datum ttl)
{
	Datum name = CStringGetTextDatum(resource);
	Datum holder_text = CStringGetTextDatum(holder);
	if (!grants_lock_first_0_2_0()) {
		/* As below, before anything is locked or issued. */
		require_grant_confirmation();
		Statement *grant_free = for_installed_release(&grant_free_statement, &grant_free_0_3_0);
		int64 nonce = 0;
		while (nonce == 0)
			if (!pg_strong_random(&nonce, sizeof nonce))
				elog(ERROR, "fencing: could not generate random bytes");
		Datum values[5] = {name, holder_text, ttl, Int64GetDatum(nonce), lease_grace_interval()};
		granting = local_transaction_id();
		granting_in = GetCurrentSubTransactionId();
		grant_nonce = nonce;
		run_statement(grant_free, values, SPI_OK_UPDATE_RETURNING);
		granting = InvalidLocalTransactionId;
		grant_nonce = 0;
		if (SPI_processed == 1) {
			bool isnull;
			return Grant{DatumGetInt64(result_value(0, 1, &isnull)), true, false};
		}
	}
	Lease lease = lock_lease(resource);
	if (lease.live)
		return Grant{0, false, true};
	require_grant_confirmation();
	int64 token = issue_token(lease.token);
	Datum values[5] = {name, holder_text, Int64GetDatum(token), ttl, lease_grace_interval()};
	run_statement(for_installed_release(&grant_statement, &grant_0_3_0), values, SPI_OK_UPDATE);
	return Grant{token, false, false};
}

} // namespace

/*
 * One attempt to grant, for acquire() (acquire.cpp): a new token if no live
 * lease holds the resource, else 0 (the resource's row then stays locked
 * until the (sub)transaction ends).
 */
int64 fencing::grant_if_free(const char *resource, const char *holder, Datum ttl)
{
	Grant grant =
	    with_spi([resource, holder, ttl]() { return grant_lease(resource, holder, ttl); });
	if (grant.live)
		return 0;
	if (grant.in_one_statement)
		note_grant(grant.token);
	require_durable_commit();
	return grant.token;
}

/*
 * renew(resource, holder, token, ttl): extends a live lease; false if it was
 * lost.  Within the row's grace_until its commit need not be flushed.
 */
FENCING_FUNCTION(renew)
{
	char *resource = require_name(fcinfo, 0, "resource");
	char *holder = require_name(fcinfo, 1, "holder");
	int64 token = require_token(PG_GETARG_DATUM(2), PG_ARGISNULL(2), "token");
	Datum ttl = require_ttl(fcinfo, 3);
	require_grant_confirmation();
	bool flush_optional = lease_flush_optional() && lease_horizons_confirmed();
	TimestampTz in_memory;
	if (flush_optional && !lease_rows_without_grace() &&
	    renew_in_memory(resource, holder, token, ttl, &in_memory)) {
		count_renewal(resource, token, ttl, true);
		PG_RETURN_BOOL(true);
	}
	Datum values[6] = {CStringGetTextDatum(resource), CStringGetTextDatum(holder),
	                   Int64GetDatum(token),          ttl,
	                   BoolGetDatum(flush_optional),  lease_grace_interval()};
	note_lease_change_start();
	struct Renewal {
		bool held;
		bool advanced;
	};
	Renewal renewal = with_spi([&]() {
		run_statement(for_installed_release(&renew_statement, &renew_0_3_0), values,
		              SPI_OK_UPDATE_RETURNING);
		bool isnull = true;
		bool advanced = SPI_processed == 1 && DatumGetBool(result_value(0, 1, &isnull));
		return Renewal{SPI_processed == 1, advanced || isnull};
	});
	if (renewal.held && !renewal.advanced && flush_optional)
		allow_commit_without_flush();
	else
		require_durable_commit();
	count_renewal(resource, token, ttl, renewal.held);
	PG_RETURN_BOOL(renewal.held);
}

/*
 * release(resource, holder, token): ends a live lease; false if it was lost.
 * Its commit need not be flushed: a release that a crash loses keeps the
 * lease only until its grace_until.
 */
FENCING_FUNCTION(release)
{
	char *resource = require_name(fcinfo, 0, "resource");
	char *holder = require_name(fcinfo, 1, "holder");
	int64 token = require_token(PG_GETARG_DATUM(2), PG_ARGISNULL(2), "token");
	Datum values[3] = {CStringGetTextDatum(resource), CStringGetTextDatum(holder),
	                   Int64GetDatum(token)};
	note_lease_change_start();
	bool held = with_spi([&]() {
		run_statement(for_installed_release(&release_statement, &release_0_3_0), values,
		              SPI_OK_UPDATE);
		return SPI_processed == 1;
	});
	if (lease_flush_optional() && !lease_rows_without_grace())
		allow_commit_without_flush();
	else
		require_durable_commit();
	count_release(resource, token, held);
	if (held)
		wake_queue_at_commit(resource);
	PG_RETURN_BOOL(held);
}
