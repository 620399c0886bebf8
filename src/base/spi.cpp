/*
 * SPI helpers shared by the marks table, the lease manager and fences.
 */
#include "base/spi.hpp"
#include "base/rights.hpp"

extern "C" {
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/snapmgr.h"
}

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

SPIPlanPtr prepared(Statement *statement)
{
	return kept_plan(&statement->plan, statement->sql, statement->nargs, statement->types);
}

void run_statement(Statement *statement, Datum *values, int expected)
{
	run_plan(prepared(statement), values, nullptr, false, expected);
}

void expect_result(int rc, int expected, const char *what)
{
	if (rc != expected)
		elog(ERROR, "fencing: %s failed: %s", what, SPI_result_code_string(rc));
}

void run_plan(SPIPlanPtr plan, Datum *values, const char *nulls, bool read_only, int expected)
{
	int rc = SPI_execute_plan(plan, values, nulls, read_only, 0);
	if (rc != expected)
		elog(ERROR, "fencing: internal statement failed: %s", SPI_result_code_string(rc));
}

/*
 * Writes fire the AFTER triggers a DBA may have put on the extension's tables
 * within the SPI call: queued into the caller's statement, a TRUNCATE's
 * would leak the relation they opened.  An error restores the caller's
 * identity at (sub)transaction abort.
 */
int execute_as_owner(SPIPlanPtr *cache, const char *sql, int nargs, Oid *types, Datum *values,
                     Snapshot snapshot, bool read_only, const char *nulls)
{
	Rights saved = become(extension_owner(), SECURITY_NOFORCE_RLS, false);
	SPIPlanPtr plan = kept_plan(cache, sql, nargs, types);
	int rc = SPI_execute_snapshot(plan, values, nulls, snapshot, InvalidSnapshot, read_only,
	                              !read_only, 1);
	restore(saved);
	return rc;
}

int execute_sql(const char *sql, int nargs, Oid *types, Datum *values, Snapshot snapshot,
                bool read_only, bool as_owner)
{
	Rights saved{};
	if (as_owner)
		saved = become(extension_owner(), SECURITY_NOFORCE_RLS, true);
	SPIPlanPtr plan = SPI_prepare(sql, nargs, types);
	if (plan == nullptr)
		elog(ERROR, "fencing: SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	int rc = SPI_execute_snapshot(plan, values, nullptr, snapshot, InvalidSnapshot, read_only,
	                              !read_only, 0);
	SPI_freeplan(plan);
	if (as_owner)
		restore(saved);
	return rc;
}

Datum relid_array(List *relids)
{
	Datum *values = static_cast<Datum *>(palloc(sizeof(Datum) * (list_length(relids) + 1)));
	int n = 0;
	ListCell *cell;
	foreach (cell, relids)
		values[n++] = ObjectIdGetDatum(lfirst_oid(cell));
	return PointerGetDatum(
	    construct_array(values, n, REGCLASSOID, sizeof(Oid), true, TYPALIGN_INT));
}

Datum result_value(uint64 row, int column, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, column, isnull);
}

bool read_mark_as_owner(SPIPlanPtr *cache, const char *sql, int nargs, Oid *types, Datum *values,
                        int64 *mark)
{
	return run_as_owner(cache, sql, nargs, types, values, GetLatestSnapshot(), true, [&](int rc) {
		expect_result(rc, SPI_OK_SELECT, "reading marks");
		bool isnull = true;
		if (SPI_processed > 0)
			*mark = DatumGetInt64(result_value(0, 1, &isnull));
		return !isnull;
	});
}

void raise_mark_as_owner(SPIPlanPtr *cache, const char *sql, int nargs, Oid *types, Datum *values)
{
	run_as_owner(cache, sql, nargs, types, values, InvalidSnapshot, false,
	             [](int rc) { expect_result(rc, SPI_OK_INSERT, "raising a mark"); });
}

} // namespace fencing
