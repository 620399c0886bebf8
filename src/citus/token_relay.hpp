/*
 * Citus: SET LOCAL fencing.token (or set_config(..., true)) reaches the
 * workers through Citus' own propagation of SET LOCAL (see citus.hpp),
 * called from the executor and utility hooks of entry/module.cpp.
 */
#pragma once

#include "base/boundary.hpp"

extern "C" {
#include "access/xact.h"
#include "executor/execdesc.h"
#include "nodes/plannodes.h"
}

namespace fencing
{

/* ExecutorStart: sends the token if the workers lack it; notes a statement that writes. */
void citus_executor_start(QueryDesc *query);

/* Around ExecutorRun (also on error): counts the executors that run, one in the other. */
void citus_executor_run_begins();
void citus_executor_run_ends();

/* After ExecutorFinish: errors (55000) if fencing.token changed while the statement ran. */
void citus_executor_finish(QueryDesc *query);

/* ExecutorEnd: forgets a statement that ends without finishing. */
void citus_executor_end(QueryDesc *query);

/*
 * Before ProcessUtility: COPY FROM sends the token first; DROP TABLE of a
 * protected distributed table drops its marks table too (returns a copy of
 * the statement then, else the statement).
 */
PlannedStmt *citus_before_utility(PlannedStmt *statement);

/* At the end of a (sub)transaction: the workers' token is forgotten or unknown. */
void citus_end_of_transaction(XactEvent event);
void citus_end_of_subtransaction(SubXactEvent event);

/*
 * Is `call` (a function call's expression, flinfo->fn_expr) the whole of
 * the top-level statement that runs, SELECT f(...) outside a transaction
 * block, with nothing written on this node yet?  Then a single-shard write
 * it makes may commit on its worker in the same round trip, as the write of
 * a plain single-shard UPDATE statement does.
 */
bool citus_call_is_statement(const Node *call);

/*
 * From here to citus_commit_alone_end(): Citus sends a single-shard write
 * without BEGIN and COMMIT (citus.function_opens_transaction_block = off,
 * at a GUC nest level of its own) unless a transaction block, DO, procedure
 * or coordinated transaction needs them.  Only where
 * citus_call_is_statement().  An error restores the setting with the
 * transaction's abort.
 */
int citus_commit_alone();
void citus_commit_alone_end(int nest);

} // namespace fencing
