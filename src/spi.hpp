/*
 * Plans of the extension's own SQL, prepared once per backend.
 */
#pragma once

#include "boundary.hpp"

extern "C" {
#include "executor/spi.h"
}

namespace fencing
{

/*
 * The plan kept in *cache for `sql`, prepared now if there is none or the
 * objects it uses changed since (SPI_plan_is_valid).  Call inside SPI_connect.
 */
SPIPlanPtr kept_plan(SPIPlanPtr *cache, const char *sql, int nargs, Oid *types);

/* Runs a kept plan; errors unless it returns `expected` (SPI_OK_...). */
void run_plan(SPIPlanPtr plan, Datum *values, const char *nulls, bool read_only, int expected);

/* Column `column` (1-based) of row `row` of the last result, and whether it is NULL. */
Datum result_value(uint64 row, int column, bool *isnull);

} // namespace fencing
