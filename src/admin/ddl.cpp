/*
 * The DDL the extension follows, in C (protect() and unprotect() are in
 * protect.cpp): the event trigger reads the commands PostgreSQL collected
 * and the catalogs through C APIs (no regular expressions over trigger
 * definitions or node text), keeps the registry, and acts on a user's table only as that table's
 * owner with SECURITY_RESTRICTED_OPERATION and a safe search_path, the way VACUUM does.  Nothing
 * here runs with rights the caller lacks except the writes to the extension's own tables (registry,
 * marks, floors), which run as the extension owner on SQL of the extension's own, every name
 * qualified.
 */
#include "citus/citus.hpp"
#include "admin/ddl.hpp"
#include "reporting/errors.hpp"
#include "state/registry.hpp"
#include "base/rights.hpp"
#include "base/spi.hpp"
#include "catalog/relation.hpp"
#include "legacy/helpers_0_3_0.hpp"
#include "base/compat.hpp"

extern "C" {
#include "access/genam.h"
#include "utils/memutils.h"
#include "catalog/objectaccess.h"
#include "access/xact.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_attrdef.h"
#include "catalog/pg_class.h"
#include "catalog/partition.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/event_trigger.h"
#include "commands/extension.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/parsenodes.h"
#include "nodes/primnodes.h"
#include "tcop/cmdtag.h"
#include "tcop/deparse_utility.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
}

#include <algorithm>

using namespace fencing;

namespace
{

/*
 * Set while protect() or unprotect() changes a table: the DDL they run
 * fires the event trigger, which must leave their half-made guard alone.
 * Reset by every (sub)transaction abort through PG_FINALLY.
 */
int own_ddl = 0;

/* The 0.4.0 helpers that follow DDL (sql/src/protect.sql); 0.3.0's in legacy/helpers_0_3_0.hpp. */
Statement guard_truncate_call = {
    "SELECT fencing_internal._guard_truncate($1, $2, $3)", 3, {REGCLASSOID, NAMEOID, TEXTOID}};

Statement guard_key_changes_call = {
    "SELECT fencing_internal._guard_key_changes($1, $2, $3)", 3, {REGCLASSOID, NAMEOID, TEXTOID}};

} // namespace

namespace fencing
{

Statement protect_call = {
    "SELECT fencing_internal._protect($1, $2, $3)", 3, {REGCLASSOID, NAMEOID, TEXTOID}};

/* Runs `call` as the owner of `relid` (ddl.hpp), prepared for this run only (run_sql()). */
void run_as_table_owner(Oid relid, Statement *call, Datum *values)
{
	Rights saved = become(relation_owner(relid));
	own_ddl++;
	PG_TRY();
	{
		run_sql(call->sql, call->nargs, call->types, values, InvalidSnapshot, false, false,
		        [&](int rc) {
			        if (rc < 0)
				        elog(ERROR, "fencing: %s failed: %s", call->sql,
				             SPI_result_code_string(rc));
		        });
	}
	PG_FINALLY();
	{
		own_ddl--;
	}
	PG_END_TRY();
	restore(saved);
}

} // namespace fencing

namespace
{

/*
 * Calls a helper (relation, token column, mode) as the relation's owner: its
 * 0.4.0 call, or its 0.3.0 counterpart.
 */
void call_with_settings(Statement *call, Statement *call_0_3_0, Oid relid, const char *token_column,
                        fencing::Mode mode)
{
	NameData column;
	namestrcpy(&column, token_column);
	Datum values[3] = {ObjectIdGetDatum(relid), NameGetDatum(&column),
	                   CStringGetTextDatum(mode_name(mode))};
	run_as_table_owner(relid, for_installed_release(call, call_0_3_0), values);
}

} // namespace

namespace fencing
{

/* A relation's name as messages show it: schema-qualified, quoted where needed. */
const char *qualified_name(Oid relid)
{
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
	                                  get_rel_name(relid));
}

/*
 * Errors (42501) unless `user` has the privileges of the owner of the
 * protected table whose tree holds `relid` (itself or a partition ancestor);
 * nothing if no protected table covers it.
 */
void require_tree_owner(Oid relid, Oid user, const char *action)
{
	Registration registration;
	if (!protection_of(relid, &registration) || owns_relation(registration.relid, user))
		return;
	const char *table = qualified_name(registration.relid);
	ereport(ERROR,
	        (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
	         errmsg("must be owner of protected table \"%s\" to %s", table, action),
	         registration.relid == relid
	             ? errdetail("The tokens, marks, floor, options and guard of a protected table's "
	                         "tree are the table owner's.")
	             : errdetail("Relation \"%s\" is in the tree of protected table \"%s\": the "
	                         "tokens, marks, floor, options and guard of that tree are the table "
	                         "owner's, whoever owns the relation.",
	                         qualified_name(relid), table)));
}

/*
 * What the current user must have to call `function` on `relid` (the rights
 * of the owner of its protected table, or of its own owner), and the
 * refusal of a partition that Target::protected_table adds.
 */
static void check_rights(Oid relid, Target target, const char *function)
{
	if (target == Target::any || !SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
		return;
	Registration registration;
	bool partition = protection_of(relid, &registration) && registration.relid != relid;
	if (partition)
		require_tree_owner(
		    relid, GetUserId(),
		    psprintf("call fencing.%s() on \"%s\"", function, qualified_name(relid)));
	else if (!owns_relation(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, get_relkind_objtype(get_rel_relkind(relid)),
		               get_rel_name(relid));
	if (target == Target::protected_table && partition)
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("relation \"%s\" is a partition of protected table \"%s\"",
		                       qualified_name(relid), qualified_name(registration.relid)),
		                errdetail("Its guard, options, marks and floor are that table's."),
		                errhint("Call fencing.%s() on \"%s\", or detach the partition first.",
		                        function, qualified_name(registration.relid))));
}

/*
 * Opens a relation for an owner's function, or returns nullptr if it does
 * not exist.  The rights are checked before the lock, so that a role that
 * may not change the table cannot queue a lock that makes its writers wait,
 * and again under it: the relation may have joined or left a protected
 * table's tree, or changed owner, while the lock was awaited.
 */
