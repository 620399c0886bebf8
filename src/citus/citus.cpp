/*
 * Citus: marks co-located with shards, floors on every node, the coordinator's
 * TRUNCATE check, messages that name the distributed table, and fencing.token
 * handed to the workers.  See citus.hpp.  Nothing here runs unless Citus is
 * loaded and a table was protected as a distributed table.
 */
#include "citus/citus.hpp"
#include "base/compat.hpp"
#include "catalog/table.hpp"
#include "state/marks.hpp"
#include "state/token_setting.hpp"
#include "base/spi.hpp"
#include "base/rights.hpp"

extern "C" {
#include "access/relation.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/parsenodes.h"
#include "tcop/dest.h"
#include "tcop/pquery.h"
#include "tcop/tcopprot.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
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

/*
 * Runs a read-only query of Citus' metadata as the extension owner (the
 * caller may have no rights on fencing_citus); the caller reads the result
 * and finishes.
 */
void run_metadata_query(const char *sql, int nargs, Oid *types, Datum *values)
{
	caller_context = CurrentMemoryContext;
	int rc = run_sql(sql, nargs, types, values, InvalidSnapshot, true, true);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "fencing: reading Citus metadata failed: %s", SPI_result_code_string(rc));
}

/*
 * Is schema fencing_citus, with its table floors, the one the extension
 * made (owned by the extension owner)?  Any role with CREATE on the database
 * can make a schema of that name first: the extension then never reads or
 * writes it with rights other than the caller's.
 */
bool own_schema()
{
	Oid schema = get_namespace_oid("fencing_citus", true);
	if (!OidIsValid(schema))
		return false;
	Oid floors = get_relname_relid("floors", schema);
	Oid owner = extension_owner();
	HeapTuple tuple = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(schema));
	bool ours = HeapTupleIsValid(tuple) &&
	            reinterpret_cast<Form_pg_namespace>(GETSTRUCT(tuple))->nspowner == owner;
	if (HeapTupleIsValid(tuple))
		ReleaseSysCache(tuple);
	return ours && OidIsValid(floors) && relation_owner(floors) == owner;
}

/* Errors unless own_schema(). */
void require_own_schema()
{
	if (!own_schema())
		ereport(ERROR,
		        (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		         errmsg("schema \"fencing_citus\" was not made by the fencing extension"),
		         errdetail("The marks of distributed tables live there; another role owns it, or "
		                   "its table floors."),
		         errhint("Drop or rename that schema, then protect the table again.")));
}

/*
 * Runs `sql` on a Citus marks table as its owner (the protected table's
 * owner, who made it), with SECURITY_RESTRICTED_OPERATION: nothing that
 * owner defined on it runs with other rights.
 */
