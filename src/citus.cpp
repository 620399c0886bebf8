/*
 * Citus: marks co-located with shards, floors on every node, the coordinator's
 * TRUNCATE check, messages that name the distributed table, and fencing.token
 * handed to the workers.  See citus.hpp.  Nothing here runs unless Citus is
 * loaded and a table was protected as a distributed table.
 */
#include "citus.hpp"
#include "marks.hpp"
#include "settings.hpp"
#include "spi.hpp"

extern "C" {
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "nodes/parsenodes.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
}

namespace fencing
{

namespace
{

/* Where result_text() copies to: the caller's memory, not SPI's. */
MemoryContext caller_context = nullptr;

/* Runs a read-only metadata query as the current user; the caller reads the result and finishes. */
void run_metadata_query(const char *sql, int nargs, Oid *types, Datum *values)
{
	caller_context = CurrentMemoryContext;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "fencing: SPI_connect failed");
	int rc = SPI_execute_with_args(sql, nargs, types, values, nullptr, true, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "fencing: reading Citus metadata failed: %s", SPI_result_code_string(rc));
}

/* The text of column `column` of the first result row, copied out of SPI; NULL if NULL. */
char *result_text(int column)
{
	char *text = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, column);
	return text == nullptr ? nullptr : MemoryContextStrdup(caller_context, text);
}

/* The shard id a shard relation's name ends with ("orders_102008"), or 0. */
int64 shard_id_of(Relation rel)
{
	const char *name = RelationGetRelationName(rel);
	const char *underscore = strrchr(name, '_');
	if (underscore == nullptr || underscore[1] == '\0')
		return 0;
	char *end;
	long long id = strtoll(underscore + 1, &end, 10);
	return *end == '\0' && id > 0 ? id : 0;
}

/*
 * Citus' own propagation of SET LOCAL: sends a SET command to the workers
 * this transaction already talks to, and to each one it talks to later.
 * Not Citus API: an internal function of Citus 12.1, found by name.
 */
using PropagateSet = void (*)(VariableSetStmt *, const char *);
PropagateSet propagate_set = nullptr;

/* The fencing.token the workers last got in this (sub)transaction: 0 none, -1 unknown. */
int64 sent_token = 0;

ExecutorStart_hook_type previous_start = nullptr;

/* Hands the transaction's fencing.token to the workers if they do not have it yet. */
void send_token()
{
	int64 token = 0;
	if (!session_token(&token))
		token = 0;
	if (token == sent_token || !citus_loaded())
		return;
	if (propagate_set == nullptr)
		propagate_set = reinterpret_cast<PropagateSet>(
		    load_external_function("$libdir/citus", "PostprocessVariableSetStmt", true, nullptr));
	VariableSetStmt *stmt = makeNode(VariableSetStmt);
	stmt->kind = VAR_SET_VALUE;
	stmt->name = pstrdup("fencing.token");
	stmt->is_local = true;
	const char *value = token > 0 ? psprintf(INT64_FORMAT, token) : "";
	A_Const *argument = makeNode(A_Const);
	argument->val.sval.type = T_String;
	argument->val.sval.sval = pstrdup(value);
	argument->location = -1;
	stmt->args = list_make1(argument);
	propagate_set(stmt, psprintf("SET LOCAL fencing.token TO '%s'", value));
	sent_token = token;
}

void start_with_token(QueryDesc *query, int eflags)
{
	guarded("ExecutorStart", [] { send_token(); });
	if (previous_start != nullptr)
		previous_start(query, eflags);
	else
		standard_ExecutorStart(query, eflags);
}

void forget_sent_token(XactEvent event, void *)
{
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
	    event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT ||
	    event == XACT_EVENT_PREPARE)
		sent_token = 0;
}

/* A rolled-back subtransaction takes the workers' SET LOCAL with it: send again. */
void forget_sent_token_sub(SubXactEvent event, SubTransactionId, SubTransactionId, void *)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		sent_token = -1;
}

} // namespace

bool citus_loaded()
{
	/* Citus is loaded at server start (shared_preload_libraries) or not at all. */
	static int loaded = -1;
	if (loaded < 0)
		loaded = GetConfigOption("citus.propagate_set_commands", true, false) != nullptr;
	return loaded == 1;
}

bool citus_is_distributed(Oid relid)
{
	if (!citus_loaded())
		return false;
	Oid types[1] = {OIDOID};
	Datum values[1] = {ObjectIdGetDatum(relid)};
	run_metadata_query("SELECT FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1", 1,
	                   types, values);
	bool distributed = SPI_processed > 0;
	SPI_finish();
	return distributed;
}

