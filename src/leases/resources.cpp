/*
 * Row locking for leases and fences: SELECT ... FOR UPDATE, and for a new
 * resource INSERT ... ON CONFLICT DO NOTHING first (a concurrent creator
 * wins, we wait for it, then lock its row).
 */
#include "leases/resources.hpp"
#include "legacy/leases_0_2_0.hpp"
#include "legacy/helpers_0_3_0.hpp"
#include "legacy/leases_0_3_0.hpp"
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
	Statement *select;
	Statement *create;
};
FENCING_PLAIN_DATA(RowLock);

/*
 * Live: held until its expiry, or its grace_until (state/lease_grace.hpp),
 * the clock read before the lease memory (leases/renew_memory.cpp); the
 * resource's floor (fencing.compact_resources()) as the last column.
 */
Statement lock_lease_statement = {
    "SELECT NOT released AND pg_catalog.clock_timestamp() < GREATEST("
    "fencing_internal._lease_expiry(resource, holder, token, epoch, expires_at),"
    " CASE WHEN epoch OPERATOR(pg_catalog.<>) fencing_internal._lease_epoch()"
    " THEN grace_until END),"
    " token, (SELECT pg_catalog.max(f.token) FROM fencing.resource_floors f"
    " WHERE pg_catalog.starts_with($1, f.prefix))"
    " FROM fencing.resources WHERE resource = $1 FOR UPDATE",
    1,
    {TEXTOID}};

Statement create_lease_statement = {"INSERT INTO fencing.resources (resource) VALUES ($1)"
                                    " ON CONFLICT (resource) DO NOTHING",
                                    1,
                                    {TEXTOID}};

Statement lock_fence_statement = {"SELECT token, (SELECT pg_catalog.max(f.token)"
                                  " FROM fencing.resource_floors f"
                                  " WHERE pg_catalog.starts_with($1, f.prefix))"
                                  " FROM fencing.fences WHERE resource = $1 FOR UPDATE",
                                  1,
                                  {TEXTOID}};

Statement create_fence_statement = {"INSERT INTO fencing.fences (resource, token) VALUES ($1, 1)"
                                    " ON CONFLICT (resource) DO NOTHING",
                                    1,
                                    {TEXTOID}};

/*
 * The lock of this database's rows: 0.1.0's have no resource floors
 * (legacy/leases_0_2_0.hpp), 0.3.0's no grace_until (legacy/leases_0_3_0.hpp).
 */
RowLock lease_row()
{
	if (no_resource_floors_0_1_0())
		return {&lock_lease_0_1_0, &create_lease_statement};
	return {for_installed_release(&lock_lease_statement, &lock_lease_0_3_0),
	        &create_lease_statement};
}

RowLock fence_row()
{
	return {no_resource_floors_0_1_0() ? &lock_fence_0_1_0 : &lock_fence_statement,
	        &create_fence_statement};
}

/* A nullable bigint column of the locked row, 0 for NULL. */
int64 column_or_zero(int column)
{
	bool isnull;
	Datum value = result_value(0, column, &isnull);
	return isnull ? 0 : DatumGetInt64(value);
}

/* Locks the row, creating it first if there is none; the result is in SPI_tuptable. */
void lock_row(RowLock row, const char *resource, bool *created)
{
	Datum name = CStringGetTextDatum(resource);
	run_statement(row.select, &name, SPI_OK_SELECT);
	*created = false;
	if (SPI_processed > 0)
		return;
	run_statement(row.create, &name, SPI_OK_INSERT);
	*created = SPI_processed > 0;
	run_statement(row.select, &name, SPI_OK_SELECT);
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
	lock_row(lease_row(), resource, &created);
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
	lock_row(fence_row(), resource, &created);
	/* A row created just now holds the placeholder 1: no fence was accepted yet. */
	return std::max(created ? 0 : column_or_zero(1), column_or_zero(2));
}

} // namespace fencing
