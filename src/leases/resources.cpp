/*
 * Row locking for leases and fences: SELECT ... FOR UPDATE, and for a new
 * resource INSERT ... ON CONFLICT DO NOTHING first (a concurrent creator
 * wins, we wait for it, then lock its row).
 */
#include "leases/resources.hpp"
#include "legacy/leases_0_2_0.hpp"
#include "legacy/leases_0_3_0.hpp"
#include "state/lease_grace.hpp"
#include "base/spi.hpp"

#include <algorithm>

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

/* The resource's floor (fencing.compact_resources()), as the last column. */
#define RESOURCE_FLOOR                                                                             \
	"(SELECT pg_catalog.max(f.token) FROM fencing.resource_floors f"                               \
	" WHERE pg_catalog.starts_with($1, f.prefix))"

/* Live: held until its expiry, or its grace_until (state/lease_grace.hpp). */
RowLock lease_row = {"SELECT NOT released AND " LEASE_HELD_UNTIL(
                         "") " > pg_catalog.clock_timestamp(), token, " RESOURCE_FLOOR
                             " FROM fencing.resources WHERE resource = $1 FOR UPDATE",
                     "INSERT INTO fencing.resources (resource) VALUES ($1)"
                     " ON CONFLICT (resource) DO NOTHING",
                     nullptr, nullptr};

/* With 0.3.0's objects (legacy/leases_0_3_0.hpp), which have no grace_until. */
RowLock lease_row_0_3_0 = {"SELECT NOT released AND " LEASE_HELD_UNTIL_0_3_0(
                               "") " > pg_catalog.clock_timestamp(), token, " RESOURCE_FLOOR
                                   " FROM fencing.resources WHERE resource = $1 FOR UPDATE",
                           lease_row.create_sql, nullptr, nullptr};

RowLock fence_row = {"SELECT token, " RESOURCE_FLOOR
                     " FROM fencing.fences WHERE resource = $1 FOR UPDATE",
                     "INSERT INTO fencing.fences (resource, token) VALUES ($1, 1)"
                     " ON CONFLICT (resource) DO NOTHING",
                     nullptr, nullptr};

/* With 0.1.0's objects (legacy/leases_0_2_0.hpp), which have no resource floors. */
RowLock lease_row_0_1_0 = {lease_lock_sql_0_1_0, lease_row.create_sql, nullptr, nullptr};

RowLock fence_row_0_1_0 = {fence_lock_sql_0_1_0, fence_row.create_sql, nullptr, nullptr};

/* A nullable bigint column of the locked row, 0 for NULL. */
int64 column_or_zero(int column)
{
	bool isnull;
	Datum value = result_value(0, column, &isnull);
	return isnull ? 0 : DatumGetInt64(value);
}

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
	lock_row(no_resource_floors_0_1_0()   ? &lease_row_0_1_0
	         : lease_rows_without_grace() ? &lease_row_0_3_0
	                                      : &lease_row,
	         resource, &created);
	bool isnull;
	Lease lease;
	Datum live = result_value(0, 1, &isnull);
	lease.live = !isnull && DatumGetBool(live);
	lease.token = std::max(column_or_zero(2), column_or_zero(3));
	return lease;
}

int64 lock_fence(const char *resource)
{
	bool created;
	lock_row(no_resource_floors_0_1_0() ? &fence_row_0_1_0 : &fence_row, resource, &created);
	/* A row created just now holds the placeholder 1: no fence was accepted yet. */
	return std::max(created ? 0 : column_or_zero(1), column_or_zero(2));
}

} // namespace fencing