Relation try_open_target(Oid relid, LOCKMODE lock, Target target, const char *function)
{
	check_rights(relid, target, function);
	Relation rel = try_relation_open(relid, lock);
	if (rel != nullptr)
		check_rights(relid, target, function);
	return rel;
}

/* try_open_target() of a function's first argument, which must exist (42P01). */
Relation open_target(FunctionCallInfo fcinfo, LOCKMODE lock, Target target)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
		        (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("target must not be null")));
	const char *function = get_func_name(fcinfo->flinfo->fn_oid);
	Relation rel = try_open_target(PG_GETARG_OID(0), lock, target, function);
	if (rel == nullptr)
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
		                errmsg("relation with OID %u does not exist", PG_GETARG_OID(0))));
	return rel;
}

} // namespace fencing

namespace
{

/* The relations of a DDL command the event trigger looks at. */
struct Collected {
	List *relations; /* OIDs of tables, partitioned and foreign tables */
	List *detached;  /* pairs: parent, partition */
	List *triggers;  /* OIDs of triggers created or altered */
	List *retyped;   /* pairs: relation OID, column name of ALTER COLUMN ... TYPE and the like */
	List *created;   /* OIDs of relations CREATE TABLE (AS) and CREATE FOREIGN TABLE made */
	List *joined;    /* pairs: extension OID, relation OID of ALTER EXTENSION ... ADD */
	List *attached;  /* OIDs of the tables ATTACH PARTITION attached */
};
FENCING_PLAIN_DATA(Collected);

/* Does an ALTER TABLE subcommand change a column's type, identity or generation expression? */
bool changes_column_kind(AlterTableType type)
{
	switch (type) {
	case AT_AlterColumnType:
	case AT_AddIdentity:
	case AT_SetIdentity:
	case AT_DropIdentity:
	case AT_DropExpression:
		return true;
	default:
		return fencing::sets_generation_expression(type);
	}
}

/* Reads pg_event_trigger_ddl_commands() into plain lists (in the caller's memory). */
Collected collect_commands()
{
	Collected collected{NIL, NIL, NIL, NIL, NIL, NIL, NIL};
	MemoryContext caller = CurrentMemoryContext;
	run_sql(
	    "SELECT command, classid, objid FROM pg_catalog.pg_event_trigger_ddl_commands()", 0,
	    nullptr, nullptr, InvalidSnapshot, true, false, [&](int rc) {
		    expect_result(rc, SPI_OK_SELECT, "reading the DDL commands");
		    MemoryContext spi = MemoryContextSwitchTo(caller);
		    for (uint64 row = 0; row < SPI_processed; row++) {
			    bool isnull, class_null, object_null;
			    Datum command = result_value(row, 1, &isnull);
			    Oid classid = DatumGetObjectId(result_value(row, 2, &class_null));
			    Oid objid = DatumGetObjectId(result_value(row, 3, &object_null));
			    if (!class_null && !object_null && classid == RelationRelationId) {
				    char kind = get_rel_relkind(objid);
				    if ((kind == RELKIND_RELATION || kind == RELKIND_PARTITIONED_TABLE ||
				         kind == RELKIND_FOREIGN_TABLE) &&
				        !list_member_oid(collected.relations, objid))
					    collected.relations = lappend_oid(collected.relations, objid);
			    }
			    if (!class_null && !object_null && classid == TriggerRelationId)
				    collected.triggers = lappend_oid(collected.triggers, objid);
			    auto *cmd = reinterpret_cast<CollectedCommand *>(DatumGetPointer(command));
			    if (isnull)
				    continue;
			    if (cmd->type == SCT_Simple && classid == RelationRelationId &&
			        (IsA(cmd->parsetree, CreateStmt) ||
			         IsA(cmd->parsetree, CreateForeignTableStmt) ||
			         IsA(cmd->parsetree, CreateTableAsStmt)))
				    collected.created = lappend_oid(collected.created, objid);
			    if (cmd->type == SCT_Simple && IsA(cmd->parsetree, AlterExtensionContentsStmt) &&
			        reinterpret_cast<AlterExtensionContentsStmt *>(cmd->parsetree)->action > 0 &&
			        cmd->d.simple.secondaryObject.classId == RelationRelationId)
				    collected.joined = lappend(
				        collected.joined, list_make2_oid(cmd->d.simple.address.objectId,
				                                         cmd->d.simple.secondaryObject.objectId));
			    if (cmd->type != SCT_AlterTable)
				    continue;
			    ListCell *cell;
			    foreach (cell, cmd->d.alterTable.subcmds) {
				    auto *sub = static_cast<CollectedATSubcmd *>(lfirst(cell));
				    auto *at = reinterpret_cast<AlterTableCmd *>(sub->parsetree);
				    if (!IsA(at, AlterTableCmd))
					    continue;
				    if (at->subtype == AT_DetachPartition ||
				        at->subtype == AT_DetachPartitionFinalize) {
					    ListCell *partition;
					    foreach (partition, detached_relations(
					                            reinterpret_cast<PartitionCmd *>(at->def)->name))
						    collected.detached = lappend(
						        collected.detached,
						        list_make2_oid(cmd->d.alterTable.objectId, lfirst_oid(partition)));
				    }
				    /*
				     * The table ATTACH PARTITION attached (the command names its
				     * parent): it must follow the rules of the protected table it
				     * joins, and bring no marks its new key cannot find.
				     */
				    if (at->subtype == AT_AttachPartition) {
					    /*
					     * Looked up by name again: only a table that is now a
					     * partition of the command's table is the one attached
					     * (the name may read otherwise by now), with its partitions.
					     */
					    Oid attached = RangeVarGetRelid(
					        reinterpret_cast<PartitionCmd *>(at->def)->name, NoLock, true);
					    if (OidIsValid(attached) && get_rel_relispartition(attached) &&
					        get_partition_parent(attached, true) == cmd->d.alterTable.objectId) {
						    collected.attached = lappend_oid(collected.attached, attached);
						    ListCell *member;
						    foreach (member, find_all_inheritors(attached, NoLock, nullptr))
							    if (!list_member_oid(collected.relations, lfirst_oid(member)))
								    collected.relations =
								        lappend_oid(collected.relations, lfirst_oid(member));
					    }
				    }
				    if (changes_column_kind(at->subtype) && at->name != nullptr)
					    collected.retyped = lappend(
					        collected.retyped,
					        list_make2(makeInteger(static_cast<int>(cmd->d.alterTable.objectId)),
					                   makeString(pstrdup(at->name))));
			    }
		    }
		    MemoryContextSwitchTo(spi);
	    });
	return collected;
}

} // namespace

