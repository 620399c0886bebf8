/*
 * fencing.compact(table, below) and fencing.compact_resources(below,
 * prefix): bound the state that only grows.  Raise a floor to `below` - from
 * then on no write to the table, no fence or grant on the resources, may
 * present a token below it - and remove the deleted-key marks, idle leases
 * and fences below it, which the floor now speaks for.
 */
#include "admin/ddl.hpp"
#include "base/arguments.hpp"
#include "base/compat.hpp"
#include "legacy/leases_0_3_0.hpp"
#include "state/lease_grace.hpp"
#include "state/mark_store.hpp"
#include "state/registry.hpp"
#include "base/spi.hpp"
#include "state/table_settings.hpp"
#include "base/token_compare.hpp"
#include "state/token_issue.hpp"

extern "C" {
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/xact.h"
#include "funcapi.h"
#include "nodes/parsenodes.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
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

/* The one bigint a query reads as the extension owner, or 0 if none. */
int64 highest(const char *sql, Oid type, Datum value)
{
	return run_sql(sql, 1, &type, &value, InvalidSnapshot, true, true, [&](int rc) {
		expect_result(rc, SPI_OK_SELECT, "reading tokens");
		bool isnull = true;
		Datum token = SPI_processed > 0 ? result_value(0, 1, &isnull) : 0;
		return isnull ? 0 : DatumGetInt64(token);
	});
}

/*
 * One batch of a removal, as the extension owner: `sql` looks at the next
 * `batch` rows after `*after` in key order and removes those below the
 * floor; it returns one row, the last key it looked at (NULL when there was
 * none) and how many it removed.  $1 is `scope` (a relation or a prefix),
 * $2 the key to start after, $3 the floor, $4 the batch size.  The key is
 * copied into `keep`, which outlives a commit.  Returns false when nothing
 * was left to look at.
 */
bool remove_batch(const char *sql, Oid scope_type, Datum scope, Oid key_type, Datum *after,
                  int64 below, int32 batch, MemoryContext keep, int64 *removed)
{
	Oid types[4] = {scope_type, key_type, INT8OID, INT4OID};
	Datum values[4] = {scope, *after, Int64GetDatum(below), Int32GetDatum(batch)};
	return run_sql(sql, 4, types, values, InvalidSnapshot, false, true, [&](int rc) {
		if (rc != SPI_OK_SELECT || SPI_processed != 1)
			elog(ERROR, "fencing: compacting failed: %s", SPI_result_code_string(rc));
		bool last_null = true;
		bool count_null = true;
		Datum last = result_value(0, 1, &last_null);
		Datum count = result_value(0, 2, &count_null);
		if (!count_null)
			*removed += DatumGetInt64(count);
		if (!last_null) {
			MemoryContext old = MemoryContextSwitchTo(keep);
			*after = datumCopy(last, false, -1);
			MemoryContextSwitchTo(old);
		}
		return !last_null;
	});
}

/*
 * A relation's marks, a batch at a time.  Only marks at or below the
 * relation's own floor go (a mark equal to the floor refuses what the floor
 * refuses, in either mode, so a mark at 2^63 - 1 can go too): every lookup of a key's marks reads
 * the floor of each relation whose marks it reads, in the same snapshot (marks.cpp,
 * find_high_water()), so removing such a mark changes no lookup's result,
 * whatever state the rest of the compaction is in.
 *
 * A batch never waits for a row: it locks the rows it removes with SKIP
 * LOCKED and leaves those another transaction holds to the next
 * compaction.  A writer that deletes a key re-marks it, locking the mark's
 * row until it commits; a batch that waited for it, holding the rows it had
 * taken before in its own order, deadlocked with a writer taking them in
 * another, and made every writer behind it wait for an idle one.  A row
 * updated since the batch's snapshot is locked in its new version, which
 * the DELETE does not see: it stays.
 */
const char *const mark_batch_sql =
    "WITH batch AS MATERIALIZED ("
    " SELECT ctid, key FROM fencing.deleted_keys"
    "  WHERE relid OPERATOR(pg_catalog.=) $1 AND key OPERATOR(pg_catalog.>) $2"
    "  ORDER BY key LIMIT $4),"
    " taken AS MATERIALIZED ("
    " SELECT d.ctid FROM fencing.deleted_keys d"
    "  WHERE d.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT ctid FROM batch))"
    "  AND d.relid OPERATOR(pg_catalog.=) $1"
    "  AND d.token OPERATOR(pg_catalog.<=) LEAST($3, COALESCE((SELECT f.token FROM fencing.floors f"
    "   WHERE f.relid OPERATOR(pg_catalog.=) $1), 0))"
    "  FOR UPDATE OF d SKIP LOCKED),"
    " gone AS ("
    " DELETE FROM fencing.deleted_keys d"
    "  WHERE d.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT ctid FROM taken))"
    "  AND d.relid OPERATOR(pg_catalog.=) $1 AND d.token OPERATOR(pg_catalog.<=) $3"
    "  RETURNING 1)"
    " SELECT (SELECT key FROM batch ORDER BY key DESC LIMIT 1),"
    " (SELECT pg_catalog.count(*) FROM gone)";

/*
 * Idle leases below the floor (a live one is someone's), then fences below
 * it, a batch at a time; only under a floor already at or above `below`.
 * Rows are found again by their ctid and locked with SKIP LOCKED, as the
 * marks are: a row updated meanwhile, or held by a fence() or acquire()
 * still running, is left alone.  A lease held until its horizon after a
 * restart is live (state/lease_grace.hpp); 0.3.0's rows have none
 * (legacy/leases_0_3_0.hpp).
 */
const char *const resource_batch_sql =
    "WITH batch AS MATERIALIZED ("
    " SELECT ctid, resource FROM fencing.resources WHERE resource OPERATOR(pg_catalog.>) $2"
    "  ORDER BY resource LIMIT $4),"
    " taken AS MATERIALIZED ("
    " SELECT r.ctid FROM fencing.resources r"
    "  WHERE r.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT ctid FROM batch))"
    "  AND pg_catalog.starts_with(r.resource, $1)"
    "  AND COALESCE(r.token, 0) OPERATOR(pg_catalog.<) $3"
    "  AND NOT (NOT r.released AND pg_catalog.clock_timestamp() OPERATOR(pg_catalog.<)"
    " GREATEST(fencing_internal._lease_expiry(r.resource, r.holder, r.token, r.epoch,"
    " r.expires_at), CASE WHEN r.epoch OPERATOR(pg_catalog.<>) fencing_internal._lease_epoch()"
    " THEN r.grace_until END))"
    "  AND EXISTS (SELECT FROM fencing.resource_floors f"
    "   WHERE pg_catalog.starts_with(r.resource, f.prefix) AND f.token OPERATOR(pg_catalog.>=) $3)"
    "  FOR UPDATE OF r SKIP LOCKED),"
    " gone AS ("
    " DELETE FROM fencing.resources r"
    "  WHERE r.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT ctid FROM taken))"
    "  AND COALESCE(r.token, 0) OPERATOR(pg_catalog.<) $3"
    "  RETURNING 1)"
    " SELECT (SELECT resource FROM batch ORDER BY resource DESC LIMIT 1),"
    " (SELECT pg_catalog.count(*) FROM gone)";

const char *const fence_batch_sql =
    "WITH batch AS MATERIALIZED ("
    " SELECT ctid, resource FROM fencing.fences WHERE resource OPERATOR(pg_catalog.>) $2"
    "  ORDER BY resource LIMIT $4),"
    " taken AS MATERIALIZED ("
    " SELECT r.ctid FROM fencing.fences r"
    "  WHERE r.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT ctid FROM batch))"
    "  AND pg_catalog.starts_with(r.resource, $1)"
    "  AND r.token OPERATOR(pg_catalog.<) $3"
    "  AND EXISTS (SELECT FROM fencing.resource_floors f"
    "   WHERE pg_catalog.starts_with(r.resource, f.prefix) AND f.token OPERATOR(pg_catalog.>=) $3)"
    "  FOR UPDATE OF r SKIP LOCKED),"
    " gone AS ("
    " DELETE FROM fencing.fences r"
    "  WHERE r.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT ctid FROM taken))"
    "  AND r.token OPERATOR(pg_catalog.<) $3"
    "  RETURNING 1)"
    " SELECT (SELECT resource FROM batch ORDER BY resource DESC LIMIT 1),"
    " (SELECT pg_catalog.count(*) FROM gone)";

/* The batch size of compact() and compact_resources(), which commit once. */
constexpr int32 one_transaction_batch = 10000;

/*
 * A protected table checked and its floor raised to `below` (not yet
 * committed), with ShareRowExclusiveLock on it and its partitions: writers
 * wait until the transaction ends.  The relations of its tree, in `keep`;
 * on Citus, its marks are removed too and counted in `*removed`, and the
 * tree is empty.
 */
struct Tree {
	Oid *relids;
	int count;
};
FENCING_PLAIN_DATA(Tree);

Tree raise_table_floor(Oid relid, int64 below, MemoryContext keep, int64 *removed,
                       const char *function)
{
	/*
	 * Writes wait while the floor goes up: one that read the old floor
	 * cannot commit after the new one.
	 */
	Relation rel = try_open_target(relid, ShareRowExclusiveLock, Target::protected_table, function);
	if (rel == nullptr)
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
		                errmsg("relation with OID %u does not exist", relid)));
	TableSettings fence;
	Registration registration;
	if (!find_guard(rel, &fence) || !protection_of(rel, &registration))
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("relation \"%s\" is not protected", RelationGetRelationName(rel)),
		                errhint("fencing.compact() raises the floor of a protected table.")));
	List *tree = find_all_inheritors(relid, ShareRowExclusiveLock, nullptr);
	MarkStore marks = open_mark_store(rel, fence, CurrentMemoryContext);
	/* The marks only when the clock alone would refuse: reading them all takes long. */
	int64 seen = issuable_now();
	if (below > one_above(seen))
		seen = std::max(seen, marks.kind->highest_mark(&marks, tree));
	check_floor(below, seen, "the table has");
	Tree result{static_cast<Oid *>(MemoryContextAlloc(keep, sizeof(Oid) * list_length(tree))), 0};
	*removed +=
	    marks.kind->raise_compaction_floor(&marks, tree, below, result.relids, &result.count);
	relation_close(rel, NoLock);
	return result;
}

