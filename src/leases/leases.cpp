/*
 * fencing.acquire / renew / release: leases with a TTL judged by the database
 * server's clock at the moment of the call (clock_timestamp()), with the
 * semantics of Redis' SET NX PX + INCR.
 */
#include "base/arguments.hpp"
#include "base/compat.hpp"
#include "legacy/helpers_0_3_0.hpp"
#include "legacy/leases_0_2_0.hpp"
#include "leases/lease_queue.hpp"
#include "leases/leases.hpp"
#include "leases/resources.hpp"
#include "reporting/lease_stats.hpp"
#include "base/spi.hpp"
#include "base/token_compare.hpp"
#include "state/token_issue.hpp"

extern "C" {
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
}

using namespace fencing;

namespace
{

SPIPlanPtr grant_plan = nullptr;
SPIPlanPtr renew_plan = nullptr;
SPIPlanPtr release_plan = nullptr;

/* The lease held by (holder, token) must be live for renew and release. */
constexpr const char *held_lease = " WHERE resource = $1 AND holder = $2 AND token = $3"
                                   " AND NOT released"
                                   " AND expires_at > pg_catalog.clock_timestamp()";

/* Runs renew's or release's UPDATE; true if the lease was still held. */
bool update_held_lease(SPIPlanPtr *cache, const char *set, Datum *values, int nargs)
{
	Oid types[4] = {TEXTOID, TEXTOID, INT8OID, INTERVALOID};
	bool held = with_spi([&]() {
		SPIPlanPtr plan = kept_plan(
		    cache, psprintf("UPDATE fencing.resources SET %s%s", set, held_lease), nargs, types);
		run_plan(plan, values, nullptr, false, SPI_OK_UPDATE);
		return SPI_processed == 1;
	});
	require_durable_commit();
	return held;
}

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
constexpr const char *grant_free_sql =
    "UPDATE fencing.resources r"
    " SET holder = $2, released = false,"
    " token = %s._grant_token(pg_catalog.int8larger(COALESCE(r.token, 0),"
    "  COALESCE((SELECT pg_catalog.max(f.token) FROM fencing.resource_floors f"
    "   WHERE pg_catalog.starts_with($1, f.prefix)), 0)), $4),"
    " (granted_at, expires_at) = (SELECT c.now, c.now OPERATOR(pg_catalog.+) $3 FROM"
    "  (SELECT pg_catalog.clock_timestamp() AS now) c)"
    " WHERE r.resource OPERATOR(pg_catalog.=) $1"
    " AND (r.released OR r.expires_at IS NULL"
    "  OR r.expires_at OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp())"
    " RETURNING r.token";
SPIPlanPtr grant_free_plan = nullptr;
const char *grant_free_schema = nullptr; /* the helpers' schema grant_free_plan names */
char *grant_free_text = nullptr;         /* grant_free_sql for it, in TopMemoryContext */

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
		Oid types[4] = {TEXTOID, TEXTOID, INTERVALOID, INT8OID};
		/*
		 * _grant_token() is named in the statement's text, which a plan made
		 * invalid (by the update that moves it) is analysed from again.
		 */
		const char *schema = helper_schema();
		if (schema != grant_free_schema) {
			if (grant_free_plan != nullptr)
				SPI_freeplan(grant_free_plan);
			grant_free_plan = nullptr;
			if (grant_free_text != nullptr)
				pfree(grant_free_text);
			grant_free_text =
			    MemoryContextStrdup(TopMemoryContext, psprintf(grant_free_sql, schema));
			grant_free_schema = schema;
		}
		SPIPlanPtr plan = kept_plan(&grant_free_plan, grant_free_text, 4, types);
		int64 nonce = 0;
		while (nonce == 0)
			if (!pg_strong_random(&nonce, sizeof nonce))
				elog(ERROR, "fencing: could not generate random bytes");
		Datum values[4] = {name, holder_text, ttl, Int64GetDatum(nonce)};
		granting = local_transaction_id();
		granting_in = GetCurrentSubTransactionId();
		grant_nonce = nonce;
		run_plan(plan, values, nullptr, false, SPI_OK_UPDATE_RETURNING);
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
	Oid types[4] = {TEXTOID, TEXTOID, INT8OID, INTERVALOID};
	SPIPlanPtr plan = kept_plan(&grant_plan,
	                            "UPDATE fencing.resources"
	                            " SET holder = $2, token = $3, released = false,"
	                            " (granted_at, expires_at) = (SELECT now, now + $4 FROM"
	                            " (SELECT pg_catalog.clock_timestamp() AS now) c)"
	                            " WHERE resource = $1",
	                            4, types);
	Datum values[4] = {name, holder_text, Int64GetDatum(token), ttl};
	run_plan(plan, values, nullptr, false, SPI_OK_UPDATE);
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

/* renew(resource, holder, token, ttl): extends a live lease; false if it was lost. */
FENCING_FUNCTION(renew)
{
	char *resource = require_name(fcinfo, 0, "resource");
	char *holder = require_name(fcinfo, 1, "holder");
	int64 token = require_token(PG_GETARG_DATUM(2), PG_ARGISNULL(2), "token");
	Datum ttl = require_ttl(fcinfo, 3);
	require_grant_confirmation();
	Datum values[4] = {CStringGetTextDatum(resource), CStringGetTextDatum(holder),
	                   Int64GetDatum(token), ttl};
	bool renewed =
	    update_held_lease(&renew_plan, "expires_at = pg_catalog.clock_timestamp() + $4", values, 4);
	count_renewal(resource, token, ttl, renewed);
	PG_RETURN_BOOL(renewed);
}

/* release(resource, holder, token): ends a live lease; false if it was lost. */
FENCING_FUNCTION(release)
{
	char *resource = require_name(fcinfo, 0, "resource");
	char *holder = require_name(fcinfo, 1, "holder");
	int64 token = require_token(PG_GETARG_DATUM(2), PG_ARGISNULL(2), "token");
	Datum values[3] = {CStringGetTextDatum(resource), CStringGetTextDatum(holder),
	                   Int64GetDatum(token)};
	bool held = update_held_lease(&release_plan, "released = true", values, 3);
	count_release(resource, token, held);
	if (held)
		wake_queue_at_commit(resource);
	PG_RETURN_BOOL(held);
}
