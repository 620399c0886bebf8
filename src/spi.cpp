/*
 * SPI helpers shared by the marks table, the lease manager and fences.
 */
#include "spi.hpp"

namespace fencing
{

SPIPlanPtr kept_plan(SPIPlanPtr *cache, const char *sql, int nargs, Oid *types)
{
	if (*cache != nullptr && SPI_plan_is_valid(*cache))
		return *cache;
	if (*cache != nullptr) {
		SPI_freeplan(*cache);
		*cache = nullptr;
	}
	/*
	 * A generic plan from the first execution on: these statements look rows
	 * up by key, which a generic plan does as well as a custom one, and the
	 * plan cache would otherwise plan again on every call whenever the custom
	 * plan's estimate looks cheaper (relid = ANY($1) does): with a mark
	 * looked up for every inserted row, planning was most of a bulk INSERT.
	 */
	SPIPlanPtr plan = SPI_prepare_cursor(sql, nargs, types, CURSOR_OPT_GENERIC_PLAN);
	if (plan == nullptr)
		elog(ERROR, "fencing: SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "fencing: SPI_keepplan failed");
	*cache = plan;
	return plan;
}

void run_plan(SPIPlanPtr plan, Datum *values, const char *nulls, bool read_only, int expected)
{
	int rc = SPI_execute_plan(plan, values, nulls, read_only, 0);
	if (rc != expected)
		elog(ERROR, "fencing: internal statement failed: %s", SPI_result_code_string(rc));
}

Datum result_value(uint64 row, int column, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, column, isnull);
}

} // namespace fencing