CitusShard citus_shard(Relation shard, int64 id)
{
	int64 shard_id = shard_id_of(shard);
	Oid types[4] = {INT8OID, TEXTOID, OIDOID, TEXTOID};
	Datum values[4] = {Int64GetDatum(shard_id),
	                   CStringGetTextDatum(psprintf("fencing_citus.marks_" INT64_FORMAT, id)),
	                   ObjectIdGetDatum(RelationGetNamespace(shard)),
	                   CStringGetTextDatum(RelationGetRelationName(shard))};
	run_metadata_query(
	    "SELECT pg_catalog.to_regclass(pg_catalog.shard_name(m.logicalrelid, m.shardid))::pg_catalog.oid,"
	    "       pg_catalog.to_regclass(pg_catalog.shard_name(f.logicalrelid, f.shardid))::pg_catalog.oid,"
	    "       pg_catalog.column_to_column_name(p.logicalrelid, p.partkey)"
	    " FROM pg_catalog.pg_dist_shard s"
	    " JOIN pg_catalog.pg_dist_partition p ON p.logicalrelid = s.logicalrelid"
	    " JOIN pg_catalog.pg_dist_shard m ON m.logicalrelid = pg_catalog.to_regclass($2)"
	    "  AND m.shardminvalue IS NOT DISTINCT FROM s.shardminvalue"
	    " JOIN pg_catalog.pg_dist_shard f"
	    "  ON f.logicalrelid = pg_catalog.to_regclass('fencing_citus.floors')"
	    " JOIN pg_catalog.pg_class c ON c.oid = s.logicalrelid"
	    " WHERE s.shardid = $1 AND c.relnamespace = $3"
	    "  AND c.relname OPERATOR(pg_catalog.||) '_' OPERATOR(pg_catalog.||) $1 = $4",
	    4, types, values);
	CitusShard placement{};
	placement.id = id;
	bool found = SPI_processed > 0;
	char *column = found ? result_text(3) : nullptr;
	if (found) {
		bool isnull;
		Datum marks = result_value(0, 1, &isnull);
		placement.marks = isnull ? InvalidOid : DatumGetObjectId(marks);
		Datum floors = result_value(0, 2, &isnull);
		placement.floors = isnull ? InvalidOid : DatumGetObjectId(floors);
	}
	SPI_finish();
	if (!found || !OidIsValid(placement.marks) || !OidIsValid(placement.floors) || column == nullptr)
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("the deleted-key marks of shard \"%s\" are not on this node",
		                       RelationGetRelationName(shard)),
		                errdetail("Looked for a shard of fencing_citus.marks_" INT64_FORMAT
		                          " co-located with it, and for fencing_citus.floors.",
		                          id),
		                errhint("Protect the distributed table again with fencing.protect().")));
	placement.dist_attnum = get_attnum(RelationGetRelid(shard), column);
	if (placement.dist_attnum == InvalidAttrNumber)
		elog(ERROR, "fencing: distribution column \"%s\" not found in shard \"%s\"", column,
		     RelationGetRelationName(shard));
	placement.dist_type = get_atttype(RelationGetRelid(shard), placement.dist_attnum);
	return placement;
}

bool citus_logical_name(Relation rel, const char **qualified, const char **name)
{
	int64 shard_id = shard_id_of(rel);
	if (shard_id == 0 || !citus_loaded())
		return false;
	Oid types[3] = {INT8OID, OIDOID, TEXTOID};
	Datum values[3] = {Int64GetDatum(shard_id), ObjectIdGetDatum(RelationGetNamespace(rel)),
	                   CStringGetTextDatum(RelationGetRelationName(rel))};
	run_metadata_query(
	    "SELECT pg_catalog.quote_ident(n.nspname) OPERATOR(pg_catalog.||) '.'"
	    "       OPERATOR(pg_catalog.||) pg_catalog.quote_ident(c.relname),"
	    "       c.relname::pg_catalog.text"
	    " FROM pg_catalog.pg_dist_shard s JOIN pg_catalog.pg_class c ON c.oid = s.logicalrelid"
	    " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
	    " WHERE s.shardid = $1 AND c.relnamespace = $2"
	    "  AND c.relname OPERATOR(pg_catalog.||) '_' OPERATOR(pg_catalog.||) $1 = $3",
	    3, types, values);
	bool found = SPI_processed > 0;
	if (found) {
		*qualified = result_text(1);
		*name = result_text(2);
	}
	SPI_finish();
	return found;
}

