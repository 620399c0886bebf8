/*
 * Relations, as the catalogs describe them: see relation.hpp.
 */
#include "catalog/relation.hpp"
#include "base/compat.hpp"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "lib/stringinfo.h"
#include "access/nbtree.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "utils/fmgroids.h"
#include "access/tableam.h"
#include "catalog/pg_inherits.h"
#include "executor/tuptable.h"
#include "utils/snapmgr.h"
#include "access/stratnum.h"
#include "catalog/partition.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/rls.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "mb/pg_wchar.h"
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

bool calls_guard(Oid function)
{
	static Oid guard_oid = InvalidOid; /* the last function found to be fencing.guard */
	if (function == guard_oid)
		return true;
	char *name = get_func_name(function);
	char *schema = get_namespace_name(get_func_namespace(function));
	bool guard = name != nullptr && schema != nullptr && strcmp(name, "guard") == 0 &&
	             strcmp(schema, "fencing") == 0;
	if (guard)
		guard_oid = function;
	return guard;
}

/* Names of the triggers fencing.protect() installs (on a Citus shard, without its suffix). */
bool guard_trigger_named(const char *name)
{
	static const char *const names[] = {"fencing_guard", "fencing_guard_new_keys",
	                                    "fencing_guard_key_changes", "fencing_guard_truncate"};
	for (const char *known : names)
		if (strcmp(name, known) == 0)
			return true;
	return false;
}

void require_primary_key(Relation rel)
{
	if (!OidIsValid(fencing::primary_key_index(rel)))
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
	return index_open(fencing::primary_key_index(rel), AccessShareLock);
}

KeyColumns key_columns(Relation pk)
{
	KeyColumns key;
	key.count = pk->rd_index->indnkeyatts;
	for (int i = 0; i < key.count; i++)
		key.attnums[i] = pk->rd_index->indkey.values[i];
	return key;
}

KeyColumns primary_key_columns(Relation rel)
{
	require_primary_key(rel);
	Bitmapset *attrs = RelationGetIndexAttrBitmap(rel, INDEX_ATTR_BITMAP_PRIMARY_KEY);
	if (bms_num_members(attrs) == 1) {
		KeyColumns key;
		key.count = 1;
		key.attnums[0] = static_cast<AttrNumber>(bms_singleton_member(attrs) +
		                                         FirstLowInvalidHeapAttributeNumber);
		bms_free(attrs);
		return key;
	}
	Relation pk = open_primary_key(rel);
	KeyColumns key = key_columns(pk);
	index_close(pk, AccessShareLock);
	return key;
}

void key_values(Relation rel, const KeyColumns &key, HeapTuple tuple, Datum *values, bool *isnull)
{
	TupleDesc desc = RelationGetDescr(rel);
	for (int i = 0; i < key.count; i++)
		values[i] = heap_getattr(tuple, key.attnums[i], desc, &isnull[i]);
}

const char *key_equality_operator(Relation pk, int column)
{
	Oid type = pk->rd_opcintype[column];
	Oid op = get_opfamily_member(pk->rd_opfamily[column], type, type, BTEqualStrategyNumber);
	HeapTuple tuple = SearchSysCache1(OPEROID, ObjectIdGetDatum(op));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "fencing: no equality operator for primary key column %d", column + 1);
	Form_pg_operator form = (Form_pg_operator)GETSTRUCT(tuple);
	char *text =
	    psprintf("OPERATOR(%s.%s)", quote_identifier(get_namespace_name(form->oprnamespace)),
	             NameStr(form->oprname));
	ReleaseSysCache(tuple);
	return text;
}

List *partition_ancestors(Relation rel)
{
	List *ancestors = NIL;
	Oid relid = RelationGetRelid(rel);
	while (get_rel_relispartition(relid)) {
		relid = get_partition_parent(relid, true);
		ancestors = lappend_oid(ancestors, relid);
	}
	return ancestors;
}

bool may_read(Relation rel, int ncolumns, const AttrNumber *attnums)
{
	Oid user = GetUserId();
	List *relids = list_make1_oid(RelationGetRelid(rel));
	if (rel->rd_rel->relispartition)
		relids = list_concat(relids, partition_ancestors(rel));
	bool readable = false;
	ListCell *cell;
	foreach (cell, relids) {
		Oid relid = lfirst_oid(cell);
		if (check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED)
			return false;
		if (pg_class_aclcheck(relid, user, ACL_SELECT) == ACLCHECK_OK)
			readable = true;
	}
	for (int i = 0; !readable && i < ncolumns; i++) {
		if (pg_attribute_aclcheck(RelationGetRelid(rel), attnums[i], user, ACL_SELECT) !=
		    ACLCHECK_OK)
			return false;
		readable = i == ncolumns - 1;
	}
	return readable;
}

