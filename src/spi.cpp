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
	SPIPlanPtr plan = SPI_prepare(sql, nargs, types);
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