void citus_record_mark(const CitusShard &shard, Datum dist_value, const KeyHash &key, int64 token)
{
	const char *marks = quote_qualified_identifier(get_namespace_name(get_rel_namespace(shard.marks)),
	                                               get_rel_name(shard.marks));
	Oid types[3] = {shard.dist_type, BYTEAOID, INT8OID};
	Datum values[3] = {dist_value, key_hash_datum(key), Int64GetDatum(token)};
	int rc = run_sql_as_owner(
	    psprintf("INSERT INTO %s AS m (dist, key, token, deleted_at)"
	             " VALUES ($1, $2, $3, pg_catalog.now())"
	             " ON CONFLICT (key, dist) DO UPDATE"
	             " SET token = EXCLUDED.token, deleted_at = pg_catalog.now()"
	             " WHERE fencing.token_accepts(m.token, EXCLUDED.token, false)",
	             marks),
	    3, types, values, InvalidSnapshot, false);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "fencing: raising a mark failed: %s", SPI_result_code_string(rc));
	SPI_finish();
}

namespace
{

/* Runs a query for one bigint (a max) as the extension owner; false if it is NULL. */
bool max_token(const char *sql, int nargs, Oid *types, Datum *values, Snapshot snapshot,
               int64 *result)
{
	int rc = run_sql_as_owner(sql, nargs, types, values, snapshot, true);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "fencing: reading tokens failed: %s", SPI_result_code_string(rc));
	bool isnull = true;
	if (SPI_processed > 0)
		*result = DatumGetInt64(result_value(0, 1, &isnull));
	SPI_finish();
	return !isnull;
}

} // namespace

bool citus_find_high_water(const CitusShard &shard, const KeyHash &key, int64 *mark)
{
	const char *marks = quote_qualified_identifier(get_namespace_name(get_rel_namespace(shard.marks)),
	                                               get_rel_name(shard.marks));
	const char *floors = quote_qualified_identifier(
	    get_namespace_name(get_rel_namespace(shard.floors)), get_rel_name(shard.floors));
	Oid types[2] = {BYTEAOID, INT8OID};
	Datum values[2] = {key_hash_datum(key), Int64GetDatum(shard.id)};
	return max_token(psprintf("SELECT pg_catalog.max(token) FROM ("
	                          " SELECT token FROM %s WHERE key OPERATOR(pg_catalog.=) $1"
	                          " UNION ALL"
	                          " SELECT token FROM %s WHERE id OPERATOR(pg_catalog.=) $2) t",
	                          marks, floors),
	                 2, types, values, GetLatestSnapshot(), mark);
}

bool citus_find_high_water_anywhere(int64 id, const KeyHash &key, int64 *mark)
{
	Oid types[2] = {BYTEAOID, INT8OID};
	Datum values[2] = {key_hash_datum(key), Int64GetDatum(id)};
	return max_token(psprintf("SELECT pg_catalog.max(token) FROM ("
	                          " SELECT token FROM fencing_citus.marks_" INT64_FORMAT
	                          "  WHERE key OPERATOR(pg_catalog.=) $1"
	                          " UNION ALL"
	                          " SELECT token FROM fencing_citus.floors"
	                          "  WHERE id OPERATOR(pg_catalog.=) $2) t",
	                          id),
	                 2, types, values, InvalidSnapshot, mark);
}

int64 citus_highest_stored(Relation rel, AttrNumber token_attnum)
{
	const char *table = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
	                                               RelationGetRelationName(rel));
	const char *column = quote_identifier(get_attname(RelationGetRelid(rel), token_attnum, false));
	int64 highest = 0;
	if (!max_token(psprintf("SELECT pg_catalog.max(%s) FROM %s", column, table), 0, nullptr,
	               nullptr, InvalidSnapshot, &highest))
		highest = 0;
	return highest;
}

void citus_raise_floor(int64 id, int64 token)
{
	Oid types[2] = {INT8OID, INT8OID};
	Datum values[2] = {Int64GetDatum(id), Int64GetDatum(token)};
	int rc = run_sql_as_owner("INSERT INTO fencing_citus.floors AS f (id, token) VALUES ($1, $2)"
	                          " ON CONFLICT (id) DO UPDATE SET token = EXCLUDED.token"
	                          " WHERE fencing.token_accepts(f.token, EXCLUDED.token, false)",
	                          2, types, values, InvalidSnapshot, false);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "fencing: raising a floor failed: %s", SPI_result_code_string(rc));
	SPI_finish();
}

void install_citus_support()
{
	previous_start = ExecutorStart_hook;
	ExecutorStart_hook = start_with_token;
	RegisterXactCallback(forget_sent_token, nullptr);
	RegisterSubXactCallback(forget_sent_token_sub, nullptr);
}

} // namespace fencing