namespace fencing
{

/* Is the column's default absent, or the constant 0? */
bool default_is_zero(Relation rel, AttrNumber attnum)
{
	if (!TupleDescAttr(RelationGetDescr(rel), attnum - 1)->atthasdef)
		return true;
	bool zero = false;
	Relation defaults = table_open(AttrDefaultRelationId, AccessShareLock);
	ScanKeyData keys[2];
	ScanKeyInit(&keys[0], Anum_pg_attrdef_adrelid, BTEqualStrategyNumber, F_OIDEQ,
	            ObjectIdGetDatum(RelationGetRelid(rel)));
	ScanKeyInit(&keys[1], Anum_pg_attrdef_adnum, BTEqualStrategyNumber, F_INT2EQ,
	            Int16GetDatum(attnum));
	SysScanDesc scan = systable_beginscan(defaults, AttrDefaultIndexId, true, nullptr, 2, keys);
	HeapTuple tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple)) {
		bool isnull;
		Datum adbin =
		    heap_getattr(tuple, Anum_pg_attrdef_adbin, RelationGetDescr(defaults), &isnull);
		if (!isnull) {
			/*
			 * DEFAULT 0 on a bigint column is stored as the integer 0 under
			 * the built-in cast to bigint (or as a bigint 0): only that.
			 */
			Node *expr = static_cast<Node *>(stringToNode(TextDatumGetCString(adbin)));
			while (IsA(expr, FuncExpr) &&
			       (reinterpret_cast<FuncExpr *>(expr)->funcid == F_INT8_INT4 ||
			        reinterpret_cast<FuncExpr *>(expr)->funcid == F_INT8_INT2) &&
			       list_length(reinterpret_cast<FuncExpr *>(expr)->args) == 1)
				expr = static_cast<Node *>(linitial(reinterpret_cast<FuncExpr *>(expr)->args));
			auto *value = reinterpret_cast<Const *>(expr);
			if (IsA(expr, Const) && !value->constisnull) {
				if (value->consttype == INT8OID)
					zero = DatumGetInt64(value->constvalue) == 0;
				else if (value->consttype == INT4OID)
					zero = DatumGetInt32(value->constvalue) == 0;
				else if (value->consttype == INT2OID)
					zero = DatumGetInt16(value->constvalue) == 0;
			}
		}
	}
	systable_endscan(scan);
	table_close(defaults, AccessShareLock);
	return zero;
}

} // namespace fencing

namespace
{

/*
 * Errors unless the token column of a protected table is as protect() left
 * it: a bigint (not a domain), no default but 0, no identity, not generated.
 */
void check_token_column(Relation rel, const char *column)
{
	AttrNumber attnum = user_column(rel, column);
	Form_pg_attribute att =
	    attnum == InvalidAttrNumber ? nullptr : TupleDescAttr(RelationGetDescr(rel), attnum - 1);
	if (att == nullptr)
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("fencing token column \"%s\" of protected relation \"%s\" cannot be "
		                       "renamed or dropped",
		                       column, qualified_name(RelationGetRelid(rel))),
		                errhint("Run fencing.unprotect() first to remove the guard.")));
	if (att->atttypid != INT8OID)
		ereport(ERROR,
		        (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		         errmsg("fencing token column \"%s\" of protected relation \"%s\" must stay a "
		                "bigint column",
		                column, qualified_name(RelationGetRelid(rel))),
		         errhint("Run fencing.unprotect() first to remove the guard.")));
	if (att->attidentity != '\0' || att->attgenerated != '\0' || !default_is_zero(rel, attnum))
		ereport(ERROR,
		        (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		         errmsg("fencing token column \"%s\" of protected relation \"%s\" must have no "
		                "default but 0, no identity and no generation expression",
		                column, qualified_name(RelationGetRelid(rel))),
		         errdetail("An INSERT that names no token would present the column's default as "
		                   "its token."),
		         errhint("Run fencing.unprotect() first to remove the guard.")));
}

/*
 * Has protected table `relid` its guard trigger?  Not while pg_restore
 * rebuilds it: the registry's data comes before the primary keys and the
 * triggers, which the dump brings itself; until then the event trigger
 * leaves the table alone.
 */
bool has_guard(Oid relid)
{
	Relation rel = relation_open(relid, AccessShareLock);
	bool found = false;
	for (int i = 0; rel->trigdesc != nullptr && i < rel->trigdesc->numtriggers && !found; i++)
		found = strcmp(rel->trigdesc->triggers[i].tgname, "fencing_guard") == 0 &&
		        calls_guard(rel->trigdesc->triggers[i].tgfoid);
	relation_close(rel, NoLock);
	return found;
}

/*
 * Is the guard of protected table `relid` as its tree needs it: a TRUNCATE
 * trigger on every relation that has the guard, and the key-change trigger
 * in the WHEN form exactly when another BEFORE UPDATE row trigger exists?
 * Only then does the event trigger leave the table's triggers alone (and
 * need not act as its owner).
 */
bool guard_complete(Oid relid, bool triggers_only)
{
	if (!has_guard(relid))
		return true;
	bool others = false, when = false, key_changes = false, complete = true;
	ListCell *cell;
	foreach (cell, find_all_inheritors(relid, NoLock, nullptr)) {
		Relation rel = relation_open(lfirst_oid(cell), AccessShareLock);
		bool guarded = false, truncate = false;
		for (int i = 0; rel->trigdesc != nullptr && i < rel->trigdesc->numtriggers; i++) {
			const Trigger &t = rel->trigdesc->triggers[i];
			if (!calls_guard(t.tgfoid)) {
				others |= TRIGGER_TYPE_MATCHES(t.tgtype, TRIGGER_TYPE_ROW, TRIGGER_TYPE_BEFORE,
				                               TRIGGER_TYPE_UPDATE);
				continue;
			}
			guarded |= strcmp(t.tgname, "fencing_guard") == 0;
			truncate |= strcmp(t.tgname, "fencing_guard_truncate") == 0;
			if (lfirst_oid(cell) == relid && strcmp(t.tgname, "fencing_guard_key_changes") == 0) {
				key_changes = true;
				when = t.tgqual != nullptr;
			}
		}
		complete = complete && (!guarded || truncate);
		relation_close(rel, NoLock);
	}
	/*
	 * After a trigger was created, only the key-change trigger's form is at
	 * stake: whatever else is missing is being made (by protect(), by
	 * pg_restore, which brings them all) or was dropped by the owner.
	 */
	if (triggers_only)
		return !key_changes || others == when;
	return complete && key_changes && others == when;
}

} // namespace

