/*
 * Argument checks for acquire/renew/release/fence.
 */
#include "base/arguments.hpp"

extern "C" {
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/timestamp.h"
}

namespace fencing
{

char *require_name(FunctionCallInfo fcinfo, int arg, const char *what)
{
	if (PG_ARGISNULL(arg))
		ereport(ERROR,
		        (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("%s must not be null", what)));
	char *value = text_to_cstring(PG_GETARG_TEXT_PP(arg));
	if (value[0] == '\0')
		ereport(ERROR,
		        (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s must not be empty", what)));
	return value;
}

Datum require_ttl(FunctionCallInfo fcinfo, int arg)
{
	if (PG_ARGISNULL(arg))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("ttl must not be null")));
	Datum ttl = PG_GETARG_DATUM(arg);
	Datum zero = DirectFunctionCall3(interval_in, CStringGetDatum("0"),
	                                 ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1));
	Datum year = DirectFunctionCall3(interval_in, CStringGetDatum("366 days"),
	                                 ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1));
	const char *text = DatumGetCString(DirectFunctionCall1(interval_out, ttl));
	/* Months and days make the sign of '1 month -29 days' depend on the date: ask the clock. */
	Datum now = TimestampTzGetDatum(GetCurrentTimestamp());
	Datum expiry = DirectFunctionCall2(timestamptz_pl_interval, now, ttl);
	if (DatumGetInt32(DirectFunctionCall2(interval_cmp, ttl, zero)) <= 0 ||
	    DatumGetTimestampTz(expiry) <= DatumGetTimestampTz(now))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		                errmsg("ttl must be positive, got \"%s\"", text)));
	if (DatumGetInt32(DirectFunctionCall2(interval_cmp, ttl, year)) > 0)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		                errmsg("ttl must be at most 366 days, got \"%s\"", text),
		                errhint("Leases are renewed while work goes on; use a short TTL and "
		                        "fencing.renew().")));
	return ttl;
}

} // namespace fencing
