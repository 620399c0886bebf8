/*
 * Citus: fencing.token handed to the workers (see citus.hpp), and the
 * statements a worker may commit alone.  The executor and utility hooks of
 * entry/module.cpp call in here.
 */
#include "citus/token_relay.hpp"
#include "citus/citus.hpp"
#include "base/compat.hpp"
#include "base/spi.hpp"
#include "state/table_settings.hpp"
#include "state/token_setting.hpp"

extern "C" {
#include "access/relation.h"
#include "access/xact.h"
#include "catalog/namespace.h"
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

void start_with_token(QueryDesc *query)
{
	guarded("ExecutorStart", [query] {
		send_token();
		if (citus_loaded() && writes(query) && nstarted < max_started)
			started[nstarted++] = Started{query, sent_token, GetCurrentTransactionNestLevel()};
	});
}

void finish_with_token(QueryDesc *query)
{
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
	TableSettings fence;
	bool protected_here = find_guard(rel, &fence) && fence.citus_id == static_cast<int64>(relid);
	relation_close(rel, AccessShareLock);
	return protected_here ? marks : InvalidOid;
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
	if (!OidIsValid(schema) || !citus_own_schema() || !on_coordinator())
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
			/* In the caller's memory: SPI_finish() frees SPI's. */
			List *relids = NIL;
			citus_metadata_query(
			    "SELECT c.oid FROM pg_catalog.pg_class c"
			    " WHERE c.relnamespace = $1 AND c.relkind = 'r'",
			    1, types, values, [&] {
				    MemoryContext spi_context = MemoryContextSwitchTo(citus_caller_context());
				    for (uint64 i = 0; i < SPI_processed; i++) {
					    bool isnull;
					    relids = lappend_oid(relids, DatumGetObjectId(result_value(i, 1, &isnull)));
				    }
				    MemoryContextSwitchTo(spi_context);
			    });
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
				run_sql(psprintf("DROP TABLE fencing_citus.%s",
				                 quote_identifier(get_rel_name(marks_table))),
				        0, nullptr, nullptr, InvalidSnapshot, false, false, [](int rc) {
					        expect_result(rc, SPI_OK_UTILITY, "dropping a marks table");
				        });
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
PlannedStmt *utility_with_token(PlannedStmt *statement)
{
	Node *parsed = statement->utilityStmt;
	if (IsA(parsed, CopyStmt) && reinterpret_cast<CopyStmt *>(parsed)->is_from)
		guarded("ProcessUtility", [] { send_token(); });
	if (IsA(parsed, DropStmt) && citus_loaded())
		statement =
		    guarded("ProcessUtility", [statement] { return with_marks_dropped(statement); });
	return statement;
}

void forget_sent_token(XactEvent event)
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
void forget_sent_token_sub(SubXactEvent event)
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

void citus_executor_start(QueryDesc *query)
{
	start_with_token(query);
}

void citus_executor_run_begins()
{
	executor_depth++;
}

void citus_executor_run_ends()
{
	executor_depth--;
}

void citus_executor_finish(QueryDesc *query)
{
	finish_with_token(query);
}

void citus_executor_end(QueryDesc *query)
{
	end_forgetting(query);
}

PlannedStmt *citus_before_utility(PlannedStmt *statement)
{
	return utility_with_token(statement);
}

void citus_end_of_transaction(XactEvent event)
{
	forget_sent_token(event);
}

void citus_end_of_subtransaction(SubXactEvent event)
{
	forget_sent_token_sub(event);
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

} // namespace fencing