namespace fencing
{

/*
 * The TRUNCATE triggers of a protected table's tree, each made as the owner
 * of the relation it goes on (a partition may have another owner).
 */
void guard_truncate_tree(const Registration &registration)
{
	ListCell *cell;
	foreach (cell, find_all_inheritors(registration.relid, NoLock, nullptr))
		call_with_settings(&guard_truncate_call, &guard_truncate_call_0_3_0, lfirst_oid(cell),
		                   NameStr(registration.token_column), registration.mode);
}

} // namespace fencing

namespace
{

/*
 * The protected tables a change to `rel` reaches (a trigger on it, a
 * partition attached to it): itself, the partitioned tables above it and
 * the partitions below it; each gets the TRUNCATE triggers and the
 * key-change trigger its tree needs, made as its owner.
 */
void complete_guards_near(Relation rel, bool triggers_only)
{
	List *near = list_concat(list_copy(partition_ancestors(rel)),
	                         find_all_inheritors(RelationGetRelid(rel), NoLock, nullptr));
	ListCell *cell;
	foreach (cell, near) {
		Registration registration;
		if (!registration_of(lfirst_oid(cell), &registration) || !registration.is_protected ||
		    guard_complete(registration.relid, triggers_only))
			continue;
		if (!triggers_only)
			guard_truncate_tree(registration);
		call_with_settings(&guard_key_changes_call, &guard_key_changes_call_0_3_0,
		                   registration.relid, NameStr(registration.token_column),
		                   registration.mode);
	}
}

} // namespace

namespace fencing
{

/*
 * Partitions of `relid` registered on their own (protected once, or detached
 * and attached again) keep marks made under their key identity then: each
 * whose identity changed gets its floor, like the table, and the registry
 * its new identity.  The marks made from then on are under that identity, so
 * a later DDL on the partition (ATTACH, protect()) finds it unchanged.
 */
void follow_partition_identities(Oid relid)
{
	ListCell *cell;
	foreach (cell, find_all_inheritors(relid, NoLock, nullptr)) {
		Registration own;
		if (lfirst_oid(cell) == relid || !registration_of(lfirst_oid(cell), &own))
			continue;
		Relation part = relation_open(lfirst_oid(cell), AccessShareLock);
		if (!identity_unchanged(part))
			(void)record_registration(part, NameStr(own.token_column), own.mode, own.is_protected);
		relation_close(part, NoLock);
	}
}

} // namespace fencing

namespace
{

/* What DDL may not do to a protected table, and what it must follow. */
void check_guarded(Relation rel, const Collected &collected)
{
	Oid relid = RelationGetRelid(rel);
	/* An inheritance child of a protected table: its rows are the table's, and it has no guard. */
	ListCell *cell;
	Relation inherits = table_open(InheritsRelationId, AccessShareLock);
	ScanKeyData key;
	ScanKeyInit(&key, Anum_pg_inherits_inhrelid, BTEqualStrategyNumber, F_OIDEQ,
	            ObjectIdGetDatum(relid));
	SysScanDesc scan =
	    systable_beginscan(inherits, InheritsRelidSeqnoIndexId, true, nullptr, 1, &key);
	Oid protected_parent = InvalidOid;
	for (HeapTuple tuple; HeapTupleIsValid(tuple = systable_getnext(scan));) {
		Oid parent = ((Form_pg_inherits)GETSTRUCT(tuple))->inhparent;
		Registration registration;
		if (get_rel_relkind(parent) != RELKIND_PARTITIONED_TABLE &&
		    registration_of(parent, &registration) && registration.is_protected)
			protected_parent = parent;
	}
	systable_endscan(scan);
	table_close(inherits, AccessShareLock);
	if (OidIsValid(protected_parent))
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("relation \"%s\" cannot inherit from protected table \"%s\"",
		                       qualified_name(relid), qualified_name(protected_parent)),
		                errdetail("Writes through the table reach the child, which has no guard."),
		                errhint("Use declarative partitioning, whose partitions take the guard.")));

	/* The table or partition of a protected table: what its own DDL may not do. */
	Registration registration;
	if (!protection_of(rel, &registration))
		return;
	const char *column = NameStr(registration.token_column);
	if (rel->rd_rel->relpersistence == RELPERSISTENCE_UNLOGGED)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("protected relation \"%s\" cannot be unlogged",
		                       qualified_name(RelationGetRelid(rel))),
		                errdetail("An unlogged table loses its rows in a crash, and with them "
		                          "their tokens.")));
	if (rel->rd_rel->relpersistence == RELPERSISTENCE_TEMP)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("protected relation \"%s\" cannot be temporary",
		                       qualified_name(RelationGetRelid(rel))),
		                errdetail("A temporary table is dropped at the end of its session without "
		                          "the event triggers that keep the extension's state.")));
	foreach (cell, collected.retyped) {
		List *pair = static_cast<List *>(lfirst(cell));
		if (static_cast<Oid>(intVal(linitial(pair))) == relid &&
		    strcmp(strVal(lsecond(pair)), column) == 0)
			ereport(ERROR,
			        (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			         errmsg("fencing token column \"%s\" of protected relation \"%s\" cannot be "
			                "altered",
			                column, qualified_name(RelationGetRelid(rel))),
			         errdetail("A type change, USING rewrite, identity or generation expression "
			                   "would replace the stored tokens or present tokens of its own."),
			         errhint("Run fencing.unprotect() first to remove the guard.")));
	}
	check_token_column(rel, column);
	Registration own;
	bool own_row = registration_of(relid, &own);
	if (registration.relid == relid ? !has_guard(relid) : !own_row)
		return;
	if (identity_unchanged(rel))
		return;
	/*
	 * The key identity changed (columns, order, types, collations): the guard
	 * of a protected table follows the new key (and refuses one it cannot
	 * mark), and the floor for new keys rises above the marks the new
	 * identity cannot find.  A partition (a table attached with marks made
	 * under another key) gets its own floor, which its rows' new keys follow;
	 * so do the table's partitions registered on their own, whose key
	 * changed with the table's.
	 */
	if (registration.relid == relid) {
		call_with_settings(&protect_call, &protect_call_0_3_0, relid, column, registration.mode);
		guard_truncate_tree(registration);
		follow_partition_identities(relid);
	}
	(void)record_registration(rel, column, registration.mode, registration.relid == relid);
}

