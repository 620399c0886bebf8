/*
 * Table settings and primary keys, read from the relcache and syscache only.
 */
#include "table.hpp"
#include "marks.hpp"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "lib/stringinfo.h"
#include "access/nbtree.h"
#include "access/table.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
}

namespace fencing
{

AttrNumber user_column(Relation rel, const char *name)
{
	/* The open relation's descriptor: cheaper than a syscache lookup by name. */
	TupleDesc desc = RelationGetDescr(rel);
	for (int i = 0; i < desc->natts; i++) {
		Form_pg_attribute att = TupleDescAttr(desc, i);
		if (!att->attisdropped && strcmp(NameStr(att->attname), name) == 0)
			return att->attnum;
	}
	return InvalidAttrNumber;
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
	static Oid guard_oid = InvalidOid; /* the last function found to be fencing.guard */
	if (strcmp(trigger->tgname, guard_trigger_name) != 0)
		return false;
	if (trigger->tgfoid == guard_oid)
		return true;
	char *name = get_func_name(trigger->tgfoid);
	char *schema = get_namespace_name(get_func_namespace(trigger->tgfoid));
	bool guard = name != nullptr && schema != nullptr && strcmp(name, "guard") == 0 &&
	             strcmp(schema, "fencing") == 0;
	if (guard)
		guard_oid = trigger->tgfoid;
	return guard;
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

void require_primary_key(Relation rel)
{
	if (!OidIsValid(RelationGetPrimaryKeyIndex(rel)))
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("relation \"%s\" has no primary key", RelationGetRelationName(rel)),
		                errdetail("Fencing tokens are tracked per row, and rows are named by "
		                          "their primary key."),
		                errhint("Add a primary key to the table (DEFERRABLE ones do not count: a "
		                        "deferred unique check does not wait for a concurrent delete).")));
}

Relation open_primary_key(Relation rel)
{
	require_primary_key(rel);
	return index_open(RelationGetPrimaryKeyIndex(rel), AccessShareLock);
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

namespace
{

/*
 * Do equal values of key column i always have the same text?  Deleted keys
 * are remembered by their text, so a key like citext ('A' = 'a') could be
 * re-inserted under another spelling.  btree's "equalimage" says equal means
 * bitwise identical; numeric and floats are normalized by the marks.
 */
bool canonical_key_column(Relation rel, Relation pk, int i)
{
	Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), fencing::key_attnum(pk, i) - 1);
	if (fencing::normalized_key_type(att->atttypid))
		return true;
	Oid type = pk->rd_opcintype[i];
	Oid proc = get_opfamily_proc(pk->rd_opfamily[i], type, type, BTEQUALIMAGE_PROC);
	return OidIsValid(proc) &&
	       DatumGetBool(OidFunctionCall1Coll(proc, pk->rd_indcollation[i], ObjectIdGetDatum(type)));
}

} // namespace

/*
 * fencing.primary_key_columns(target): the quoted, comma-separated primary key
 * columns of a table protect() may guard; errors if it has no usable key.
 */
FENCING_FUNCTION(primary_key_columns)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
		        (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("target must not be null")));
	Relation rel = relation_open(PG_GETARG_OID(0), AccessShareLock);
	Relation pk = fencing::open_primary_key(rel);
	StringInfoData columns;
	initStringInfo(&columns);
	for (int i = 0; i < fencing::key_count(pk); i++) {
		Form_pg_attribute att =
		    TupleDescAttr(RelationGetDescr(rel), fencing::key_attnum(pk, i) - 1);
		if (!canonical_key_column(rel, pk, i))
			ereport(ERROR,
			        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			         errmsg("primary key column \"%s\" of relation \"%s\" has type %s, whose equal "
			                "values can be written differently",
			                NameStr(att->attname), RelationGetRelationName(rel),
			                format_type_with_typemod(att->atttypid, att->atttypmod)),
			         errdetail("The guard remembers deleted keys by their text, so a stale holder "
			                   "could re-insert such a key spelled another way."),
			         errhint("Use a key type whose equal values print alike: integers, numeric, "
			                 "text or varchar with a deterministic collation, uuid, date, "
			                 "timestamp.")));
		appendStringInfo(&columns, "%s%s", i > 0 ? ", " : "",
		                 quote_identifier(NameStr(att->attname)));
	}
	index_close(pk, AccessShareLock);
	relation_close(rel, AccessShareLock);
	PG_RETURN_TEXT_P(cstring_to_text(columns.data));
}
