/*
 * fencing.acquire / renew / release: leases with a TTL judged by the database
 * server's clock at the moment of the call (clock_timestamp()), with the
 * semantics of Redis' SET NX PX + INCR.
 */
#include "arguments.hpp"
#include "resources.hpp"
#include "spi.hpp"
#include "token.hpp"
#include "tokens.hpp"

extern "C" {
#include "catalog/pg_type.h"
#include "utils/builtins.h"
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
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "fencing: SPI_connect failed");
	SPIPlanPtr plan = kept_plan(
	    cache, psprintf("UPDATE fencing.resources SET %s%s", set, held_lease), nargs, types);
	run_plan(plan, values, nullptr, false, SPI_OK_UPDATE);
	bool held = SPI_processed == 1;
	SPI_finish();
	require_durable_commit();
	return held;
}

} // namespace

/* acquire(resource, holder, ttl): a new token if no live lease holds the resource, else NULL. */
FENCING_FUNCTION(acquire)
{
	char *resource = require_name(fcinfo, 0, "resource");
	char *holder = require_name(fcinfo, 1, "holder");
	Datum ttl = require_ttl(fcinfo, 2);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "fencing: SPI_connect failed");
	Lease lease = lock_lease(resource);
	if (lease.live) {
		SPI_finish();
		PG_RETURN_NULL();
	}
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
	Datum values[4] = {CStringGetTextDatum(resource), CStringGetTextDatum(holder),
	                   Int64GetDatum(token), ttl};
	run_plan(plan, values, nullptr, false, SPI_OK_UPDATE);
	SPI_finish();
	require_durable_commit();
	PG_RETURN_INT64(token);
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
	PG_RETURN_BOOL(update_held_lease(&renew_plan, "expires_at = pg_catalog.clock_timestamp() + $4",
	                                 values, 4));
}

/* release(resource, holder, token): ends a live lease; false if it was lost. */
FENCING_FUNCTION(release)
{
	char *resource = require_name(fcinfo, 0, "resource");
	char *holder = require_name(fcinfo, 1, "holder");
	int64 token = require_token(PG_GETARG_DATUM(2), PG_ARGISNULL(2), "token");
	Datum values[3] = {CStringGetTextDatum(resource), CStringGetTextDatum(holder),
	                   Int64GetDatum(token)};
	PG_RETURN_BOOL(update_held_lease(&release_plan, "released = true", values, 3));
}