/*
 * The guard's triggers on `rel` fire on origin (ENABLE TRIGGER): disabled
 * (DISABLE TRIGGER, also ALL or USER), enabled for replica or always, a
 * relation of a protected tree would take writes the guard does not check,
 * or check those logical replication applies.  Checked on the state the
 * command left, whatever its shape: a subcommand on the relation, one
 * recursing from a parent, a table attached or created with its triggers
 * in that state.  For every role: the partition's owner is not the table's.
 */
void require_guard_enabled(Relation rel)
{
	Registration registration;
	TriggerDesc *triggers = rel->trigdesc;
	if (triggers == nullptr || !protection_of(rel, &registration))
		return;
	for (int i = 0; i < triggers->numtriggers; i++) {
		const Trigger &trigger = triggers->triggers[i];
		if (trigger.tgenabled == TRIGGER_FIRES_ON_ORIGIN || !calls_guard(trigger.tgfoid) ||
		    !guard_trigger_named(trigger.tgname))
			continue;
		bool disabled = trigger.tgenabled == TRIGGER_DISABLED;
		ereport(ERROR,
		        (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
		         disabled ? errmsg("trigger \"%s\" on relation \"%s\" guards protected table "
		                           "\"%s\" and cannot be disabled",
		                           trigger.tgname, qualified_name(RelationGetRelid(rel)),
		                           qualified_name(registration.relid))
		                  : errmsg("trigger \"%s\" on relation \"%s\" guards protected table "
		                           "\"%s\" and cannot be enabled for replica or always",
		                           trigger.tgname, qualified_name(RelationGetRelid(rel)),
		                           qualified_name(registration.relid)),
		         errdetail(disabled
		                       ? "A disabled guard lets writes through without their token checked."
		                       : "The guard fires on origin only: enabled for replica it would not "
		                         "check this server's writes, enabled always it would check those "
		                         "logical replication applies."),
		         errhint("Leave the guard's triggers enabled (ENABLE TRIGGER); "
		                 "run fencing.unprotect() on the protected table to remove the guard.")));
	}
}

/* require_guard_enabled() over `relid` and its partitions. */
void require_guards_enabled(Oid relid)
{
	ListCell *cell;
	foreach (cell, find_all_inheritors(relid, NoLock, nullptr)) {
		Relation rel = try_relation_open(lfirst_oid(cell), AccessShareLock);
		if (rel == nullptr)
			continue;
		require_guard_enabled(rel);
		relation_close(rel, NoLock);
	}
}

/*
 * ALTER EXTENSION ... ADD of a relation of a protected tree: DROP EXTENSION
 * would drop it with the extension, without a DROP TABLE to refuse.
 */
void refuse_extension_member(Oid extension, Oid relid)
{
	Relation rel = try_relation_open(relid, AccessShareLock);
	if (rel == nullptr)
		return;
	Registration registration;
	bool guarded = protection_of(rel, &registration);
	relation_close(rel, NoLock);
	if (guarded)
		ereport(ERROR,
		        (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
		         errmsg("relation \"%s\" of protected table \"%s\" cannot become a member of "
		                "extension \"%s\"",
		                qualified_name(relid), qualified_name(registration.relid),
		                get_extension_name(extension)),
		         errdetail("DROP EXTENSION would drop it, and its rows' tokens with it."),
		         errhint("Run fencing.unprotect() on the protected table first.")));
}

/*
 * A relation that joins a protected table's tree (ATTACH PARTITION, CREATE
 * [FOREIGN] TABLE ... PARTITION OF) at any level needs the protected
 * table's owner: an attached table brings its rows with their tokens (a
 * foreign table, whatever its server holds), which the guard never checked.
 * PostgreSQL lets the owner of a partition that is itself partitioned add
 * partitions to it; below a protected table, that owner could otherwise
 * detach one, lower its tokens and attach it again.
 */
void require_joins_by_owner(const Collected &collected)
{
	List *joined = list_copy(collected.attached);
	ListCell *cell;
	foreach (cell, collected.created)
		if (get_rel_relispartition(lfirst_oid(cell)))
			joined = list_append_unique_oid(joined, lfirst_oid(cell));
	foreach (cell, joined) {
		Oid parent = get_partition_parent(lfirst_oid(cell), true);
		require_tree_owner(
		    parent, GetUserId(),
		    psprintf("add partition \"%s\" to its tree", qualified_name(lfirst_oid(cell))));
	}
}

SPIPlanPtr forget_orphans_plan = nullptr;

/*
 * A relation just created has no history: marks, floors or a registry row
 * under its OID belong to a relation of that OID dropped without the
 * extension seeing it (a temporary table of 0.3.0 at session end, a drop
 * with the event triggers off).  They go, so that it inherits none.
 */
void forget_orphan_state(List *created)
{
	if (created == NIL)
		return;
	Oid types[1] = {REGCLASSARRAYOID};
	Datum values[1] = {relid_array(created)};
	run_as_owner(&forget_orphans_plan,
	             "WITH marks AS (DELETE FROM fencing.deleted_keys"
	             "  WHERE relid OPERATOR(pg_catalog.=) ANY ($1)),"
	             " floors AS (DELETE FROM fencing.floors"
	             "  WHERE relid OPERATOR(pg_catalog.=) ANY ($1))"
	             " DELETE FROM fencing.registry WHERE relid OPERATOR(pg_catalog.=) ANY ($1)",
	             1, types, values, InvalidSnapshot, false,
	             [&](int rc) { expect_result(rc, SPI_OK_DELETE, "forgetting orphan state"); });
	ListCell *cell;
	foreach (cell, created)
		CacheInvalidateRelcacheByRelid(lfirst_oid(cell));
}

} // namespace

