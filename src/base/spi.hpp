/*
 * Plans of the extension's own SQL, prepared once per backend.
 */
#pragma once

#include "base/boundary.hpp"

#include <type_traits>

extern "C" {
#include "executor/spi.h"
#include "utils/snapshot.h"
}

namespace fencing
{

/*
 * Runs body() between SPI_connect() (SPI_connect_ext(options)) and
 * SPI_finish(), and returns what it returns: the two stay paired in one
 * place.  No destructor does it: on an error the (sub)transaction's cleanup
 * releases the connection (AtEOXact_SPI), and nothing else is to be undone.
 */
template <typename Body> auto with_spi(Body body, int options = 0) -> decltype(body())
{
	if (SPI_connect_ext(options) != SPI_OK_CONNECT)
		elog(ERROR, "fencing: SPI_connect failed");
	if constexpr (std::is_void_v<decltype(body())>) {
		body();
		SPI_finish();
	} else {
		auto result = body();
		SPI_finish();
		return result;
	}
}

/*
 * The plan kept in *cache for `sql`, prepared now if there is none or the
 * objects it uses changed since (SPI_plan_is_valid).  Call inside SPI_connect.
 */
SPIPlanPtr kept_plan(SPIPlanPtr *cache, const char *sql, int nargs, Oid *types);

/* Runs a kept plan; errors unless it returns `expected` (SPI_OK_...). */
void run_plan(SPIPlanPtr plan, Datum *values, const char *nulls, bool read_only, int expected);

/*
 * Runs the kept plan for `sql` as the extension owner, with row security not
 * forced (callers need no rights on the extension's tables, not even USAGE
 * on schema fencing), on `snapshot` (InvalidSnapshot: the usual one); a write
 * fires its AFTER triggers within.  Connects SPI and returns SPI's code; the
 * caller reads the result and calls SPI_finish().  Only for SQL on the
 * extension's own tables, every name qualified.
 */
int run_as_owner(SPIPlanPtr *cache, const char *sql, int nargs, Oid *types, Datum *values,
                 Snapshot snapshot, bool read_only, const char *nulls = nullptr);

/*
 * The same, prepared for this call only, as the extension owner (with
 * search_path pg_catalog, pg_temp: the SQL may name operators unqualified)
 * if `as_owner`, else as the current user.  run_as_owner() keeps the
 * caller's search_path, for speed on the guard's path: its SQL names every
 * function and operator with its schema.
 */
int run_sql(const char *sql, int nargs, Oid *types, Datum *values, Snapshot snapshot,
            bool read_only, bool as_owner);

/*
 * The mark (a bigint) a one-column query of the extension's marks or floors
 * returns, run as its owner on the latest committed state; false if none or
 * NULL.
 */
bool read_mark_as_owner(SPIPlanPtr *cache, const char *sql, int nargs, Oid *types, Datum *values,
                        int64 *mark);

/* Runs an upsert that raises a mark or a floor (never lowering it), as the extension owner. */
void raise_mark_as_owner(SPIPlanPtr *cache, const char *sql, int nargs, Oid *types, Datum *values);

/* A list of relation OIDs as a regclass[] parameter. */
Datum relid_array(List *relids);

/* Column `column` (1-based) of row `row` of the last result, and whether it is NULL. */
Datum result_value(uint64 row, int column, bool *isnull);

} // namespace fencing
