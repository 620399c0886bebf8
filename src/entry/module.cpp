/*
 * The module's entry: PG_MODULE_MAGIC, _PG_init, and every hook the
 * extension takes from PostgreSQL, each installed once, here, chaining the
 * one that was there before.  A hook dispatches to the features in the
 * order its list below gives (and says why); no other file assigns a hook
 * variable.  The settings are defined in settings.cpp, before the hooks.
 *
 * The module is loaded server-wide, and most databases of a server may not
 * have the extension: every hook asks fencing::extension_installed()
 * (catalog/extension.hpp) first, and in a database without it (or while
 * this backend runs the extension's own CREATE or ALTER EXTENSION script)
 * it does PostgreSQL's work alone: no catalog read of the extension's, no
 * SPI, no error, no state kept.  What a hook only lets go of (ExecutorEnd,
 * the end of a (sub)transaction) is state that a hook or function of the
 * extension made after asking; it is let go of whatever the answer is now
 * (the extension may have been dropped since), and read no catalog, since
 * those run also in an aborted transaction and after the commit.
 *
 * To add a feature to a hook: export a plain function from the feature
 * (before or after PostgreSQL's work, as it needs), call it from the hook
 * below at the place its order asks for, and add it to that hook's list.
 * The same for the end of a transaction: one XactCallback and one
 * SubXactCallback dispatch to every feature.  One exception:
 * require_durable_commit() (state/token_issue.cpp) registers its callbacks
 * when a grant first needs them, so that they run before every other
 * callback of the transaction, other modules' included.
 */
#include "admin/ddl.hpp"
#include "base/boundary.hpp"
#include "base/compat.hpp"
#include "base/shared_memory.hpp"
#include "catalog/extension.hpp"
#include "citus/citus_marks.hpp"
#include "citus/token_relay.hpp"
#include "entry/settings.hpp"
#include "guard/merge_check.hpp"
#include "leases/lease_queue.hpp"
#include "reporting/rollout.hpp"
#include "reporting/lease_stats.hpp"
#include "reporting/stats.hpp"
#include "state/lease_grace.hpp"
#include "state/lease_memory.hpp"
#include "state/token_issue.hpp"
#include "state/token_setting.hpp"

extern "C" {
#include "access/xact.h"
#include "catalog/objectaccess.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "tcop/utility.h"
#include "utils/guc.h"

FENCING_MODULE_MAGIC;
void _PG_init(void);
}

