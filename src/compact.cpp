/*
 * fencing.compact(table, below) and fencing.compact_resources(below,
 * prefix): bound the state that only grows.  Raise a floor to `below` - from
 * then on no write to the table, no fence or grant on the resources, may
 * present a token below it - and remove the deleted-key marks, idle leases
 * and fences below it, which the floor now speaks for.
 */
#include "arguments.hpp"
#include "citus.hpp"
#include "compat.hpp"
#include "marks.hpp"
#include "registry.hpp"
#include "spi.hpp"
#include "table.hpp"
#include "token.hpp"
#include "tokens.hpp"

extern "C" {
#include "access/relation.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
}

#include <algorithm>

using namespace fencing;

namespace
{

/*
 * A floor can never come down, and a floor is a token: any positive bigint
 * (the token domain, no lower cap), but not more than one above `seen` -
 * everything the table or the resources have seen and the server clock
 * (tokens of fencing.acquire()) - which can only be a mistake that stops
 * every writer for good.  One above is allowed: it removes every mark.  The
 * sum saturates, so 2^63 - 1 is allowed once 2^63 - 2 or more was seen, and
 * a writer that stored 2^63 - 1 cannot make compaction fail.
 */
void check_floor(int64 below, int64 seen, const char *what)
{
	if (below > one_above(seen))
		ereport(ERROR,
		        (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		         errmsg("floor " INT64_FORMAT " is above every token %s seen", below, what),
		         errdetail("A floor never comes down: no writer below it could write again; the "
		                   "highest token seen, or the server clock if later, is " INT64_FORMAT ".",
		                   seen),
		         errhint("Pick a floor below the token of every holder still working.")));
}

/* The highest token a table's tree has seen (marks and floors), or 0. */
int64 highest_marked(List *tree)
{
	Oid types[1] = {REGCLASSARRAYOID};
	Datum values[1] = {relid_array(tree)};
	int rc = run_sql("SELECT GREATEST("
	                 " (SELECT pg_catalog.max(token) FROM fencing.deleted_keys"
	                 "   WHERE relid OPERATOR(pg_catalog.=) ANY ($1)),"
	                 " (SELECT pg_catalog.max(token) FROM fencing.floors"
	                 "   WHERE relid OPERATOR(pg_catalog.=) ANY ($1)))",
	                 1, types, values, InvalidSnapshot, true, true);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "fencing: reading marks failed: %s", SPI_result_code_string(rc));
	bool isnull = true;
	Datum highest = SPI_processed > 0 ? result_value(0, 1, &isnull) : 0;
	int64 seen = isnull ? 0 : DatumGetInt64(highest);
	SPI_finish();
	return seen;
}

/* Runs one statement of compact_resources() (inside SPI_connect); its row count. */
uint64 run_resource_sql(const char *sql, Datum prefix, int64 below, int expected)
{
	Oid types[2] = {TEXTOID, INT8OID};
	Datum values[2] = {prefix, Int64GetDatum(below)};
	int rc = SPI_execute_with_args(sql, 2, types, values, nullptr, expected == SPI_OK_SELECT, 0);
	if (rc != expected)
		elog(ERROR, "fencing: compacting resources failed: %s", SPI_result_code_string(rc));
	return SPI_processed;
}

} // namespace