int run_on_marks(Oid marks, const char *sql, int nargs, Oid *types, Datum *values,
                 Snapshot snapshot, bool read_only)
{
	Rights saved = become(relation_owner(marks), SECURITY_NOFORCE_RLS, true);
	int rc = run_sql(sql, nargs, types, values, snapshot, read_only, false);
	restore(saved);
	return rc;
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
 * Not Citus API: an internal function that Citus 12.1 exports, found by
 * name; Citus 14 builds with hidden symbols, so there it is missing and
 * propagate_set_through_utility() reaches it through Citus' utility hook.
 */
using PropagateSet = void (*)(VariableSetStmt *, const char *);
PropagateSet propagate_set = nullptr;
bool propagate_set_looked_up = false;

/*
 * Runs the SET LOCAL through the utility hooks with
 * citus.propagate_set_commands = 'local', inside a DO block: Citus 14
 * propagates SET LOCAL only where it counts the statement as part of a
 * multi-statement transaction, and a DO block always is one (its
 * DoBlockLevel); a function called by a single statement is not at every
 * depth (Citus counts executor levels), and a SET LOCAL that reaches the
 * workers at one depth and not at the next would leave them checking
 * writes with the older token.  Both settings are saved at a GUC nest level
 * of their own and restored after it (as a function's SET clause does), so
 * fencing.token keeps its value, source and stack here, and
 * citus.propagate_set_commands its value.  `value` is digits or empty.
 */
void propagate_set_through_utility(const char *value)
{
	const char *current = GetConfigOption("fencing.token", false, false);
	int nest = NewGUCNestLevel();
	(void)set_config_option("citus.propagate_set_commands", "local", PGC_USERSET, PGC_S_SESSION,
	                        GUC_ACTION_SAVE, true, 0, false);
	(void)set_config_option("fencing.token", current == nullptr ? "" : current, PGC_USERSET,
	                        PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	const char *body = psprintf("BEGIN SET LOCAL fencing.token TO '%s'; END", value);
	DoStmt *block = makeNode(DoStmt);
	block->args =
	    list_make2(makeDefElem(pstrdup("as"),
	                           reinterpret_cast<Node *>(makeString(const_cast<char *>(body))), -1),
	               makeDefElem(pstrdup("language"),
	                           reinterpret_cast<Node *>(makeString(pstrdup("plpgsql"))), -1));
	PlannedStmt *wrapper = makeNode(PlannedStmt);
	wrapper->commandType = CMD_UTILITY;
	wrapper->canSetTag = false;
	wrapper->utilityStmt = reinterpret_cast<Node *>(block);
	wrapper->stmt_location = -1;
	wrapper->stmt_len = 0;
	ProcessUtility(wrapper, psprintf("DO $fencing$%s$fencing$", body), false, PROCESS_UTILITY_QUERY,
	               nullptr, nullptr, None_Receiver, nullptr);
	AtEOXact_GUC(true, nest);
}

/* The fencing.token the workers last got in this (sub)transaction: 0 none, -1 unknown. */
int64 sent_token = 0;

ExecutorStart_hook_type previous_start = nullptr;
ExecutorFinish_hook_type previous_finish = nullptr;
ExecutorEnd_hook_type previous_end = nullptr;
ProcessUtility_hook_type previous_utility = nullptr;

/* Hands the transaction's fencing.token to the workers if they do not have it yet. */
void send_token()
{
	/*
	 * Nothing writes in parallel mode, and no setting may change there: a
	 * parallel worker (or the leader, in a parallel-safe function) sends
	 * nothing; the next statement outside sends what is missing.
	 */
	if (!citus_loaded() || IsInParallelMode())
		return;
	int64 token = 0;
	if (!session_token(&token))
		token = 0;
	if (token == sent_token)
		return;
	if (!propagate_set_looked_up) {
		propagate_set = reinterpret_cast<PropagateSet>(
		    load_external_function("$libdir/citus", "PostprocessVariableSetStmt", false, nullptr));
		propagate_set_looked_up = true;
	}
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
	const char *text = psprintf("SET LOCAL fencing.token TO '%s'", value);
	if (propagate_set != nullptr)
		propagate_set(stmt, text);
	else
		propagate_set_through_utility(value);
	sent_token = token;
}

/*
 * The statements that write, with the token the workers had when each
 * started: the workers keep that token for the whole statement, so a
 * statement that changes fencing.token while it runs (set_config() in a
 * CTE, a function's SET clause) must not finish.
 */
struct Started {
	QueryDesc *query;
	int64 token;
	int level; /* transaction nesting level it started in */
};
FENCING_PLAIN_DATA(Started);
constexpr int max_started = 32;
Started started[max_started];
int nstarted = 0;

bool writes(const QueryDesc *query)
{
	return query->operation != CMD_SELECT ||
	       (query->plannedstmt != nullptr && query->plannedstmt->hasModifyingCTE);
}

/*
 * How many executors run in this backend, one inside the other: 1 while a
 * top-level statement runs (and not inside it, where SPI or a cursor's
 * fetch runs another).  Counted as Citus counts its ExecutorLevel.
 */
int executor_depth = 0;
ExecutorRun_hook_type previous_run = nullptr;

void run_counting(FENCING_EXECUTOR_RUN_PARAMS)
{
	executor_depth++;
	PG_TRY();
	{
		if (previous_run != nullptr)
			previous_run(FENCING_EXECUTOR_RUN_ARGS);
		else
			standard_ExecutorRun(FENCING_EXECUTOR_RUN_ARGS);
	}
	PG_FINALLY();
	{
		executor_depth--;
	}
	PG_END_TRY();
}

void start_with_token(QueryDesc *query, int eflags)
{
	guarded("ExecutorStart", [query] {
		send_token();
		if (citus_loaded() && writes(query) && nstarted < max_started)
			started[nstarted++] = Started{query, sent_token, GetCurrentTransactionNestLevel()};
	});
	if (previous_start != nullptr)
		previous_start(query, eflags);
	else
		standard_ExecutorStart(query, eflags);
}

void finish_with_token(QueryDesc *query)
{
	if (previous_finish != nullptr)
		previous_finish(query);
	else
		standard_ExecutorFinish(query);
	guarded("ExecutorFinish", [query] {
		for (int i = nstarted - 1; i >= 0; i--) {
			if (started[i].query != query)
				continue;
			int64 token = 0;
			if (!session_token(&token))
				token = 0;
			int64 at_start = started[i].token;
			started[i] = started[--nstarted];
			if (token != at_start || sent_token != at_start)
				ereport(ERROR,
				        (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				         errmsg("fencing.token changed while a statement that writes was running"),
				         errdetail("On Citus the workers keep the token a statement started "
				                   "with."),
				         errhint("Set fencing.token before the statement, not in it.")));
			return;
		}
	});
}

/*
 * A statement that ends without finishing (EXPLAIN without ANALYZE starts
 * executors that never run) leaves no entry behind: the table of started
 * statements stays free for those that do finish.
 */
void end_forgetting(QueryDesc *query)
{
	for (int i = nstarted - 1; i >= 0; i--)
		if (started[i].query == query)
			started[i] = started[--nstarted];
	if (previous_end != nullptr)
		previous_end(query);
	else
		standard_ExecutorEnd(query);
}

/*
 * The marks table of relation `relid` if it is a protected distributed table
 * of this coordinator (its guard's third argument is its own OID), else
 * InvalidOid.  On a worker a shard or a shell can have the OID a
 * coordinator's table has: those are never a marks table's.
 */
Oid marks_of(Oid relid, Oid marks_schema)
{
	Oid marks = get_relname_relid(psprintf("marks_%u", relid), marks_schema);
	if (!OidIsValid(marks) || !SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
		return InvalidOid;
	Relation rel = relation_open(relid, AccessShareLock);
	TableFence fence;
	bool protected_here = find_guard(rel, &fence) && fence.citus_id == static_cast<int64>(relid);
	relation_close(rel, AccessShareLock);
	return protected_here ? marks : InvalidOid;
}

/* Is this node Citus' coordinator, and is this not one of Citus' own connections? */
bool on_coordinator()
{
	const char *application = GetConfigOption("application_name", false, false);
	if (application != nullptr && strncmp(application, "citus_internal", 14) == 0)
		return false;
	run_metadata_query("SELECT pg_catalog.citus_is_coordinator()", 0, nullptr, nullptr);
	bool isnull = true;
	bool coordinator = SPI_processed > 0 && DatumGetBool(result_value(0, 1, &isnull)) && !isnull;
	SPI_finish();
	return coordinator;
}

/*
 * DROP TABLE of protected distributed tables drops their marks tables in
 * the same command, as the same user: Citus wants co-located tables dropped
 * by whoever holds their shards' connections in the transaction.  Returns
 * the statement, or a copy with the marks tables added.  DROP SCHEMA drops
 * the marks tables of the protected tables in it first (if the user may).
 */
PlannedStmt *with_marks_dropped(PlannedStmt *statement)
{
	auto *drop = reinterpret_cast<DropStmt *>(statement->utilityStmt);
	if (drop->removeType != OBJECT_TABLE && drop->removeType != OBJECT_SCHEMA)
		return statement;
	Oid schema = get_namespace_oid("fencing_citus", true);
	if (!OidIsValid(schema) || !own_schema() || !on_coordinator())
		return statement;
	List *marks = NIL;
	ListCell *cell;
	if (drop->removeType == OBJECT_TABLE) {
		foreach (cell, drop->objects) {
			RangeVar *table = makeRangeVarFromNameList(static_cast<List *>(lfirst(cell)));
			Oid marks_table = marks_of(RangeVarGetRelid(table, NoLock, true), schema);
			if (OidIsValid(marks_table))
				marks = lappend(marks, list_make2(makeString(pstrdup("fencing_citus")),
				                                  makeString(get_rel_name(marks_table))));
		}
	} else {
		foreach (cell, drop->objects) {
			Oid dropped = get_namespace_oid(strVal(lfirst(cell)), true);
			if (!OidIsValid(dropped))
				continue;
			Oid types[1] = {OIDOID};
			Datum values[1] = {ObjectIdGetDatum(dropped)};
			run_metadata_query("SELECT c.oid FROM pg_catalog.pg_class c"
			                   " WHERE c.relnamespace = $1 AND c.relkind = 'r'",
			                   1, types, values);
			/* In the caller's memory: SPI_finish() frees SPI's. */
			List *relids = NIL;
			MemoryContext spi_context = MemoryContextSwitchTo(caller_context);
			for (uint64 i = 0; i < SPI_processed; i++) {
				bool isnull;
				relids = lappend_oid(relids, DatumGetObjectId(result_value(i, 1, &isnull)));
			}
			MemoryContextSwitchTo(spi_context);
			SPI_finish();
			ListCell *relid;
			foreach (relid, relids) {
				Oid marks_table = marks_of(lfirst_oid(relid), schema);
				if (!OidIsValid(marks_table))
					continue;
				if (!owns_relation(marks_table, GetUserId())) {
					ereport(WARNING, (errmsg("the marks table %s stays: it is not yours to drop",
					                         get_rel_name(marks_table)),
					                  errhint("Its owner may drop fencing_citus.%s.",
					                          get_rel_name(marks_table))));
					continue;
				}
				int rc = run_sql(psprintf("DROP TABLE fencing_citus.%s",
				                          quote_identifier(get_rel_name(marks_table))),
				                 0, nullptr, nullptr, InvalidSnapshot, false, false);
				if (rc != SPI_OK_UTILITY)
					elog(ERROR, "fencing: dropping a marks table failed: %s",
					     SPI_result_code_string(rc));
				SPI_finish();
			}
		}
		return statement;
	}
	if (marks == NIL)
		return statement;
	PlannedStmt *copy = static_cast<PlannedStmt *>(copyObjectImpl(statement));
	auto *copied = reinterpret_cast<DropStmt *>(copy->utilityStmt);
	copied->objects = list_concat(copied->objects, marks);
	return copy;
}

/*
 * COPY runs no executor: hand the token over before it starts.  DROP TABLE:
 * the marks tables too.
 */
void utility_with_token(PlannedStmt *statement, const char *text, bool read_only,
                        ProcessUtilityContext context, ParamListInfo params, QueryEnvironment *env,
                        DestReceiver *dest, QueryCompletion *completion)
{
	Node *parsed = statement->utilityStmt;
	if (IsA(parsed, CopyStmt) && reinterpret_cast<CopyStmt *>(parsed)->is_from)
		guarded("ProcessUtility", [] { send_token(); });
	if (IsA(parsed, DropStmt) && citus_loaded())
		statement =
		    guarded("ProcessUtility", [statement] { return with_marks_dropped(statement); });
	if (previous_utility != nullptr)
		previous_utility(statement, text, read_only, context, params, env, dest, completion);
	else
		standard_ProcessUtility(statement, text, read_only, context, params, env, dest, completion);
}

void forget_sent_token(XactEvent event, void *)
{
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
	    event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT ||
	    event == XACT_EVENT_PREPARE) {
		sent_token = 0;
		nstarted = 0;
	}
}

/*
 * A subtransaction that ends either way leaves Citus with the SET LOCAL
 * commands of the outer one for the connections it opens next (a released
 * savepoint's are forgotten, a rolled-back one's undone): send again.
 */
void forget_sent_token_sub(SubXactEvent event, SubTransactionId, SubTransactionId, void *)
{
	if (event == SUBXACT_EVENT_ABORT_SUB || event == SUBXACT_EVENT_COMMIT_SUB)
		sent_token = -1;
	/* Statements the subtransaction's error cut short finish nowhere: forget them. */
	if (event == SUBXACT_EVENT_ABORT_SUB)
		for (int i = nstarted - 1; i >= 0; i--)
			if (started[i].level >= GetCurrentTransactionNestLevel())
				started[i] = started[--nstarted];
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
	run_metadata_query("SELECT FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1", 1, types,
	                   values);
	bool distributed = SPI_processed > 0;
	SPI_finish();
	return distributed;
}

CitusShard citus_shard(Relation shard, int64 id)
{
	require_own_schema();
	int64 shard_id = shard_id_of(shard);
	Oid types[4] = {INT8OID, TEXTOID, OIDOID, TEXTOID};
	Datum values[4] = {Int64GetDatum(shard_id),
	                   CStringGetTextDatum(psprintf("fencing_citus.marks_" INT64_FORMAT, id)),
	                   ObjectIdGetDatum(RelationGetNamespace(shard)),
	                   CStringGetTextDatum(RelationGetRelationName(shard))};
	run_metadata_query(
	    "SELECT pg_catalog.to_regclass(pg_catalog.shard_name(m.logicalrelid, "
	    "m.shardid))::pg_catalog.oid,"
	    "       pg_catalog.to_regclass(pg_catalog.shard_name(f.logicalrelid, "
	    "f.shardid))::pg_catalog.oid,"
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
	if (!found || !OidIsValid(placement.marks) || !OidIsValid(placement.floors) ||
	    column == nullptr) {
		const char *qualified = nullptr, *name = RelationGetRelationName(shard);
		(void)citus_logical_name(shard, &qualified, &name, nullptr);
		ereport(ERROR,
		        (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		         errmsg("the deleted-key marks of relation \"%s\" are not on this node", name),
		         errdetail("fencing_citus.marks_" INT64_FORMAT " must stay co-located with the "
		                   "table, and fencing_citus.floors must be a reference table.",
		                   id),
		         errhint("Move the marks table's shards to the table's shards' nodes and run "
		                 "update_distributed_table_colocation('fencing_citus.marks_" INT64_FORMAT
		                 "', colocate_with => %s).",
		                 id, quote_literal_cstr(qualified ? qualified : quote_identifier(name)))));
	}
	/* A forged marks id on a shard's guard cannot reach another owner's marks. */
	if (relation_owner(placement.marks) != shard->rd_rel->relowner)
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("the deleted-key marks of relation \"%s\" belong to another role",
		                       RelationGetRelationName(shard)),
		                errhint("Run fencing.protect() on the distributed table again.")));
	placement.dist_attnum = get_attnum(RelationGetRelid(shard), column);
	if (placement.dist_attnum == InvalidAttrNumber)
		elog(ERROR, "fencing: distribution column \"%s\" not found in shard \"%s\"", column,
		     RelationGetRelationName(shard));
	placement.dist_type = get_atttype(RelationGetRelid(shard), placement.dist_attnum);
	return placement;
}

namespace
{

/*
 * The Citus tables of the shards this backend wrote, by shard relation: the
 * guard of a shard needs its table's name for each statement (three
 * triggers), and a metadata query each time costs more than the write.  A
 * shard's relation maps to one table for as long as it exists under its name
 * (shard ids are never reused); an entry goes when the relcache forgets its
 * relation (DROP, RENAME, SET SCHEMA, a move that drops the placement, an
 * aborted transaction that made it).  Bounded: a few entries, reused in turn.
 */
struct LogicalName {
	Oid shard;
	Oid schema;
	NameData relname;
	char *qualified; /* in TopMemoryContext */
	char *name;
	bool hash;
};
FENCING_PLAIN_DATA(LogicalName);
constexpr int logical_names_kept = 32;
LogicalName logical_names[logical_names_kept];
int next_logical_name = 0;
bool logical_names_watched = false;

void forget_logical_name(Datum, Oid relid)
{
	for (LogicalName &entry : logical_names)
		if (OidIsValid(entry.shard) && (!OidIsValid(relid) || entry.shard == relid))
			entry.shard = InvalidOid;
}

LogicalName *known_logical_name(Relation rel)
{
	for (LogicalName &entry : logical_names)
		if (OidIsValid(entry.shard) && entry.shard == RelationGetRelid(rel) &&
		    entry.schema == RelationGetNamespace(rel) &&
		    strcmp(NameStr(entry.relname), RelationGetRelationName(rel)) == 0)
			return &entry;
	return nullptr;
}

void keep_logical_name(Relation rel, const char *qualified, const char *name, bool hash)
{
	if (!logical_names_watched) {
		CacheRegisterRelcacheCallback(forget_logical_name, 0);
		logical_names_watched = true;
	}
	LogicalName &entry = logical_names[next_logical_name];
	next_logical_name = (next_logical_name + 1) % logical_names_kept;
	entry.shard = InvalidOid;
	if (entry.qualified != nullptr)
		pfree(entry.qualified);
	if (entry.name != nullptr)
		pfree(entry.name);
	entry.qualified = MemoryContextStrdup(TopMemoryContext, qualified);
	entry.name = MemoryContextStrdup(TopMemoryContext, name);
	entry.schema = RelationGetNamespace(rel);
	namestrcpy(&entry.relname, RelationGetRelationName(rel));
	entry.hash = hash;
	entry.shard = RelationGetRelid(rel);
}

} // namespace

bool citus_logical_name(Relation rel, const char **qualified, const char **name,
                        bool *hash_distributed)
{
	int64 shard_id = shard_id_of(rel);
	if (shard_id == 0 || !citus_loaded())
		return false;
	if (const LogicalName *known = known_logical_name(rel)) {
		*qualified = pstrdup(known->qualified);
		*name = pstrdup(known->name);
		if (hash_distributed != nullptr)
			*hash_distributed = known->hash;
		return true;
	}
	Oid types[3] = {INT8OID, OIDOID, TEXTOID};
	Datum values[3] = {Int64GetDatum(shard_id), ObjectIdGetDatum(RelationGetNamespace(rel)),
	                   CStringGetTextDatum(RelationGetRelationName(rel))};
	run_metadata_query(
	    "SELECT pg_catalog.quote_ident(n.nspname) OPERATOR(pg_catalog.||) '.'"
	    "       OPERATOR(pg_catalog.||) pg_catalog.quote_ident(c.relname),"
	    "       c.relname::pg_catalog.text, p.partmethod OPERATOR(pg_catalog.=) 'h'"
	    " FROM pg_catalog.pg_dist_shard s JOIN pg_catalog.pg_class c ON c.oid = s.logicalrelid"
	    " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
	    " JOIN pg_catalog.pg_dist_partition p ON p.logicalrelid = s.logicalrelid"
	    " WHERE s.shardid = $1 AND c.relnamespace = $2"
	    "  AND c.relname OPERATOR(pg_catalog.||) '_' OPERATOR(pg_catalog.||) $1 = $3",
	    3, types, values);
	bool found = SPI_processed > 0;
	bool hash = false;
	if (found) {
		*qualified = result_text(1);
		*name = result_text(2);
		bool isnull;
		hash = DatumGetBool(result_value(0, 3, &isnull)) && !isnull;
		if (hash_distributed != nullptr)
			*hash_distributed = hash;
	}
	SPI_finish();
	if (found)
		keep_logical_name(rel, *qualified, *name, hash);
	return found;
}

bool citus_shard_named(Relation rel, const Trigger *trigger, const char **qualified,
                       const char **name)
{
	int64 shard_id = shard_id_of(rel);
	if (shard_id == 0 || !citus_loaded())
		return false;
	const char *suffix = psprintf("_" INT64_FORMAT, shard_id);
	size_t suffix_length = strlen(suffix);
	const char *relname = RelationGetRelationName(rel);
	size_t relname_length = strlen(relname);
	size_t tgname_length = strlen(trigger->tgname);
	if (relname_length <= suffix_length || tgname_length <= suffix_length ||
	    strcmp(relname + relname_length - suffix_length, suffix) != 0 ||
	    strcmp(trigger->tgname + tgname_length - suffix_length, suffix) != 0 ||
	    !guard_trigger_named(pnstrdup(trigger->tgname, tgname_length - suffix_length)))
		return false;
	/*
	 * A table name too long for the suffix: Citus cut it (at a character
	 * boundary, up to 3 bytes short) and put a hash of the whole name before
	 * the suffix ("<cut>_<8 hex digits>_<shard id>", 60 to 63 bytes), so the
	 * table's name is not there to read.
	 */
	size_t base_length = relname_length - suffix_length;
	constexpr size_t hash_length = 9; /* "_" and 8 hex digits */
	if (relname_length + 4 >= NAMEDATALEN && base_length > hash_length &&
	    relname[base_length - hash_length] == '_' &&
	    strspn(relname + base_length - hash_length + 1, "0123456789abcdef") == hash_length - 1)
		return false;
	*name = pnstrdup(relname, base_length);
	*qualified = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)), *name);
	return true;
}

