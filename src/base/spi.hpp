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

/*
 * One statement the C++ runs, declared once as a constant: its complete text
 * (every name schema-qualified, nothing assembled at run time), its
 * parameters and their types.  Each release whose objects need another text
 * has a declaration of its own (0.3.0's in src/legacy/), with its own plan:
 * the plans are cached per statement and so per release, and a backend that
 * sees ALTER EXTENSION UPDATE (legacy/installed_release.hpp) simply picks the
 * other declaration.
 */
constexpr int statement_max_args = 6;
struct Statement {
	const char *sql;
	int nargs;
	Oid types[statement_max_args];
	SPIPlanPtr plan = nullptr; /* run_statement(): prepared once per backend (kept_plan) */
};
FENCING_PLAIN_DATA(Statement);

/* The statement's kept plan (kept_plan()).  Call inside SPI_connect. */
SPIPlanPtr prepared(Statement *statement);

/* Runs the statement's kept plan; errors unless it returns `expected` (SPI_OK_...). */
void run_statement(Statement *statement, Datum *values, int expected);

/* Errors ("fencing: WHAT failed: ...") unless SPI's code `rc` is `expected` (SPI_OK_...). */
void expect_result(int rc, int expected, const char *what);

/* Runs a kept plan; errors unless it returns `expected` (SPI_OK_...). */
void run_plan(SPIPlanPtr plan, Datum *values, const char *nulls, bool read_only, int expected);

/*
 * Runs the kept plan for `sql` as the extension owner, with row security not
 * forced (callers need no rights on the extension's tables, not even USAGE
 * on schema fencing), on `snapshot` (InvalidSnapshot: the usual one); a write
 * fires its AFTER triggers within.  Call inside SPI (with_spi); returns
 * SPI's code.  Only for SQL on the extension's own tables, every name
 * qualified.
 */
int execute_as_owner(SPIPlanPtr *cache, const char *sql, int nargs, Oid *types, Datum *values,
                     Snapshot snapshot, bool read_only, const char *nulls = nullptr);

/*
 * The same, prepared for this call only, as the extension owner (with
 * search_path pg_catalog, pg_temp: the SQL may name operators unqualified)
 * if `as_owner`, else as the current user.  execute_as_owner() keeps the
 * caller's search_path, for speed on the guard's path: its SQL names every
 * function and operator with its schema.  Call inside SPI (with_spi).
 */
int execute_sql(const char *sql, int nargs, Oid *types, Datum *values, Snapshot snapshot,
                bool read_only, bool as_owner);

/*
 * execute_as_owner() in a connection of its own: read(rc) reads the result
 * before SPI_finish() and returns what run_as_owner() returns.
 */
template <typename Read>
auto run_as_owner(SPIPlanPtr *cache, const char *sql, int nargs, Oid *types, Datum *values,
                  Snapshot snapshot, bool read_only, Read read) -> decltype(read(0))
{
	return with_spi([&] {
		return read(execute_as_owner(cache, sql, nargs, types, values, snapshot, read_only));
	});
}

/* The same with `nulls` for the parameters (as SPI_execute_plan's). */
template <typename Read>
auto run_as_owner(SPIPlanPtr *cache, const char *sql, int nargs, Oid *types, Datum *values,
                  Snapshot snapshot, bool read_only, const char *nulls, Read read)
    -> decltype(read(0))
{
	return with_spi([&] {
		return read(execute_as_owner(cache, sql, nargs, types, values, snapshot, read_only, nulls));
	});
}

/* execute_sql() in a connection of its own, read(rc) as for run_as_owner(). */
template <typename Read>
auto run_sql(const char *sql, int nargs, Oid *types, Datum *values, Snapshot snapshot,
             bool read_only, bool as_owner, Read read) -> decltype(read(0))
{
	return with_spi([&] {
		return read(execute_sql(sql, nargs, types, values, snapshot, read_only, as_owner));
	});
}

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