namespace
{

/* Loaded by shared_preload_libraries: only then is there shared memory (stats, token windows). */
bool preloaded = false;

ExecutorStart_hook_type previous_executor_start = nullptr;
ExecutorRun_hook_type previous_executor_run = nullptr;
ExecutorFinish_hook_type previous_executor_finish = nullptr;
ExecutorEnd_hook_type previous_executor_end = nullptr;
ProcessUtility_hook_type previous_process_utility = nullptr;
shmem_request_hook_type previous_shmem_request = nullptr;
shmem_startup_hook_type previous_shmem_startup = nullptr;
object_access_hook_type previous_object_access = nullptr;

/*
 * ExecutorStart, where the extension is installed:
 *  1. Citus: the workers get fencing.token before the statement runs, and a
 *     statement that writes is noted (citus/token_relay);
 *  2. the MERGE check (guard/merge_check), before anything is written;
 *  3. the previous hook, or PostgreSQL's;
 *  4. the report-only guards' LOG line counts the executors running
 *     (reporting/rollout).
 */
void executor_start(QueryDesc *query, int eflags)
{
	bool installed = fencing::extension_installed();
	if (installed) {
		fencing::citus_executor_start(query);
		fencing::merge_check(query);
	}
	if (previous_executor_start != nullptr)
		previous_executor_start(query, eflags);
	else
		standard_ExecutorStart(query, eflags);
	if (installed)
		fencing::rollout_executor_start();
}

/*
 * ExecutorRun: the previous hook or PostgreSQL's, with Citus' count of the
 * executors that run one inside the other around it (where the extension
 * is installed), also on error.
 */
void executor_run(FENCING_EXECUTOR_RUN_PARAMS)
{
	bool installed = fencing::extension_installed();
	if (installed)
		fencing::citus_executor_run_begins();
	PG_TRY();
	{
		if (previous_executor_run != nullptr)
			previous_executor_run(FENCING_EXECUTOR_RUN_ARGS);
		else
			standard_ExecutorRun(FENCING_EXECUTOR_RUN_ARGS);
	}
	PG_FINALLY();
	{
		if (installed)
			fencing::citus_executor_run_ends();
	}
	PG_END_TRY();
}

/*
 * ExecutorFinish, where the extension is installed:
 *  1. the MERGE check again (the module may have loaded after the statement
 *     started: the guard loads it on its first row);
 *  2. the previous hook, or PostgreSQL's (AFTER triggers run there);
 *  3. Citus: fencing.token must not have changed while the statement ran.
 */
void executor_finish(QueryDesc *query)
{
	bool installed = fencing::extension_installed();
	if (installed)
		fencing::merge_check(query);
	if (previous_executor_finish != nullptr)
		previous_executor_finish(query);
	else
		standard_ExecutorFinish(query);
	if (installed)
		fencing::citus_executor_finish(query);
}

/*
 * ExecutorEnd, letting go of what ExecutorStart noted (nothing where the
 * extension is not installed):
 *  1. Citus forgets a statement that ended without finishing;
 *  2. the previous hook, or PostgreSQL's;
 *  3. the outermost executor's end: the LOG line of the statement's writes
 *     a report-only guard accepted (reporting/rollout).
 */
void executor_end(QueryDesc *query)
{
	fencing::citus_executor_end(query);
	if (previous_executor_end != nullptr)
		previous_executor_end(query);
	else
		standard_ExecutorEnd(query);
	fencing::rollout_executor_end();
}

/*
 * ProcessUtility, where the extension is installed (asked once, before the
 * statement: what step 1 notes, step 4 settles):
 *  1. statistics (preloaded only): PREPARE TRANSACTION's gid is noted;
 *  2. Citus: COPY FROM sends fencing.token; DROP TABLE drops the marks
 *     tables too (the statement may be replaced by a copy);
 *  3. the previous hook, or PostgreSQL's;
 *  4. statistics (preloaded only): COMMIT and ROLLBACK PREPARED settle the
 *     prepared transaction's counts once they succeeded, and its groups of
 *     the rollout report (reporting/rollout), whose PREPARE's gid is kept;
 *  5. the report-only guards' LOG line counts a utility statement as an
 *     executor: the outermost one's end flushes it (COPY FROM, a DO block;
 *     reporting/rollout).
 */
void process_utility(PlannedStmt *statement, const char *text, bool read_only,
                     ProcessUtilityContext context, ParamListInfo params, QueryEnvironment *env,
                     DestReceiver *dest, QueryCompletion *completion)
{
	bool installed = fencing::extension_installed();
	fencing::StatsUtility seen{TRANS_STMT_BEGIN, ""};
	if (installed) {
		if (preloaded)
			seen = fencing::stats_before_utility(statement);
		statement = fencing::citus_before_utility(statement);
		fencing::rollout_executor_start();
	}
	if (previous_process_utility != nullptr)
		previous_process_utility(statement, text, read_only, context, params, env, dest,
		                         completion);
	else
		standard_ProcessUtility(statement, text, read_only, context, params, env, dest, completion);
	if (installed) {
		if (preloaded) {
			fencing::stats_after_utility(seen);
			fencing::rollout_after_utility(seen);
		}
		fencing::rollout_executor_end();
	}
}

/*
 * Every shared-memory area (preloaded only; base/shared_memory.hpp), in the
 * order they are requested and attached: the token windows
 * (state/token_issue); the lease epoch's start (state/lease_grace); the
 * lease memory (state/lease_memory); the statistics (reporting/stats); the
 * rollout report (reporting/rollout); the lease counters
 * (reporting/lease_stats); the queue of waiting acquire() calls
 * (leases/lease_queue).
 */
const fencing::SharedArea *const shared_areas[] = {
    &fencing::token_windows_area,    &fencing::lease_epoch_area,
    &fencing::lease_memory_area,     &fencing::stats_area,
    &fencing::stats_prepared_area,   &fencing::rollout_overflow_area,
    &fencing::rollout_prepared_area, &fencing::rollout_report_area,
    &fencing::lease_stats_area,      &fencing::lease_queue_area,
};
constexpr int shared_area_count = sizeof shared_areas / sizeof shared_areas[0];

/* shmem_request (preloaded only): the previous hook, then every area's space and locks. */
void shmem_request()
{
	if (previous_shmem_request != nullptr)
		previous_shmem_request();
	fencing::request_shared_areas(shared_areas, shared_area_count);
}

/* shmem_startup (preloaded only): the previous hook, then every area attached. */
void shmem_startup()
{
	if (previous_shmem_startup != nullptr)
		previous_shmem_startup();
	fencing::attach_shared_areas(shared_areas, shared_area_count);
}

/*
 * object_access:
 *  1. the previous hook;
 *  2. an extension created, altered or dropped: every backend of the
 *     database asks again whether fencing is installed (catalog/extension),
 *     whether it is or not;
 *  3. a drop, where the extension is installed: the DDL follower records
 *     the partitions a command drops (admin/ddl).  Only a drop asks: the
 *     hook also runs for every name a query looks up.
 */
void object_access(ObjectAccessType access, Oid class_id, Oid object_id, int sub_id, void *arg)
{
	if (previous_object_access != nullptr)
		previous_object_access(access, class_id, object_id, sub_id, arg);
	fencing::extension_object_access(access, class_id);
	if (access == OAT_DROP && fencing::extension_installed())
		fencing::ddl_object_access(access, class_id, object_id, sub_id);
}

/*
 * The end of a transaction (every event goes to each; each picks its own):
 *  1. the DDL follower forgets the partitions dropped (admin/ddl);
 *  2. statistics (preloaded only): accepted writes reach shared memory,
 *     and the lease calls the lease counters (reporting/lease_stats);
 *  3. Citus forgets the token the workers got (citus/token_relay);
 *  4. the lease queue (preloaded only): at commit, the first waiter of a
 *     resource this transaction released is woken, and a grant's place in
 *     line goes (leases/lease_queue);
 *  5. fencing.token: the warning about an unused session value, where the
 *     extension is installed (the cached answer: no catalog can be read at
 *     a commit's end; state/token_setting), last, once nothing else can
 *     fail.
 * Before them, at commit and abort: the LOG line of writes a report-only
 * guard accepted that no statement's end flushed (a failed statement, a
 * subtransaction's abort), and the transaction's rollout groups counted,
 * kept for COMMIT PREPARED or dropped (reporting/rollout).  Each of 1-4
 * lets go of what this transaction's statements and calls made, which is
 * nothing where the extension is not installed.
 */
void end_of_transaction(XactEvent event, void *)
{
	fencing::rollout_end_of_transaction(event);
	fencing::ddl_end_of_transaction(event);
	if (preloaded)
		fencing::stats_end_of_transaction(event);
	if (preloaded)
		fencing::lease_stats_end_of_transaction(event);
	fencing::citus_end_of_transaction(event);
	if (preloaded)
		fencing::lease_queue_end_of_transaction(event);
	fencing::token_setting_end_of_transaction(event, fencing::extension_installed());
}

/*
 * The start or end of a subtransaction:
 *  1. statistics (preloaded only): the counts saved for it are kept or
 *     dropped, the lease calls made in it too (reporting/lease_stats), and
 *     its rollout groups (reporting/rollout);
 *  2. Citus: the workers' token is unknown again;
 *  3. the lease queue (preloaded only): a grant's place goes with its
 *     rolled-back subtransaction, or passes to the parent.
 * Each keeps or lets go of what the subtransaction's statements and calls
 * made (nothing where the extension is not installed), without a catalog.
 */
void end_of_subtransaction(SubXactEvent event, SubTransactionId subid, SubTransactionId parent,
                           void *)
{
	if (preloaded)
		fencing::stats_end_of_subtransaction(event);
	if (preloaded)
		fencing::lease_stats_end_of_subtransaction(event);
	if (preloaded)
		fencing::rollout_end_of_subtransaction(event);
	fencing::citus_end_of_subtransaction(event);
	if (preloaded)
		fencing::lease_queue_end_of_subtransaction(event, subid, parent);
}

/* Installs every hook, each once, chaining the previous one. */
void install_hooks()
{
	previous_executor_start = ExecutorStart_hook;
	ExecutorStart_hook = executor_start;
	previous_executor_run = ExecutorRun_hook;
	ExecutorRun_hook = executor_run;
	previous_executor_finish = ExecutorFinish_hook;
	ExecutorFinish_hook = executor_finish;
	previous_executor_end = ExecutorEnd_hook;
	ExecutorEnd_hook = executor_end;
	previous_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = process_utility;
	previous_object_access = object_access_hook;
	object_access_hook = object_access;
	if (preloaded) {
		previous_shmem_request = shmem_request_hook;
		shmem_request_hook = shmem_request;
		previous_shmem_startup = shmem_startup_hook;
		shmem_startup_hook = shmem_startup;
	}
	RegisterXactCallback(end_of_transaction, nullptr);
	RegisterSubXactCallback(end_of_subtransaction, nullptr);
}

} // namespace

extern "C" void _PG_init(void)
{
	fencing::guarded("_PG_init", []() {
		preloaded = process_shared_preload_libraries_in_progress;
		fencing::define_settings();
		install_hooks();
		/* The marks of Citus tables, which state/mark_store.hpp cannot include. */
		fencing::register_citus_marks();
		fencing::ddl_module_loaded();
		fencing::extension_module_loaded();
		/* Last: it drops placeholders of names not defined by then. */
		MarkGUCPrefixReserved("fencing");
	});
}
