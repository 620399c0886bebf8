/*
 * fencing.fence(resource, token): compare and advance a resource's high-water
 * mark, holding the resource's row lock until the transaction ends, so that
 * every write of the transaction is fenced.
 */
#include "base/arguments.hpp"
#include "reporting/rejections.hpp"
#include "leases/resources.hpp"
#include "base/spi.hpp"
#include "reporting/stats.hpp"
#include "state/token_issue.hpp"

extern "C" {
#include "catalog/pg_type.h"
#include "utils/builtins.h"
}

using namespace fencing;

namespace
{
SPIPlanPtr advance_plan = nullptr;
}

FENCING_FUNCTION(fence)
{
	char *resource = require_name(fcinfo, 0, "resource");
	int64 token = require_token(PG_GETARG_DATUM(1), PG_ARGISNULL(1), "token");

	int64 mark = with_spi([resource, token]() {
		int64 held = lock_fence(resource);
		if (!token_accepts(Mode::monotonic, held, token))
			report_stale_resource(resource, token, held);
		Oid types[2] = {TEXTOID, INT8OID};
		SPIPlanPtr plan = kept_plan(
		    &advance_plan, "UPDATE fencing.fences SET token = $2 WHERE resource = $1", 2, types);
		Datum values[2] = {CStringGetTextDatum(resource), Int64GetDatum(token)};
		run_plan(plan, values, nullptr, false, SPI_OK_UPDATE);
		return held;
	});
	require_durable_commit();
	count_accepted(resource_counter(resource));
	PG_RETURN_INT64(mark);
}