namespace
{

SPIPlanPtr copy_marks_plan = nullptr;
SPIPlanPtr partition_floor_plan = nullptr;
SPIPlanPtr raise_floors_plan = nullptr;

/*
 * A partition left a protected table: the table keeps what the partition
 * held.  Its marks (also those a table attached as a partition brought in)
 * are copied to the table and its ancestors, and their floors rise to the
 * partition's floors and to the highest token of the rows it takes away
 * (read in C), so that none of its keys can come back under an older token.
 * The partition stays in the registry, unprotected, with the key identity
 * its marks were made under.
 */
void keep_history(Oid parent, Oid partition)
{
	Relation parent_rel = relation_open(parent, AccessShareLock);
	Registration registration;
	bool guarded = protection_of(parent_rel, &registration);
	List *scope = lcons_oid(parent, list_copy(partition_ancestors(parent_rel)));
	relation_close(parent_rel, NoLock);
	if (!guarded)
		return;
	List *tree = find_all_inheritors(partition, AccessShareLock, nullptr);

	Oid types[2] = {REGCLASSARRAYOID, REGCLASSARRAYOID};
	Datum values[2] = {relid_array(scope), relid_array(tree)};
	run_as_owner(&copy_marks_plan,
	             "INSERT INTO fencing.deleted_keys (relid, key, token)"
	             " SELECT s.s, d.key, pg_catalog.max(d.token)"
	             " FROM fencing.deleted_keys d, pg_catalog.unnest($1) s"
	             " WHERE d.relid OPERATOR(pg_catalog.=) ANY ($2)"
	             " GROUP BY s.s, d.key"
	             " ON CONFLICT (relid, key) DO UPDATE"
	             " SET token = EXCLUDED.token, deleted_at = pg_catalog.now()"
	             " WHERE fencing.token_accepts(deleted_keys.token, EXCLUDED.token, true)",
	             2, types, values, InvalidSnapshot, false,
	             [&](int rc) { expect_result(rc, SPI_OK_INSERT, "copying marks"); });

	int64 highest = run_as_owner(&partition_floor_plan,
	                             "SELECT pg_catalog.max(f.token) FROM fencing.floors f"
	                             " WHERE f.relid OPERATOR(pg_catalog.=) ANY ($1)",
	                             1, types + 1, values + 1, GetLatestSnapshot(), true, [&](int rc) {
		                             expect_result(rc, SPI_OK_SELECT, "reading floors");
		                             bool isnull = true;
		                             int64 floor = SPI_processed > 0
		                                               ? DatumGetInt64(result_value(0, 1, &isnull))
		                                               : 0;
		                             return isnull ? 0 : floor;
	                             });
	ListCell *cell;
	foreach (cell, tree) {
		Relation leaf = table_open(lfirst_oid(cell), AccessShareLock);
		highest =
		    std::max(highest, highest_stored_token_below(leaf, NameStr(registration.token_column)));
		table_close(leaf, NoLock);
	}
	if (highest > 0) {
		Oid floor_types[2] = {REGCLASSARRAYOID, INT8OID};
		Datum floor_values[2] = {values[0], Int64GetDatum(highest)};
		run_as_owner(&raise_floors_plan,
		             "INSERT INTO fencing.floors (relid, token)"
		             " SELECT s, $2 FROM pg_catalog.unnest($1) s"
		             " ON CONFLICT (relid) DO UPDATE"
		             " SET token = EXCLUDED.token, raised_at = pg_catalog.now()"
		             " WHERE fencing.token_accepts(floors.token, EXCLUDED.token, true)",
		             2, floor_types, floor_values, InvalidSnapshot, false,
		             [&](int rc) { expect_result(rc, SPI_OK_INSERT, "raising floors"); });
	}
	Relation detached = relation_open(partition, AccessShareLock);
	Registration own;
	if (!registration_of(partition, &own))
		(void)record_registration(detached, NameStr(registration.token_column), registration.mode,
		                          false, true);
	relation_close(detached, NoLock);
}

/* The fixed part of trigger `trigger_oid`'s pg_trigger row; false if there is none. */
bool trigger_row(Oid trigger_oid, FormData_pg_trigger *row)
{
	Relation triggers = table_open(TriggerRelationId, AccessShareLock);
	ScanKeyData key;
	ScanKeyInit(&key, Anum_pg_trigger_oid, BTEqualStrategyNumber, F_OIDEQ,
	            ObjectIdGetDatum(trigger_oid));
	SysScanDesc scan = systable_beginscan(triggers, TriggerOidIndexId, true, nullptr, 1, &key);
	HeapTuple tuple = systable_getnext(scan);
	bool found = HeapTupleIsValid(tuple);
	if (found)
		*row = *reinterpret_cast<Form_pg_trigger>(GETSTRUCT(tuple));
	systable_endscan(scan);
	table_close(triggers, AccessShareLock);
	return found;
}

/*
 * A trigger created, replaced or renamed: the guard's triggers on a
 * protected table keep their names, and another BEFORE UPDATE row trigger
 * makes the guard's key check take the form that sees the keys it changes.
 * On a relation of a protected tree only the protected table's owner may
 *  - make, replace or rename a trigger to a name of the guard's:
 *    CREATE OR REPLACE TRIGGER needs only the TRIGGER privilege and keeps
 *    the name (and OID) of the trigger it replaces, so a partition's owner
 *    or a role granted TRIGGER could otherwise put a function of its own in
 *    the place of a guard trigger (a partition's TRUNCATE guard is its own
 *    trigger, not a clone PostgreSQL protects), as dropping one would;
 *  - make a BEFORE row trigger for INSERT or UPDATE that fires after the
 *    guard (triggers fire in name order): it can rewrite the token the guard
 *    just checked and stored, under any writer's write.  (One firing before
 *    the guard changes what the write presents, which the guard then checks.)
 * Clones follow the trigger of the partitioned table they copy.
 */
void follow_trigger(Oid trigger_oid, bool renamed)
{
	FormData_pg_trigger row;
	if (!trigger_row(trigger_oid, &row))
		return;
	Oid relid = row.tgrelid, function = row.tgfoid, parent = row.tgparentid;
	int16 type = row.tgtype;
	NameData name = row.tgname;
	Relation rel = relation_open(relid, AccessShareLock);
	bool guard = calls_guard(function);
	if (renamed && guard && !guard_trigger_named(NameStr(name)) && registered(rel))
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("the guard's triggers cannot be renamed"),
		                errhint("Run fencing.unprotect() to remove the guard.")));
	if (!OidIsValid(parent) && guard_trigger_named(NameStr(name)))
		require_tree_owner(
		    relid, GetUserId(),
		    psprintf("make or replace trigger \"%s\" on \"%s\", a trigger of its guard",
		             NameStr(name), qualified_name(relid)));
	if (!guard && !OidIsValid(parent) && TRIGGER_FOR_ROW(type) && TRIGGER_FOR_BEFORE(type) &&
	    (TRIGGER_FOR_INSERT(type) || TRIGGER_FOR_UPDATE(type)) &&
	    strcmp(NameStr(name), guard_trigger_name) > 0)
		require_tree_owner(relid, GetUserId(),
		                   psprintf("make trigger \"%s\" on \"%s\" fire after its guard",
		                            NameStr(name), qualified_name(relid)));
	if (!guard && TRIGGER_FOR_ROW(type) && TRIGGER_FOR_BEFORE(type) && TRIGGER_FOR_UPDATE(type))
		complete_guards_near(rel, true);
	relation_close(rel, NoLock);
}

} // namespace