/* Raises the floor of the resources named prefix... (not yet committed). */
void raise_resource_floor(Datum prefix, int64 below)
{
	/*
	 * What the lock manager issued, not the fences: a fence's token comes
	 * from any caller, and a floor is also the least token acquire() may
	 * give the prefix's resources - above what it can issue, it would push
	 * every later grant of the database to the end of its generation.
	 */
	Oid types[2] = {TEXTOID, INT8OID};
	Datum values[2] = {prefix, Int64GetDatum(below)};
	/* The resources only when the clock alone would refuse: reading them all takes long. */
	int64 seen = issuable_now();
	if (below > one_above(seen))
		seen = std::max(seen, highest("SELECT pg_catalog.max(r.token) FROM fencing.resources r"
		                              " WHERE pg_catalog.starts_with(r.resource, $1)",
		                              TEXTOID, prefix));
	check_floor(below, seen, "the lock manager has");
	run_sql("INSERT INTO fencing.resource_floors AS f (prefix, token) VALUES ($1, $2)"
	        " ON CONFLICT ON CONSTRAINT resource_floors_pkey"
	        " DO UPDATE SET token = EXCLUDED.token, raised_at = pg_catalog.now()"
	        " WHERE f.token OPERATOR(pg_catalog.<) EXCLUDED.token",
	        2, types, values, InvalidSnapshot, false, true,
	        [&](int rc) { expect_result(rc, SPI_OK_INSERT, "compacting resources"); });
}

