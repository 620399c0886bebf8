/*
 * A protected table's settings: see table_settings.hpp.
 */
#include "state/table_settings.hpp"
#include "catalog/citus_names.hpp"
#include "state/registry.hpp"

extern "C" {
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "utils/rel.h"
}

namespace fencing
{

/* Checks that `name` is a bigint column of `rel` and returns its number. */
static AttrNumber token_column(Relation rel, const char *name)
{
	AttrNumber attnum = user_column(rel, name);
	if (attnum == InvalidAttrNumber)
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_COLUMN),
		                errmsg("column \"%s\" of relation \"%s\" does not exist", name,
		                       relation_name(rel)),
		                errhint("Run fencing.protect() on the table, or add a bigint column "
		                        "\"%s\".",
		                        default_token_column)));
	Oid type = TupleDescAttr(RelationGetDescr(rel), attnum - 1)->atttypid;
	if (type != INT8OID)
		ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
		                errmsg("fencing token column \"%s\" of relation \"%s\" must be of type "
		                       "bigint",
		                       name, relation_name(rel))));
	return attnum;
}

void fence_from_arguments(Relation rel, const Trigger *trigger, TableSettings *fence)
{
	char *end = nullptr;
	fence->citus_id = trigger->tgnargs == 3 ? strtoll(trigger->tgargs[2], &end, 10) : 0;
	if (trigger->tgnargs < 2 || trigger->tgnargs > 3 ||
	    !parse_mode(trigger->tgargs[1], &fence->mode) ||
	    (trigger->tgnargs == 3 && (*end != '\0' || fence->citus_id <= 0)))
		ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
		                errmsg("trigger \"%s\" on relation \"%s\" has bad arguments",
		                       trigger->tgname, relation_name(rel)),
		                errhint("Install the guard with fencing.protect().")));
	fence->token_attnum = token_column(rel, trigger->tgargs[0]);
	fence->is_protected = true;
}

/* The settings that the registration of `rel` or of its protected ancestor gives it. */
static void fence_from_registration(Relation rel, const Registration &registration,
                                    TableSettings *fence)
{
	fence->token_attnum = token_column(rel, NameStr(registration.token_column));
	fence->mode = registration.mode;
	fence->is_protected = true;
	fence->citus_id = 0;
}

/*
 * Could fencing.protect() have made this trigger for these settings?  Its
 * triggers are named fencing_guard... (on a Citus shard with a suffix) and
 * carry the registered token column and mode.
 */
static bool installed_by_protect(const Trigger *trigger, const Registration &registration)
{
	return strncmp(trigger->tgname, guard_trigger_name, strlen(guard_trigger_name)) == 0 &&
	       (trigger->tgqual == nullptr ||
	        strncmp(trigger->tgname, "fencing_guard_key_changes", 25) == 0) &&
	       (trigger->tgnargs == 2 || trigger->tgnargs == 3) &&
	       strcmp(trigger->tgargs[0], NameStr(registration.token_column)) == 0 &&
	       strcmp(trigger->tgargs[1], mode_name(registration.mode)) == 0;
}

bool fence_from_trigger(Relation rel, const Trigger *trigger, TableSettings *fence)
{
	Registration registration;
	if (!protection_of(rel, &registration))
		return false;
	if (!installed_by_protect(trigger, registration))
		ereport(
		    ERROR,
		    (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		     errmsg("trigger \"%s\" on relation \"%s\" was not installed by fencing.protect()",
		            trigger->tgname, relation_name(rel)),
		     errdetail("Only the triggers fencing.protect() installs may call fencing.guard()."),
		     errhint("Drop the trigger; run fencing.protect() to guard the table.")));
	fence_from_registration(rel, registration, fence);
	if (trigger->tgnargs == 3)
		fence_from_arguments(rel, trigger, fence);
	if (fence->citus_id != 0 && fence->citus_id != static_cast<int64>(registration.relid))
		ereport(ERROR,
		        (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		         errmsg("trigger \"%s\" on relation \"%s\" was not installed by fencing.protect()",
		                trigger->tgname, relation_name(rel)),
		         errdetail("Its marks id names another table."),
		         errhint("Run fencing.protect() on the table again.")));
	return true;
}

bool find_guard(Relation rel, TableSettings *fence)
{
	const Trigger *guard = nullptr;
	TriggerDesc *triggers = rel->trigdesc;
	for (int i = 0; triggers != nullptr && i < triggers->numtriggers && guard == nullptr; i++)
		if (strcmp(triggers->triggers[i].tgname, guard_trigger_name) == 0 &&
		    calls_guard(triggers->triggers[i].tgfoid))
			guard = &triggers->triggers[i];
	Registration registration;
	if (protection_of(rel, &registration)) {
		fence_from_registration(rel, registration, fence);
		/* A Citus distributed table's marks id, which only its guard's arguments carry. */
		if (guard != nullptr && guard->tgnargs == 3 && installed_by_protect(guard, registration)) {
			fence_from_arguments(rel, guard, fence);
			if (fence->citus_id != static_cast<int64>(registration.relid))
				fence->citus_id = 0;
		}
		return true;
	}
	/*
	 * A Citus shard (or a distributed table's shell on a worker): its
	 * triggers are Citus' copies of its table's, and its guard goes on only
	 * with the marks id that protect() recorded for its table in Citus'
	 * metadata; the argument alone names nothing (see fence_of_unprotected()).
	 */
	if (guard != nullptr && guard->tgnargs == 3 && guard->tgenabled != TRIGGER_DISABLED) {
		fence_from_arguments(rel, guard, fence);
		return marks_id_recorded(rel, *fence);
	}
	return false;
}

bool marks_id_recorded(Relation rel, const TableSettings &fence)
{
	return fence.citus_id == citus_recorded_id(rel);
}

void fence_of_table(Relation rel, TableSettings *fence)
{
	if (find_guard(rel, fence))
		return;
	fence->token_attnum = token_column(rel, default_token_column);
	fence->mode = Mode::monotonic;
	fence->is_protected = false;
	fence->citus_id = 0;
}

} // namespace fencing