/*
 * fencing_internal._after_table_ddl(): the ddl_command_end event trigger.  It fires
 * for every role's DDL and runs with that role's rights (SECURITY INVOKER);
 * what it changes it changes as the extension owner (its own tables) or as
 * the owner of the table concerned (the guard's triggers).
 */
FENCING_FUNCTION(after_table_ddl)
{
	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
		        (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
		         errmsg("fencing_internal._after_table_ddl: not fired by an event trigger")));
	if (own_ddl > 0)
		PG_RETURN_VOID();
	/*
	 * Citus' own connections (shard and metadata work it sends to a node)
	 * rebuild tables as they were, guard included: the follow-up work is
	 * skipped for them.  The refusals are not: any role can name its
	 * connection so (application_name), and they change nothing.
	 */
	const char *application = GetConfigOption("application_name", false, false);
	bool citus_connection =
	    citus_loaded() && application != nullptr && strncmp(application, "citus_internal", 14) == 0;
	auto *event = reinterpret_cast<EventTriggerData *>(fcinfo->context);
	bool alter_trigger = event->tag == CMDTAG_ALTER_TRIGGER;
	Collected collected = collect_commands();
	ListCell *cell;
	foreach (cell, collected.joined) {
		List *pair = static_cast<List *>(lfirst(cell));
		refuse_extension_member(linitial_oid(pair), lsecond_oid(pair));
	}
	require_joins_by_owner(collected);
	if (citus_connection) {
		foreach (cell, collected.relations)
			require_guards_enabled(lfirst_oid(cell));
		PG_RETURN_VOID();
	}
	forget_orphan_state(collected.created);
	foreach (cell, collected.detached) {
		List *pair = static_cast<List *>(lfirst(cell));
		keep_history(linitial_oid(pair), lsecond_oid(pair));
	}
	foreach (cell, collected.relations) {
		Relation rel = try_relation_open(lfirst_oid(cell), AccessShareLock);
		if (rel == nullptr)
			continue;
		check_guarded(rel, collected);
		complete_guards_near(rel, false);
		relation_close(rel, NoLock);
		require_guards_enabled(lfirst_oid(cell));
	}
	foreach (cell, collected.triggers)
		follow_trigger(lfirst_oid(cell), alter_trigger);
	PG_RETURN_VOID();
}

namespace
{

/*
 * Partitions dropped in this transaction, each with its partition
 * ancestors as they were (at sql_drop time their catalog rows are gone).
 * Recorded by the object access hook, which runs under the DROP's lock for
 * every route (DROP TABLE, DROP SCHEMA ... CASCADE, DROP OWNED, a parent's
 * cascade), and checked by the sql_drop event trigger.
 */
struct DroppedPartition {
	Oid relid;
	const char *name; /* for the message: the catalogs forget it before sql_drop */
	List *ancestors;  /* OIDs, nearest first */
};
FENCING_PLAIN_DATA(DroppedPartition);
List *dropped_partitions = NIL; /* of DroppedPartition * */

/*
 * Guard triggers dropped in this transaction outside protect() and
 * unprotect(): the relation, the names for the message, and the role that
 * dropped them.  The TRUNCATE guard of a partition is its own trigger, not
 * a clone of the table's, so the partition's owner could drop it and then
 * truncate the partition without a token: at sql_drop, such a drop needs the
 * protected table's owner, unless the relation went in the same command.
 */
struct DroppedGuard {
	Oid relid;
	const char *relation;
	const char *trigger;
	Oid user;
};
FENCING_PLAIN_DATA(DroppedGuard);
List *dropped_guards = NIL; /* of DroppedGuard * */

/*
 * Whether the object access hook may have missed part of the running
 * command's drops: the module was loaded (not preloaded) during the
 * statement, and fencing_before_drop, which loads it at the start of every
 * command, did not fire since.  Then the drop's partitions are unknown.
 */
TimestampTz loaded_in_statement = 0; /* its start; 0: preloaded, or watched since */

void note_dropped_partition(ObjectAccessType access, Oid class_id, Oid object_id, int sub_id)
{
	if (access != OAT_DROP || class_id != RelationRelationId || sub_id != 0 ||
	    !get_rel_relispartition(object_id))
		return;
	MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
	auto *dropped = static_cast<DroppedPartition *>(palloc(sizeof(DroppedPartition)));
	dropped->relid = object_id;
	dropped->name = qualified_name(object_id);
	dropped->ancestors = list_copy(get_partition_ancestors(object_id));
	dropped_partitions = lappend(dropped_partitions, dropped);
	MemoryContextSwitchTo(old);
}

SPIPlanPtr any_protected_plan = nullptr;

/* Is some table registered as protected? */
bool any_protected_table()
{
	return run_as_owner(&any_protected_plan, "SELECT FROM fencing.registry WHERE protected LIMIT 1",
	                    0, nullptr, nullptr, InvalidSnapshot, true, [&](int rc) {
		                    expect_result(rc, SPI_OK_SELECT, "reading the registry");
		                    return SPI_processed > 0;
	                    });
}

void note_dropped_guard(ObjectAccessType access, Oid class_id, Oid object_id, int sub_id)
{
	if (access != OAT_DROP || class_id != TriggerRelationId || sub_id != 0 || own_ddl > 0)
		return;
	FormData_pg_trigger row;
	if (!trigger_row(object_id, &row) || OidIsValid(row.tgparentid) || !calls_guard(row.tgfoid))
		return;
	MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
	auto *dropped = static_cast<DroppedGuard *>(palloc(sizeof(DroppedGuard)));
	dropped->relid = row.tgrelid;
	dropped->relation = qualified_name(row.tgrelid);
	dropped->trigger = pstrdup(NameStr(row.tgname));
	dropped->user = GetUserId();
	dropped_guards = lappend(dropped_guards, dropped);
	MemoryContextSwitchTo(old);
}

void forget_dropped_partitions(XactEvent event)
{
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
	    event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT ||
	    event == XACT_EVENT_PREPARE) {
		dropped_partitions = NIL;
		dropped_guards = NIL;
	}
}

} // namespace