/* The key every key sorts after: '' (resource names are never empty) or '\\x'. */
Datum empty_key()
{
	auto *empty = static_cast<varlena *>(palloc(VARHDRSZ));
	SET_VARSIZE(empty, VARHDRSZ);
	return PointerGetDatum(empty);
}

/*
 * Runs the batches of one kind of row.  Between batches, `each` (when not
 * null) commits and checks that the work may go on; false from it stops.
 */
using Between = bool (*)(void *state);

int64 remove_in_batches(const char *sql, Oid scope_type, Datum scope, Oid key_type, int64 below,
                        int32 batch, MemoryContext keep, Between between, void *state)
{
	int64 removed = 0;
	Datum after = empty_key();
	for (;;) {
		CHECK_FOR_INTERRUPTS();
		bool more =
		    remove_batch(sql, scope_type, scope, key_type, &after, below, batch, keep, &removed);
		if (between != nullptr && !between(state))
			break;
		if (!more)
			break;
	}
	return removed;
}

/* A stop of `between` (the table dropped meanwhile) ends the whole run. */
int64 remove_table_marks(const Tree &tree, int64 below, int32 batch, MemoryContext keep,
                         Between between, void *state, const bool *stopped)
{
	int64 removed = 0;
	for (int i = 0; i < tree.count && !(stopped != nullptr && *stopped); i++)
		removed += remove_in_batches(mark_batch_sql, REGCLASSOID, ObjectIdGetDatum(tree.relids[i]),
		                             BYTEAOID, below, batch, keep, between, state);
	return removed;
}