/* compact(target regclass, below bigint) RETURNS bigint: the number of marks removed. */
FENCING_FUNCTION(compact)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
		        (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("target must not be null")));
	Oid relid = PG_GETARG_OID(0);
	int64 below = require_token(PG_GETARG_DATUM(1), PG_ARGISNULL(1), "below");
	/*
	 * Writes wait while the floor goes up and the marks go: a write that
	 * checked the old floor cannot commit after the marks it relied on are
	 * gone.
	 */
	if (SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)) &&
	    !owns_relation(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, get_relkind_objtype(get_rel_relkind(relid)),
		               get_rel_name(relid));
	/* Only then the lock: a role that does not own the table cannot queue it. */
	Relation rel = try_relation_open(relid, ShareRowExclusiveLock);
	if (rel == nullptr)
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
		                errmsg("relation with OID %u does not exist", relid)));
	if (!owns_relation(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, get_relkind_objtype(rel->rd_rel->relkind),
		               RelationGetRelationName(rel));
	TableFence fence;
	Registration registration;
	if (!find_guard(rel, &fence) || !protection_of(rel, &registration))
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("relation \"%s\" is not protected", RelationGetRelationName(rel)),
		                errhint("fencing.compact() raises the floor of a protected table.")));
	if (registration.relid != relid)
		ereport(
		    ERROR,
		    (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		     errmsg("relation \"%s\" is a partition of a protected table",
		            RelationGetRelationName(rel)),
		     errhint("Compact the protected table: its marks and floor cover its partitions.")));
	List *tree = find_all_inheritors(relid, ShareRowExclusiveLock, nullptr);
	int64 seen = issuable_now();
	if (fence.citus_id == 0)
		seen = std::max(seen, highest_marked(tree));
	check_floor(below, seen, "the table has");
	int64 removed = 0;
	if (fence.citus_id != 0) {
		citus_raise_floor(fence.citus_id, below);
		removed = citus_remove_marks(fence.citus_id, below);
	} else {
		/*
		 * Every relation of the tree gets the floor: a partition detached
		 * later keeps it, as it keeps its marks.
		 */
		ListCell *cell;
		foreach (cell, tree)
			raise_floor(lfirst_oid(cell), below, true);
		Oid types[2] = {REGCLASSARRAYOID, INT8OID};
		Datum values[2] = {relid_array(tree), Int64GetDatum(below)};
		int rc = run_sql("DELETE FROM fencing.deleted_keys"
		                 " WHERE relid OPERATOR(pg_catalog.=) ANY ($1)"
		                 " AND token OPERATOR(pg_catalog.<) $2",
		                 2, types, values, InvalidSnapshot, false, true);
		if (rc != SPI_OK_DELETE)
			elog(ERROR, "fencing: removing marks failed: %s", SPI_result_code_string(rc));
		removed = static_cast<int64>(SPI_processed);
		SPI_finish();
	}
	relation_close(rel, NoLock);
	PG_RETURN_INT64(removed);
}

/*
 * compact_resources(below bigint, prefix text DEFAULT '') RETURNS bigint:
 * the number of idle leases and fences removed.  SECURITY DEFINER (the
 * tables it writes are the extension owner's), revoked from PUBLIC; it runs
 * no user code and names everything by schema.
 */
FENCING_FUNCTION(compact_resources)
{
	int64 below = require_token(PG_GETARG_DATUM(0), PG_ARGISNULL(0), "below");
	if (PG_ARGISNULL(1))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("prefix must not be null"),
		                errhint("The empty prefix names every resource.")));
	Datum prefix = PG_GETARG_DATUM(1);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "fencing: SPI_connect failed");
	/*
	 * What the lock manager issued, not the fences: a fence's token comes
	 * from any caller, and a floor is also the least token acquire() may
	 * give the prefix's resources - above what it can issue, it would push
	 * every later grant of the database to the end of its generation.
	 */
	run_resource_sql("SELECT pg_catalog.max(r.token) FROM fencing.resources r"
	                 " WHERE pg_catalog.starts_with(r.resource, $1)",
	                 prefix, below, SPI_OK_SELECT);
	bool isnull = true;
	Datum highest = SPI_processed > 0 ? result_value(0, 1, &isnull) : 0;
	int64 seen = issuable_now();
	if (!isnull)
		seen = std::max(seen, DatumGetInt64(highest));
	check_floor(below, seen, "the lock manager has");
	run_resource_sql("INSERT INTO fencing.resource_floors AS f (prefix, token) VALUES ($1, $2)"
	                 " ON CONFLICT ON CONSTRAINT resource_floors_pkey"
	                 " DO UPDATE SET token = EXCLUDED.token, raised_at = pg_catalog.now()"
	                 " WHERE f.token OPERATOR(pg_catalog.<) EXCLUDED.token",
	                 prefix, below, SPI_OK_INSERT);
	/* Idle leases below the floor (a live one is someone's), and fences below it. */
	uint64 removed = run_resource_sql("DELETE FROM fencing.resources r"
	                                  " WHERE pg_catalog.starts_with(r.resource, $1)"
	                                  " AND COALESCE(r.token, 0) OPERATOR(pg_catalog.<) $2"
	                                  " AND NOT (NOT r.released AND r.expires_at "
	                                  "OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp())",
	                                  prefix, below, SPI_OK_DELETE);
	removed += run_resource_sql("DELETE FROM fencing.fences f"
	                            " WHERE pg_catalog.starts_with(f.resource, $1)"
	                            " AND f.token OPERATOR(pg_catalog.<) $2",
	                            prefix, below, SPI_OK_DELETE);
	SPI_finish();
	PG_RETURN_INT64(static_cast<int64>(removed));
}