namespace fencing
{

void ddl_module_loaded()
{
	if (!process_shared_preload_libraries_in_progress)
		loaded_in_statement = GetCurrentStatementStartTimestamp();
}

void ddl_object_access(ObjectAccessType access, Oid class_id, Oid object_id, int sub_id)
{
	guarded("object access hook", [&]() {
		note_dropped_partition(access, class_id, object_id, sub_id);
		note_dropped_guard(access, class_id, object_id, sub_id);
	});
}

void ddl_end_of_transaction(XactEvent event)
{
	forget_dropped_partitions(event);
}

} // namespace fencing

/*
 * fencing_internal._before_drop(): the ddl_command_start event trigger of every
 * command (not only DROP TABLE: DROP EXTENSION, DROP OWNED, DROP SCHEMA,
 * DROP TYPE, DROP FUNCTION, DROP SERVER ... CASCADE can drop tables too).
 * It loads this module, whose object access hook then sees every relation
 * the command drops.
 */
FENCING_FUNCTION(before_drop)
{
	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
		                errmsg("fencing_internal._before_drop: not fired by an event trigger")));
	loaded_in_statement = 0;
	PG_RETURN_VOID();
}

/*
 * fencing_internal._refuse_partition_drops(): from the sql_drop event trigger.  A
 * partition of a protected table takes its rows' tokens along when it is
 * dropped, so a key could come back under an older token: refused (the whole
 * command rolls back), unless the protected table goes in the same command.
 * DETACH PARTITION first leaves the table the partition's history.
 */
FENCING_FUNCTION(refuse_partition_drops)
{
	List *recorded = dropped_partitions;
	List *guards = dropped_guards;
	dropped_partitions = NIL;
	dropped_guards = NIL;
	bool unwatched =
	    loaded_in_statement != 0 && loaded_in_statement == GetCurrentStatementStartTimestamp();
	if (recorded == NIL && guards == NIL && !unwatched)
		PG_RETURN_VOID();
	MemoryContext caller = CurrentMemoryContext;
	List *dropped = NIL;
	bool guard_dropped = false;
	run_sql("SELECT objid, object_type = 'trigger'"
	        " FROM pg_catalog.pg_event_trigger_dropped_objects()"
	        " WHERE classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND objsubid = 0"
	        " AND object_type IN ('table', 'foreign table')"
	        " OR classid = 'pg_catalog.pg_trigger'::pg_catalog.regclass"
	        " AND address_names[pg_catalog.array_upper(address_names, 1)] LIKE 'fencing\\_guard%'",
	        0, nullptr, nullptr, InvalidSnapshot, true, false, [&](int rc) {
		        expect_result(rc, SPI_OK_SELECT, "reading the dropped objects");
		        MemoryContext spi = MemoryContextSwitchTo(caller);
		        for (uint64 row = 0; row < SPI_processed; row++) {
			        bool isnull;
			        if (DatumGetBool(result_value(row, 2, &isnull)))
				        guard_dropped = true;
			        else
				        dropped =
				            lappend_oid(dropped, DatumGetObjectId(result_value(row, 1, &isnull)));
		        }
		        MemoryContextSwitchTo(spi);
	        });
	/*
	 * Without preload and with fencing_before_drop disabled, the module
	 * loaded only now: which of the dropped tables were partitions, and who
	 * dropped which guard, is not known any more.  Fail closed while a
	 * protected table exists.
	 */
	if (unwatched && (dropped != NIL || guard_dropped) && any_protected_table())
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("fencing cannot check this drop for partitions of protected tables"),
		                errdetail("The module was loaded during the command: event trigger "
		                          "fencing_before_drop, which loads it first, did not fire."),
		                errhint("Enable event trigger fencing_before_drop, or add fencing to "
		                        "shared_preload_libraries.")));
	ListCell *cell;
	foreach (cell, guards) {
		auto *entry = static_cast<DroppedGuard *>(lfirst(cell));
		if (!list_member_oid(dropped, entry->relid) &&
		    SearchSysCacheExists1(RELOID, ObjectIdGetDatum(entry->relid)))
			require_tree_owner(
			    entry->relid, entry->user,
			    psprintf("drop trigger \"%s\" on \"%s\"", entry->trigger, entry->relation));
	}
	foreach (cell, recorded) {
		auto *entry = static_cast<DroppedPartition *>(lfirst(cell));
		if (!list_member_oid(dropped, entry->relid))
			continue;
		ListCell *ancestor;
		foreach (ancestor, entry->ancestors) {
			Registration registration;
			if (!registration_of(lfirst_oid(ancestor), &registration) || !registration.is_protected)
				continue;
			if (!list_member_oid(dropped, lfirst_oid(ancestor)))
				ereport(ERROR,
				        (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				         errmsg("partition \"%s\" of protected table \"%s\" cannot be dropped",
				                entry->name, qualified_name(lfirst_oid(ancestor))),
				         errdetail("Its rows' tokens would go with it, and their keys could come "
				                   "back under older tokens."),
				         errhint("Detach it first (ALTER TABLE ... DETACH PARTITION), which leaves "
				                 "the table its history, then drop it.")));
			break;
		}
	}
	PG_RETURN_VOID();
}
