/*
 * Row locking for leases and fences: SELECT ... FOR UPDATE, and for a new
 * resource INSERT ... ON CONFLICT DO NOTHING first (a concurrent creator
 * wins, we wait for it, then lock its row).
 */
#include "resources.hpp"
#include "spi.hpp"

extern "C" {
#include "catalog/pg_type.h"
#include "utils/builtins.h"
}

namespace fencing
{

namespace
{

/* The two statements that find-or-create and lock one row of one table. */
struct RowLock {
	const char *select_sql;
	const char *create_sql;
	SPIPlanPtr select_plan;
	SPIPlanPtr create_plan;
};
FENCING_PLAIN_DATA(RowLock);

RowLock lease_row = {"SELECT NOT released AND expires_at > pg_catalog.clock_timestamp(), token"
                     " FROM fencing.resources WHERE resource = $1 FOR UPDATE",
                     "INSERT INTO fencing.resources (resource) VALUES ($1)"
                     " ON CONFLICT (resource) DO NOTHING",
                     nullptr, nullptr};

RowLock fence_row = {"SELECT token FROM fencing.fences WHERE resource = $1 FOR UPDATE",
                     "INSERT INTO fencing.fences (resource, token) VALUES ($1, 1)"
                     " ON CONFLICT (resource) DO NOTHING",
                     nullptr, nullptr};

/* Locks the row, creating it first if there is none; the result is in SPI_tuptable. */
void lock_row(RowLock *row, const char *resource, bool *created)
{
	Datum name = CStringGetTextDatum(resource);
	Oid types[1] = {TEXTOID};
	SPIPlanPtr select = kept_plan(&row->select_plan, row->select_sql, 1, types);
	run_plan(select, &name, nullptr, false, SPI_OK_SELECT);
	*created = false;
	if (SPI_processed > 0)
		return;
	run_plan(kept_plan(&row->create_plan, row->create_sql, 1, types), &name, nullptr, false,
	         SPI_OK_INSERT);
	*created = SPI_processed > 0;
	run_plan(select, &name, nullptr, false, SPI_OK_SELECT);
	if (SPI_processed == 0)
		ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
		                errmsg("could not serialize access due to concurrent creation of "
		                       "resource \"%s\"",
		                       resource)));
}

} // namespace

Lease lock_lease(const char *resource)
{
	bool created;
	lock_row(&lease_row, resource, &created);
	bool isnull;
	Lease lease;
	Datum live = result_value(0, 1, &isnull);
	lease.live = !isnull && DatumGetBool(live);
	Datum token = result_value(0, 2, &isnull);
	lease.token = isnull ? 0 : DatumGetInt64(token);
	return lease;
}

int64 lock_fence(const char *resource)
{
	bool created;
	lock_row(&fence_row, resource, &created);
	bool isnull;
	/* A row created just now holds the placeholder 1: no fence was accepted yet. */
	return created ? 0 : DatumGetInt64(result_value(0, 1, &isnull));
}

} // namespace fencing