int64 remove_resources(Datum prefix, int64 below, int32 batch, MemoryContext keep, Between between,
                       void *state)
{
	return remove_in_batches(lease_rows_without_grace() ? resource_batch_sql_0_3_0
	                                                    : resource_batch_sql,
	                         TEXTOID, prefix, TEXTOID, below, batch, keep, between, state) +
	       remove_in_batches(fence_batch_sql, TEXTOID, prefix, TEXTOID, below, batch, keep, between,
	                         state);
}

/*
 * The procedures commit between batches: only when CALLed on their own,
 * not in a transaction block or from a function, nor in a subtransaction
 * (a PL/pgSQL block with an exception handler), where the first commit
 * would fail only after the table was locked - writers waiting for it -
 * and the floor raised.
 */
void require_own_transactions(FunctionCallInfo fcinfo, const char *name, const char *instead)
{
	if (fcinfo->context == nullptr || !IsA(fcinfo->context, CallContext) ||
	    castNode(CallContext, fcinfo->context)->atomic || IsSubTransaction())
		ereport(ERROR,
		        (errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
		         errmsg("%s cannot run inside a transaction block", name),
		         errdetail("It commits after raising the floor and after each batch."),
		         errhint("CALL it as a statement of its own, or use %s, which compacts in the "
		                 "caller's transaction.",
		                 instead)));
}

int32 require_batch_size(FunctionCallInfo fcinfo, int arg)
{
	if (PG_ARGISNULL(arg))
		ereport(ERROR,
		        (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("batch_size must not be null")));
	int32 batch = PG_GETARG_INT32(arg);
	if (batch <= 0)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		                errmsg("batch_size must be positive, got %d", batch)));
	return batch;
}

/* The procedures' result: one column, removed. */
Datum removed_row(FunctionCallInfo fcinfo, int64 removed)
{
	TupleDesc desc;
	if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "fencing: the procedure's result is not a row");
	desc = BlessTupleDesc(desc);
	Datum values[1] = {Int64GetDatum(removed)};
	bool nulls[1] = {false};
	return HeapTupleGetDatum(heap_form_tuple(desc, values, nulls));
}

/* Between two batches of compact_in_batches(): commit, then take the table again. */
struct TableBatches {
	Oid relid;
	bool gone;
};
FENCING_PLAIN_DATA(TableBatches);

bool commit_and_reopen(void *state)
{
	auto *batches = static_cast<TableBatches *>(state);
	SPI_commit();
	/* Dropped meanwhile: its marks went with it.  No longer the caller's: an error. */
	Relation rel = try_open_target(batches->relid, ShareUpdateExclusiveLock, Target::owned,
	                               "compact_in_batches");
	if (rel == nullptr) {
		batches->gone = true;
		return false;
	}
	relation_close(rel, NoLock);
	return true;
}

bool commit_only(void *)
{
	SPI_commit();
	return true;
}

} // namespace