void citus_record_mark(const CitusShard &shard, Datum dist_value, const KeyHash &key, int64 token)
{
	const char *marks = quote_qualified_identifier(
	    get_namespace_name(get_rel_namespace(shard.marks)), get_rel_name(shard.marks));
	Oid types[3] = {shard.dist_type, BYTEAOID, INT8OID};
	Datum values[3] = {dist_value, key_hash_datum(key), Int64GetDatum(token)};
	int rc = run_on_marks(shard.marks,
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

/* Runs a query for one bigint (a max); false if it is NULL. */
bool max_token(const char *sql, int nargs, Oid *types, Datum *values, Snapshot snapshot,
               bool as_owner, int64 *result)
{
	int rc = run_sql(sql, nargs, types, values, snapshot, true, as_owner);
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
	const char *marks = quote_qualified_identifier(
	    get_namespace_name(get_rel_namespace(shard.marks)), get_rel_name(shard.marks));
	const char *floors = quote_qualified_identifier(
	    get_namespace_name(get_rel_namespace(shard.floors)), get_rel_name(shard.floors));
	Oid types[1] = {BYTEAOID};
	Datum values[1] = {key_hash_datum(key)};
	/* The marks as their owner, the floor (the extension's) as the extension owner. */
	int rc = run_on_marks(shard.marks,
	                      psprintf("SELECT pg_catalog.max(token) FROM %s"
	                               " WHERE key OPERATOR(pg_catalog.=) $1",
	                               marks),
	                      1, types, values, GetLatestSnapshot(), true);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "fencing: reading tokens failed: %s", SPI_result_code_string(rc));
	bool isnull = true;
	if (SPI_processed > 0)
		*mark = DatumGetInt64(result_value(0, 1, &isnull));
	SPI_finish();
	bool found = !isnull;
	int64 floor = 0;
	Oid floor_types[1] = {INT8OID};
	Datum floor_values[1] = {Int64GetDatum(shard.id)};
	if (max_token(psprintf("SELECT token FROM %s WHERE id OPERATOR(pg_catalog.=) $1", floors), 1,
	              floor_types, floor_values, GetLatestSnapshot(), true, &floor) &&
	    (!found || floor > *mark)) {
		*mark = floor;
		found = true;
	}
	return found;
}

bool citus_find_high_water_anywhere(int64 id, const KeyHash &key, int64 *mark)
{
	/*
	 * Through Citus, so as the current user: Citus wants the table's shards
	 * and the co-located marks read with the connections that wrote them.
	 * A caller who may not read the marks table is told nothing of them.
	 */
	require_own_schema();
	Oid marks = get_relname_relid(psprintf("marks_" INT64_FORMAT, id),
	                              get_namespace_oid("fencing_citus", false));
	if (!OidIsValid(marks) || pg_class_aclcheck(marks, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		return false;
	Oid types[1] = {BYTEAOID};
	Datum values[1] = {key_hash_datum(key)};
	bool found =
	    max_token(psprintf("SELECT pg_catalog.max(token) FROM fencing_citus.marks_" INT64_FORMAT
	                       " WHERE key OPERATOR(pg_catalog.=) $1",
	                       id),
	              1, types, values, InvalidSnapshot, false, mark);
	/* The floor, read as the extension owner: nothing of this transaction's touches it. */
	int64 floor = 0;
	Oid floor_types[1] = {INT8OID};
	Datum floor_values[1] = {Int64GetDatum(id)};
	if (max_token("SELECT token FROM fencing_citus.floors WHERE id OPERATOR(pg_catalog.=) $1", 1,
	              floor_types, floor_values, InvalidSnapshot, true, &floor) &&
	    (!found || floor > *mark)) {
		*mark = floor;
		found = true;
	}
	return found;
}

int64 citus_highest_stored(Relation rel, AttrNumber token_attnum)
{
	const char *table = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
	                                               RelationGetRelationName(rel));
	const char *column = quote_identifier(get_attname(RelationGetRelid(rel), token_attnum, false));
	int64 highest = 0;
	/* As the current user, with the connections that hold the table's lock. */
	if (!max_token(psprintf("SELECT pg_catalog.max(%s) FROM %s", column, table), 0, nullptr,
	               nullptr, InvalidSnapshot, false, &highest))
		highest = 0;
	return highest;
}

void citus_raise_floor(int64 id, int64 token)
{
	require_own_schema();
	Oid types[2] = {INT8OID, INT8OID};
	Datum values[2] = {Int64GetDatum(id), Int64GetDatum(token)};
	int rc = run_sql("INSERT INTO fencing_citus.floors AS f (id, token) VALUES ($1, $2)"
	                 " ON CONFLICT (id) DO UPDATE SET token = EXCLUDED.token"
	                 " WHERE fencing.token_accepts(f.token, EXCLUDED.token, false)",
	                 2, types, values, InvalidSnapshot, false, true);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "fencing: raising a floor failed: %s", SPI_result_code_string(rc));
	SPI_finish();
}

int64 citus_remove_marks(int64 id, int64 below)
{
	/* As the marks table's owner (the table's), even when a superuser compacts. */
	require_own_schema();
	Oid marks = get_relname_relid(psprintf("marks_" INT64_FORMAT, id),
	                              get_namespace_oid("fencing_citus", false));
	if (!OidIsValid(marks))
		return 0;
	Oid types[1] = {INT8OID};
	Datum values[1] = {Int64GetDatum(below)};
	int rc = run_on_marks(marks,
	                      psprintf("DELETE FROM fencing_citus.marks_" INT64_FORMAT
	                               " WHERE token OPERATOR(pg_catalog.<) $1",
	                               id),
	                      1, types, values, InvalidSnapshot, false);
	if (rc != SPI_OK_DELETE)
		elog(ERROR, "fencing: removing marks failed: %s", SPI_result_code_string(rc));
	int64 removed = static_cast<int64>(SPI_processed);
	SPI_finish();
	return removed;
}

namespace
{

/*
 * Does the commit of this transaction follow the running statement, with
 * nothing in between?  A single statement of a simple Query message (the
 * unnamed portal without a cached plan; a query string of several
 * statements runs in an implicit transaction block, refused before), or an
 * Execute message whose next message, already received, is Sync.  Not
 * after another Execute in the same transaction (a pipeline), and not when
 * the next message is not known yet: a pipelining client may send more
 * statements of the same implicit transaction, and an error in any of them
 * rolls back all, which a write the worker committed at once would survive.
 */
bool commit_follows(const Portal portal)
{
	if ((MyXactFlags & XACT_FLAGS_PIPELINING) != 0 || portal->name == nullptr ||
	    portal->name[0] != '\0' || (portal->cursorOptions & CURSOR_OPT_HOLD) != 0 ||
	    portal->portalPinned || whereToSendOutput != DestRemote)
		return false;
	if (portal->cplan == nullptr)
		return true;
	if (pq_is_reading_msg() || !FENCING_CLIENT_DATA_BUFFERED())
		return false;
	pq_startmsgread();
	int next = pq_peekbyte();
	pq_endmsgread();
	return next == 'S';
}

} // namespace

bool citus_call_is_statement(const Node *call)
{
	/*
	 * A top-level statement outside any transaction block, which has
	 * written nothing on this node yet, and whose commit follows it
	 * directly: Citus may commit a single-shard write on its worker right
	 * away, as it does that of a plain UPDATE statement.  Writes through
	 * Citus before this call (in its arguments) opened a coordinated
	 * transaction, which Citus then keeps using.  Not a cursor (WITH HOLD:
	 * it runs at commit, before the other holdable cursors of the
	 * transaction, which may fail).
	 */
	if (!citus_loaded() || call == nullptr || executor_depth != 1 || IsTransactionBlock() ||
	    IsSubTransaction() || TransactionIdIsValid(GetTopTransactionIdIfAny()) ||
	    ActivePortal == nullptr || list_length(ActivePortal->stmts) != 1)
		return false;
	Node *node = static_cast<Node *>(linitial(ActivePortal->stmts));
	if (!IsA(node, PlannedStmt))
		return false;
	auto *statement = reinterpret_cast<PlannedStmt *>(node);
	Plan *plan = statement->planTree;
	/*
	 * SELECT <this call>: a Result without input or condition whose only
	 * column is this very call - nothing of the statement runs after it.
	 */
	if (statement->commandType != CMD_SELECT || statement->hasModifyingCTE || plan == nullptr ||
	    !IsA(plan, Result) || plan->lefttree != nullptr || plan->righttree != nullptr ||
	    plan->qual != NIL || plan->initPlan != NIL ||
	    reinterpret_cast<Result *>(plan)->resconstantqual != nullptr ||
	    list_length(plan->targetlist) != 1)
		return false;
	if (reinterpret_cast<Node *>(static_cast<TargetEntry *>(linitial(plan->targetlist))->expr) !=
	    call)
		return false;
	return commit_follows(ActivePortal);
}

int citus_commit_alone()
{
	int nest = NewGUCNestLevel();
	(void)set_config_option("citus.function_opens_transaction_block", "off", PGC_USERSET,
	                        PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	return nest;
}

void citus_commit_alone_end(int nest)
{
	AtEOXact_GUC(true, nest);
}

void install_citus_support()
{
	previous_start = ExecutorStart_hook;
	ExecutorStart_hook = start_with_token;
	previous_finish = ExecutorFinish_hook;
	ExecutorFinish_hook = finish_with_token;
	previous_end = ExecutorEnd_hook;
	ExecutorEnd_hook = end_forgetting;
	previous_run = ExecutorRun_hook;
	ExecutorRun_hook = run_counting;
	previous_utility = ProcessUtility_hook;
	ProcessUtility_hook = utility_with_token;
	RegisterXactCallback(forget_sent_token, nullptr);
	RegisterSubXactCallback(forget_sent_token_sub, nullptr);
}

} // namespace fencing
