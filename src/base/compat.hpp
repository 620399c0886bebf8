/*
 * PostgreSQL version differences, in one place (PostgreSQL 15 to 18).
 * Nothing else in src/ tests PG_VERSION_NUM.
 */
#pragma once

extern "C" {
#include "postgres.h"
#include "nodes/parsenodes.h"
#include "utils/acl.h"
#include "utils/guc.h"
#include "utils/guc_tables.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "replication/walsender_private.h"
#include "executor/executor.h"
#include "storage/proc.h"
#include "utils/wait_event.h"
#if PG_VERSION_NUM >= 160000
#include "varatt.h" /* VARDATA_ANY and the like: in postgres.h before 16 */
#endif
#if PG_VERSION_NUM >= 170000
#include "storage/procnumber.h"
#endif
}

/*
 * The protocol reader's functions that tell whether a Sync follows a Bind and
 * Execute (the Citus one-round-trip check), declared here as libpq/libpq.h
 * declares them: that header includes libpq-be.h, which needs the GSSAPI
 * headers when the server was built with GSSAPI (Debian's was), and a machine
 * with only postgresql-server-dev-NN may not have them.  17 replaced
 * pq_buffer_has_data() by pq_buffer_remaining_data().
 */
extern "C" {
extern void pq_startmsgread(void);
extern void pq_endmsgread(void);
extern bool pq_is_reading_msg(void);
extern int pq_peekbyte(void);
#if PG_VERSION_NUM >= 170000
extern ssize_t pq_buffer_remaining_data(void);
#else
extern bool pq_buffer_has_data(void);
#endif
}
#if PG_VERSION_NUM >= 170000
#define FENCING_CLIENT_DATA_BUFFERED() (pq_buffer_remaining_data() > 0)
#else
#define FENCING_CLIENT_DATA_BUFFERED() pq_buffer_has_data()
#endif

namespace fencing
{

/* Does `role` own relation `relid` (or is it a member of the owner, or superuser)? */
inline bool owns_relation(Oid relid, Oid role)
{
#if PG_VERSION_NUM >= 160000
	return object_ownercheck(RelationRelationId, relid, role);
#else
	return pg_class_ownercheck(relid, role);
#endif
}

/*
 * The relation's primary key index, InvalidOid if none - also if it is
 * DEFERRABLE (as RelationGetPrimaryKeyIndex() has always said before 18,
 * where it gained deferrable_ok).
 */
inline Oid primary_key_index(Relation rel)
{
#if PG_VERSION_NUM >= 180000
	return RelationGetPrimaryKeyIndex(rel, false);
#else
	return RelationGetPrimaryKeyIndex(rel);
#endif
}

/*
 * A setting's own entry (where PostgreSQL keeps its stack; a placeholder's
 * before the setting is defined), or nullptr.  Names match as PostgreSQL
 * matches them, whatever their ASCII letter case: a placeholder keeps the
 * spelling of its first mention (a connection option's, say).
 */
inline config_generic *find_setting(const char *name)
{
#if PG_VERSION_NUM >= 160000
	return find_option(name, false, true, ERROR);
#else
	auto same = [](const char *a, const char *b) {
		for (; *a != '\0' && pg_ascii_tolower(*a) == pg_ascii_tolower(*b); a++, b++)
			;
		return pg_ascii_tolower(*a) == pg_ascii_tolower(*b);
	};
	config_generic **settings = get_guc_variables();
	for (int i = 0; i < GetNumConfigOptions(); i++)
		if (same(settings[i]->name, name))
			return settings[i];
	return nullptr;
#endif
}

/*
 * Memory for a check hook's *extra: PostgreSQL frees it with free() before
 * 16 and with guc_free() from 16 on.  nullptr when out of memory (logged).
 */
inline void *guc_extra_alloc(size_t size)
{
#if PG_VERSION_NUM >= 160000
	return guc_malloc(LOG, size);
#else
	return malloc(size);
#endif
}

/* Does ALTER TABLE ... ALTER COLUMN ... SET EXPRESSION (17+) make this subcommand? */
inline bool sets_generation_expression(AlterTableType type)
{
#if PG_VERSION_NUM >= 170000
	return type == AT_SetExpression;
#else
	(void)type;
	return false;
#endif
}

/*
 * Does a MERGE action change rows that exist in the target: UPDATE or DELETE
 * under WHEN MATCHED and, from 17 on, WHEN NOT MATCHED BY SOURCE - every
 * match kind but NOT MATCHED [BY TARGET], whose only action is INSERT.
 * (MergeAction.matched became matchKind in 17.)
 */
inline bool merge_action_on_target_row(const MergeAction *action)
{
#if PG_VERSION_NUM >= 170000
	return action->matchKind != MERGE_WHEN_NOT_MATCHED_BY_TARGET;
#else
	return action->matched;
#endif
}

/*
 * Is this walsender serving a physical standby?  (WalSnd.kind came in 16;
 * before, a logical walsender counts too.)  Call with the walsender's mutex.
 */
inline bool walsender_is_physical(const WalSnd *sender)
{
#if PG_VERSION_NUM >= 160000
	return sender->kind == REPLICATION_KIND_PHYSICAL;
#else
	(void)sender;
	return true;
#endif
}

/*
 * An ExecutorRun hook's parameters and the call that passes them on: 18
 * dropped execute_once.
 */
#if PG_VERSION_NUM >= 180000
#define FENCING_EXECUTOR_RUN_PARAMS QueryDesc *query, ScanDirection direction, uint64 count
#define FENCING_EXECUTOR_RUN_ARGS query, direction, count
#else
#define FENCING_EXECUTOR_RUN_PARAMS                                                                \
	QueryDesc *query, ScanDirection direction, uint64 count, bool execute_once
#define FENCING_EXECUTOR_RUN_ARGS query, direction, count, execute_once
#endif

/* This backend's local transaction id: 17 moved it into PGPROC's vxid. */
inline LocalTransactionId local_transaction_id()
{
#if PG_VERSION_NUM >= 170000
	return MyProc->vxid.lxid;
#else
	return MyProc->lxid;
#endif
}

/* This backend's index among PostgreSQL's processes: 17 renamed pgprocno to MyProcNumber. */
inline int my_proc_number()
{
#if PG_VERSION_NUM >= 170000
	return MyProcNumber;
#else
	return MyProc->pgprocno;
#endif
}

/*
 * The wait event of acquire() waiting for a lease: a custom one,
 * "FencingLeaseWait", from 17 on (WaitEventExtensionNew), the generic
 * "Extension" before.
 */
inline uint32 lease_wait_event()
{
#if PG_VERSION_NUM >= 170000
	static uint32 event = 0;
	if (event == 0)
		event = WaitEventExtensionNew("FencingLeaseWait");
	return event;
#else
	return PG_WAIT_EXTENSION;
#endif
}

} // namespace fencing

/*
 * The module's magic block (entry/module.cpp): from 18 on with the module's
 * name and version, which pg_get_loaded_modules() shows.  FENCING_VERSION
 * comes from the Makefile (EXTVERSION).
 */
#if PG_VERSION_NUM >= 180000
#define FENCING_MODULE_MAGIC PG_MODULE_MAGIC_EXT(.name = "fencing", .version = FENCING_VERSION)
#else
#define FENCING_MODULE_MAGIC PG_MODULE_MAGIC
#endif
