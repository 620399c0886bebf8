/*
 * MERGE into a protected table, as a statement or (from PostgreSQL 17 on)
 * as a WITH query of another: its UPDATE actions must all assign the token
 * column, or none of them - WHEN MATCHED ones and, from 17 on, WHEN NOT
 * MATCHED BY SOURCE ones alike (a row that no source row matches is updated,
 * and fenced, like any other).
 *
 * A row trigger sees the union of the columns that a statement's actions
 * assign (tg_updatedcols), not the action a row took; the new row of an
 * action that does not assign the token column carries the stored token.
 * With mixed actions the guard could not tell "assigned the stored token"
 * from "assigned nothing" - the same only when fencing.token is set, where
 * a write-back of the stored token is no token - so such a MERGE is refused
 * before it runs, whatever fencing.token holds.  The
 * check runs when a statement starts and again when it finishes (entry/module.cpp
 * calls it from both hooks): the guard loads this module on its first row, so
 * a MERGE may have started before the hooks were in place, and its error at
 * finish undoes it all the same.
 */
#include "guard/merge_check.hpp"
#include "base/compat.hpp"
#include "state/table_settings.hpp"

extern "C" {
#include "access/relation.h"
#include "executor/executor.h"
#include "nodes/plannodes.h"
#include "parser/parsetree.h"
#include "utils/lsyscache.h"
}

namespace
{

/* Refuses a MERGE whose UPDATE actions disagree about a protected table's token column. */
void check_merge_plan(const PlannedStmt *statement, const Plan *plan)
{
	if (plan == nullptr || !IsA(plan, ModifyTable) ||
	    reinterpret_cast<const ModifyTable *>(plan)->operation != CMD_MERGE)
		return;
	auto *modify = reinterpret_cast<const ModifyTable *>(plan);
	const ListCell *result, *actions;
	forboth(result, modify->resultRelations, actions, modify->mergeActionLists)
	{
		Oid relid = rt_fetch(lfirst_int(result), statement->rtable)->relid;
		Relation rel = relation_open(relid, NoLock);
		fencing::TableSettings fence;
		bool guarded = fencing::find_guard(rel, &fence);
		relation_close(rel, NoLock);
		if (!guarded)
			continue;
		int assigning = 0, other = 0;
		const ListCell *cell;
		foreach (cell, static_cast<const List *>(lfirst(actions))) {
			auto *action = static_cast<const MergeAction *>(lfirst(cell));
			if (fencing::merge_action_on_target_row(action) && action->commandType == CMD_UPDATE)
				(list_member_int(action->updateColnos, fence.token_attnum) ? assigning : other)++;
		}
		if (assigning > 0 && other > 0) {
			const char *column = get_attname(relid, fence.token_attnum, false);
			ereport(ERROR,
			        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			         errmsg("MERGE into protected relation \"%s\" assigns the fencing token column "
			                "in some UPDATE actions but not in others",
			                get_rel_name(relid)),
			         errdetail("A row that takes an action not assigning column \"%s\" would "
			                   "present its stored token as its own.",
			                   column),
			         errhint("Assign \"%s\" in every UPDATE action, or in none and "
			                 "SET LOCAL fencing.token = <token>.",
			                 column)));
		}
	}
}

/*
 * Every MERGE of the statement: the statement itself, and from PostgreSQL
 * 17 on one in a WITH query (MERGE ... RETURNING), whose ModifyTable tops a
 * subplan of a statement that is a SELECT, an INSERT or anything else.
 */
void check_merge(const QueryDesc *query)
{
	const PlannedStmt *statement = query->plannedstmt;
	if (statement == nullptr)
		return;
	check_merge_plan(statement, statement->planTree);
	const ListCell *cell;
	foreach (cell, statement->subplans)
		check_merge_plan(statement, static_cast<const Plan *>(lfirst(cell)));
}

} // namespace

namespace fencing
{

void merge_check(const QueryDesc *query)
{
	guarded("MERGE check", [query]() { check_merge(query); });
}

} // namespace fencing