char *describe_key(Relation rel, Relation pk, Datum *values, bool *isnull)
{
	KeyColumns key = key_columns(pk);
	if (!may_read(rel, key.count, key.attnums))
		return nullptr;
	/* Checked above, also through ancestors; PostgreSQL's check looks at the partition only. */
	Oid user;
	int context;
	GetUserIdAndSecContext(&user, &context);
	SetUserIdAndSecContext(rel->rd_rel->relowner, context | SECURITY_LOCAL_USERID_CHANGE);
	char *text = BuildIndexValueDescription(pk, values, isnull);
	SetUserIdAndSecContext(user, context);
	/* Long keys (a key may be kilobytes) are cut, so that a message stays readable. */
	constexpr int shown = 200;
	if (text == nullptr || strlen(text) <= shown)
		return text;
	int length = pg_mbcliplen(text, static_cast<int>(strlen(text)), shown);
	return psprintf("%.*s...", length, text);
}

int64 highest_stored_token(Relation rel, AttrNumber token_attnum)
{
	if (!RELKIND_HAS_STORAGE(rel->rd_rel->relkind) || rel->rd_rel->relkind == RELKIND_FOREIGN_TABLE)
		return 0;
	if (TupleDescAttr(RelationGetDescr(rel), token_attnum - 1)->atttypid != INT8OID)
		elog(ERROR, "fencing: token column %d of relation \"%s\" is not a bigint", token_attnum,
		     RelationGetRelationName(rel));
	Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
	TableScanDesc scan = table_beginscan(rel, snapshot, 0, nullptr);
	TupleTableSlot *slot = table_slot_create(rel, nullptr);
	int64 highest = 0;
	while (table_scan_getnextslot(scan, ForwardScanDirection, slot)) {
		bool isnull;
		Datum value = slot_getattr(slot, token_attnum, &isnull);
		if (!isnull && DatumGetInt64(value) > highest)
			highest = DatumGetInt64(value);
		CHECK_FOR_INTERRUPTS();
	}
	ExecDropSingleTupleTableSlot(slot);
	table_endscan(scan);
	UnregisterSnapshot(snapshot);
	return highest;
}

int64 highest_stored_token_below(Relation rel, const char *token_column)
{
	int64 highest = 0;
	ListCell *cell;
	foreach (cell, find_all_inheritors(RelationGetRelid(rel), AccessShareLock, nullptr)) {
		Relation part = table_open(lfirst_oid(cell), NoLock);
		AttrNumber attnum = user_column(part, token_column);
		if (attnum != InvalidAttrNumber &&
		    TupleDescAttr(RelationGetDescr(part), attnum - 1)->atttypid == INT8OID)
			highest = Max(highest, highest_stored_token(part, attnum));
		table_close(part, NoLock);
	}
	return highest;
}

int64 stored_token(Relation rel, HeapTuple tuple, AttrNumber token_attnum)
{
	bool isnull = false;
	Datum value = heap_getattr(tuple, token_attnum, RelationGetDescr(rel), &isnull);
	return isnull ? 0 : DatumGetInt64(value);
}

List *detached_relations(const RangeVar *name)
{
	List *relids = NIL;
	Relation classes = table_open(RelationRelationId, AccessShareLock);
	ScanKeyData key;
	ScanKeyInit(&key, Anum_pg_class_relname, BTEqualStrategyNumber, F_NAMEEQ,
	            CStringGetDatum(name->relname));
	SysScanDesc scan = systable_beginscan(classes, ClassNameNspIndexId, true, nullptr, 1, &key);
	for (HeapTuple tuple; HeapTupleIsValid(tuple = systable_getnext(scan));) {
		auto *form = reinterpret_cast<Form_pg_class>(GETSTRUCT(tuple));
		if (form->relispartition ||
		    (form->relkind != RELKIND_RELATION && form->relkind != RELKIND_PARTITIONED_TABLE &&
		     form->relkind != RELKIND_FOREIGN_TABLE) ||
		    !TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(tuple->t_data)))
			continue;
		if (name->schemaname != nullptr &&
		    form->relnamespace != get_namespace_oid(name->schemaname, true))
			continue;
		relids = lappend_oid(relids, form->oid);
	}
	systable_endscan(scan);
	table_close(classes, AccessShareLock);
	return relids;
}

} // namespace fencing
