/*
 * Table settings and primary keys, read from the relcache and syscache only.
 */
#include "table.hpp"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_type.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
}

namespace fencing {

AttrNumber user_column(Relation rel, const char *name)
{
	HeapTuple tuple = SearchSysCacheAttName(RelationGetRelid(rel), name);
	if (!HeapTupleIsValid(tuple))
		return InvalidAttrNumber;
	Form_pg_attribute att = (Form_pg_attribute) GETSTRUCT(tuple);
	AttrNumber attnum = att->attnum;
	ReleaseSysCache(tuple);
	return attnum > 0 ? attnum : InvalidAttrNumber;
}

/* Checks that `name` is a bigint column of `rel` and returns its number. */
static AttrNumber token_column(Relation rel, const char *name)
{
	AttrNumber attnum = user_column(rel, name);
	if (attnum == InvalidAttrNumber)
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_COLUMN),
		                errmsg("column \"%s\" of relation \"%s\" does not exist", name,
		                       RelationGetRelationName(rel)),
		                errhint("Run fencing.protect() on the table, or add a bigint column "
		                        "\"%s\".",
		                        default_token_column)));
	Oid type = TupleDescAttr(RelationGetDescr(rel), attnum - 1)->atttypid;
	if (type != INT8OID)
		ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
		                errmsg("fencing token column \"%s\" of relation \"%s\" must be of type "
		                       "bigint",
		                       name, RelationGetRelationName(rel))));
	return attnum;
}

void fence_from_trigger(Relation rel, const Trigger *trigger, TableFence *fence)
{
	if (trigger->tgnargs != 2 || !parse_mode(trigger->tgargs[1], &fence->mode))
		ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
		                errmsg("trigger \"%s\" on relation \"%s\" has bad arguments",
		                       trigger->tgname, RelationGetRelationName(rel)),
		                errhint("Install the guard with fencing.protect().")));
	fence->token_attnum = token_column(rel, trigger->tgargs[0]);
	fence->is_protected = true;
}

/* Is `trigger` the guard installed by fencing.protect()? */
static bool is_guard(const Trigger *trigger)
{
	if (strcmp(trigger->tgname, guard_trigger_name) != 0)
		return false;
	char *name = get_func_name(trigger->tgfoid);
	char *schema = get_namespace_name(get_func_namespace(trigger->tgfoid));
	return name != nullptr && schema != nullptr && strcmp(name, "guard") == 0 &&
	       strcmp(schema, "fencing") == 0;
}

void fence_of_table(Relation rel, TableFence *fence)
{
	TriggerDesc *triggers = rel->trigdesc;
	for (int i = 0; triggers != nullptr && i < triggers->numtriggers; i++) {
		const Trigger *trigger = &triggers->triggers[i];
		if (trigger->tgenabled != TRIGGER_DISABLED && is_guard(trigger)) {
			fence_from_trigger(rel, trigger, fence);
			return;
		}
	}
	fence->token_attnum = token_column(rel, default_token_column);
	fence->mode = Mode::monotonic;
	fence->is_protected = false;
}

Relation open_primary_key(Relation rel)
{
	Oid pk = RelationGetPrimaryKeyIndex(rel);
	if (!OidIsValid(pk))
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("relation \"%s\" has no primary key", RelationGetRelationName(rel)),
		                errdetail("Fencing tokens are tracked per row, and rows are named by "
		                          "their primary key."),
		                errhint("Add a primary key to the table.")));
	return index_open(pk, AccessShareLock);
}

void key_values(Relation rel, Relation pk, HeapTuple tuple, Datum *values, bool *isnull)
{
	TupleDesc desc = RelationGetDescr(rel);
	for (int i = 0; i < key_count(pk); i++)
		values[i] = heap_getattr(tuple, key_attnum(pk, i), desc, &isnull[i]);
}

char *describe_key(Relation pk, Datum *values, bool *isnull)
{
	return BuildIndexValueDescription(pk, values, isnull);
}

int64 stored_token(Relation rel, HeapTuple tuple, AttrNumber token_attnum)
{
	bool isnull = false;
	Datum value = heap_getattr(tuple, token_attnum, RelationGetDescr(rel), &isnull);
	return isnull ? 0 : DatumGetInt64(value);
}

} // namespace fencing