/*
 * compact(target regclass, below bigint) RETURNS bigint: the number of marks
 * removed, in the caller's transaction.  Writes to the table wait until it
 * ends: a write that read the old floor cannot commit after it.
 */
FENCING_FUNCTION(compact)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
		        (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("target must not be null")));
	int64 below = require_token(PG_GETARG_DATUM(1), PG_ARGISNULL(1), "below");
	int64 removed = 0;
	Tree tree =
	    raise_table_floor(PG_GETARG_OID(0), below, CurrentMemoryContext, &removed, "compact");
	removed += remove_table_marks(tree, below, one_transaction_batch, CurrentMemoryContext, nullptr,
	                              nullptr, nullptr);
	PG_RETURN_INT64(removed);
}

/*
 * compact_in_batches(target regclass, below bigint, batch_size integer
 * DEFAULT 1000, INOUT removed bigint DEFAULT NULL): compact() without
 * holding writers off.  The floor is raised and committed first, in a
 * transaction of its own that writers wait for as they wait for compact()
 * (it waits for the writers in flight, then commits a row per relation);
 * then the marks go batch_size at a time, each batch committed, under a
 * lock that no write waits for.  A write waits only for a mark it
 * re-creates while that mark's batch runs.
 */
FENCING_FUNCTION(compact_in_batches)
{
	require_own_transactions(fcinfo, "fencing.compact_in_batches()", "fencing.compact()");
	if (PG_ARGISNULL(0))
		ereport(ERROR,
		        (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("target must not be null")));
	TableBatches state{PG_GETARG_OID(0), false};
	int64 below = require_token(PG_GETARG_DATUM(1), PG_ARGISNULL(1), "below");
	int32 batch = require_batch_size(fcinfo, 2);
	int64 removed = with_spi(
	    [&state, below, batch]() {
		    MemoryContext keep =
		        CurrentMemoryContext; /* SPI's procedure context: outlives commits */
		    int64 count = 0;
		    Tree tree = raise_table_floor(state.relid, below, keep, &count, "compact_in_batches");
		    if (tree.count > 0 && commit_and_reopen(&state))
			    count += remove_table_marks(tree, below, batch, keep, commit_and_reopen, &state,
			                                &state.gone);
		    return count;
	    },
	    SPI_OPT_NONATOMIC);
	PG_RETURN_DATUM(removed_row(fcinfo, removed));
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
	raise_resource_floor(prefix, below);
	PG_RETURN_INT64(remove_resources(prefix, below, one_transaction_batch, CurrentMemoryContext,
	                                 nullptr, nullptr));
}

/*
 * compact_resources_in_batches(below bigint, prefix text DEFAULT '',
 * batch_size integer DEFAULT 1000, INOUT removed bigint DEFAULT NULL):
 * compact_resources() a batch per transaction, the floor committed first.
 * Not SECURITY DEFINER (that would forbid the commits): revoked from
 * PUBLIC, it reads and writes the extension's tables as their owner
 * (src/base/spi.cpp, run_sql()).
 */
FENCING_FUNCTION(compact_resources_in_batches)
{
	require_own_transactions(fcinfo, "fencing.compact_resources_in_batches()",
	                         "fencing.compact_resources()");
	int64 below = require_token(PG_GETARG_DATUM(0), PG_ARGISNULL(0), "below");
	if (PG_ARGISNULL(1))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("prefix must not be null"),
		                errhint("The empty prefix names every resource.")));
	int32 batch = require_batch_size(fcinfo, 2);
	int64 removed = with_spi(
	    [fcinfo, below, batch]() {
		    MemoryContext keep =
		        CurrentMemoryContext; /* SPI's procedure context: outlives commits */
		    /* Detoasted: a TOAST pointer (a CALL's subquery argument) need not outlive the commits.
		     */
		    Datum prefix = PointerGetDatum(PG_DETOAST_DATUM_COPY(PG_GETARG_DATUM(1)));
		    raise_resource_floor(prefix, below);
		    SPI_commit();
		    return remove_resources(prefix, below, batch, keep, commit_only, nullptr);
	    },
	    SPI_OPT_NONATOMIC);
	PG_RETURN_DATUM(removed_row(fcinfo, removed));
}
