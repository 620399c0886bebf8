/*
 * fencing.compact(table, below): bounds the state that only grows.  Raises
 * the table's floor to `below` - from then on no write to the table may
 * present a token below it - and removes the deleted-key marks below it,
 * which the floor now speaks for.
 */
#include "arguments.hpp"
#include "citus.hpp"
#include "marks.hpp"
#include "spi.hpp"
#include "table.hpp"

extern "C" {
#include "access/relation.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
}

#include <algorithm>

using namespace fencing;

namespace
{

Datum relid_array(List *relids)
{
	Datum *values = static_cast<Datum *>(palloc(sizeof(Datum) * list_length(relids)));
	int n = 0;
	ListCell *cell;
	foreach (cell, relids)
		values[n++] = ObjectIdGetDatum(lfirst_oid(cell));
	return PointerGetDatum(construct_array(values, n, REGCLASSOID, sizeof(Oid), true, TYPALIGN_INT));
}

/*
 * A floor can never come down: refuses one no token could reach (2^53 or
 * more) or more than one above everything the table has seen (its marks
 * and floors) and the server clock (tokens of fencing.acquire()), which can
 * only be a mistake that stops every writer for good.  One above the
 * highest token seen is allowed: it removes every mark.
 */
void check_floor(List *tree, int64 below, bool local_marks)
{
	constexpr int64 max_token = (int64{1} << 53) - 1;
	int64 seen = (GetCurrentTimestamp() + int64{POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE} *
	                                          SECS_PER_DAY * USECS_PER_SEC);
	if (local_marks) {
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
		if (!isnull)
			seen = std::max(seen, DatumGetInt64(highest));
		SPI_finish();
	}
	if (below > max_token || below > seen + 1)
		ereport(ERROR,
		        (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		         errmsg("floor " INT64_FORMAT " is above every token the table has seen", below),
		         errdetail("A floor never comes down: no writer below it could write again; "
		                   "tokens stay below 2^53, and the server clock is at " INT64_FORMAT ".",
		                   seen),
		         errhint("Pick a floor below the token of every holder still working.")));
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
	Relation rel = try_relation_open(relid, ShareRowExclusiveLock);
	if (rel == nullptr)
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
		                errmsg("relation with OID %u does not exist", relid)));
	if (!pg_class_ownercheck(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, get_relkind_objtype(rel->rd_rel->relkind),
		               RelationGetRelationName(rel));
	TableFence fence;
	if (!find_guard(rel, &fence))
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("relation \"%s\" is not protected", RelationGetRelationName(rel)),
		                errhint("fencing.compact() raises the floor of a protected table.")));
	for (int i = 0; rel->trigdesc != nullptr && i < rel->trigdesc->numtriggers; i++)
		if (rel->trigdesc->triggers[i].tgisclone &&
		    strcmp(rel->trigdesc->triggers[i].tgname, guard_trigger_name) == 0)
			ereport(ERROR,
			        (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			         errmsg("relation \"%s\" is a partition of a protected table",
			                RelationGetRelationName(rel)),
			         errhint("Compact the protected table: its marks and floor cover its partitions.")));
	List *tree = find_all_inheritors(relid, ShareRowExclusiveLock, nullptr);
	check_floor(tree, below, fence.citus_id == 0);
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
