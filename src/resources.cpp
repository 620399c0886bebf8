/*
 * Row locking for leases and fences: SELECT ... FOR UPDATE, and on a new
 * resource INSERT ... ON CONFLICT DO NOTHING first (a concurrent creator wins,
 * we wait for it, then lock its row).
 */
#include "resources.hpp"
#include "spi.hpp"

extern "C" {
#include "catalog/pg_type.h"
#include "utils/builtins.h"
}

namespace fencing {

namespace {

SPIPlanPtr select_plan = nullptr;
SPIPlanPtr create_plan = nullptr;

bool select_for_update(Datum name, Resource *r)
{
	Oid types[1] = {TEXTOID};
	SPIPlanPtr plan = kept_plan(&select_plan,
	                            "SELECT token IS NOT NULL,"
	                            " NOT released AND expires_at > pg_catalog.clock_timestamp(),"
	                            " token, fence_token"
	                            " FROM fencing.resources WHERE resource = $1 FOR UPDATE",
	                            1, types);
	run_plan(plan, &name, nullptr, false, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return false;
	bool isnull;
	r->leased = DatumGetBool(result_value(0, 1, &isnull));
	Datum live = result_value(0, 2, &isnull);
	r->live = !isnull && DatumGetBool(live);
	Datum token = result_value(0, 3, &isnull);
	r->token = isnull ? 0 : DatumGetInt64(token);
	r->fence_mark = DatumGetInt64(result_value(0, 4, &isnull));
	return true;
}

} // namespace

Resource lock_resource(const char *resource)
{
	Datum name = CStringGetTextDatum(resource);
	Resource r;
	if (select_for_update(name, &r))
		return r;
	Oid types[1] = {TEXTOID};
	SPIPlanPtr plan = kept_plan(&create_plan,
	                            "INSERT INTO fencing.resources (resource) VALUES ($1)"
	                            " ON CONFLICT (resource) DO NOTHING",
	                            1, types);
	run_plan(plan, &name, nullptr, false, SPI_OK_INSERT);
	if (!select_for_update(name, &r))
		ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
		                errmsg("could not serialize access due to concurrent creation of "
		                       "resource \"%s\"",
		                       resource)));
	return r;
}

} // namespace fencing
