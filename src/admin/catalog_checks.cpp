/*
 * What fencing.protect() and the DDL event trigger ask of C: whether a
 * table's primary key can be guarded, the condition under which an UPDATE
 * changed the key, and which partitions a DDL command detached.
 */
#include "admin/catalog_checks.hpp"
#include "base/spi.hpp"
#include "catalog/keys.hpp"
#include "catalog/relation.hpp"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "nodes/parsenodes.h"
#include "tcop/deparse_utility.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
}

/*
 * fencing_internal.key_change_condition(target): errors unless the table has
 * an immediate primary key that the guard can mark (55000, 0A000); returns
 * the WHEN condition of the AFTER UPDATE trigger, true when the new row's key
 * differs from the old one's, by the key's own equality operators:
 * NOT (OLD."a" OPERATOR(pg_catalog.=) NEW."a" AND ...).
 */
FENCING_FUNCTION(key_change_condition)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
		        (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("target must not be null")));
	Relation rel = try_relation_open(PG_GETARG_OID(0), AccessShareLock);
	if (rel == nullptr)
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
		                errmsg("relation with OID %u does not exist", PG_GETARG_OID(0))));
	Relation pk = fencing::open_primary_key(rel);
	fencing::require_identifiable_key(rel, pk);
	fencing::KeyColumns key = fencing::key_columns(pk);
	StringInfoData condition;
	initStringInfo(&condition);
	appendStringInfoString(&condition, "NOT (");
	for (int i = 0; i < key.count; i++) {
		const char *column = quote_identifier(
		    NameStr(TupleDescAttr(RelationGetDescr(rel), key.attnums[i] - 1)->attname));
		appendStringInfo(&condition, "%sOLD.%s %s NEW.%s", i > 0 ? " AND " : "", column,
		                 fencing::key_equality_operator(pk, i), column);
	}
	appendStringInfoChar(&condition, ')');
	index_close(pk, AccessShareLock);
	relation_close(rel, AccessShareLock);
	PG_RETURN_TEXT_P(cstring_to_text(condition.data));
}

namespace fencing
{

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

static void put_detached_partitions(ReturnSetInfo *rsinfo);

/*
 * fencing._detached_partitions(): (parent, partition) for every partition
 * the current DDL command detached; only inside a ddl_command_end event
 * trigger.  PostgreSQL tells event triggers this only through the commands it
 * collected, whose type (pg_ddl_command) only C can read.
 */
FENCING_FUNCTION(detached_partitions)
{
	InitMaterializedSRF(fcinfo, 0);
	auto *rsinfo = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);
	fencing::with_spi([rsinfo]() { put_detached_partitions(rsinfo); });
	return static_cast<Datum>(0);
}

/* detached_partitions()'s rows, read with SPI connected. */
static void put_detached_partitions(ReturnSetInfo *rsinfo)
{
	int rc = SPI_execute("SELECT command FROM pg_catalog.pg_event_trigger_ddl_commands()", true, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "fencing: reading the DDL commands failed: %s", SPI_result_code_string(rc));
	for (uint64 row = 0; row < SPI_processed; row++) {
		bool isnull;
		Datum command = SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, 1, &isnull);
		auto *collected = reinterpret_cast<CollectedCommand *>(DatumGetPointer(command));
		if (isnull || collected->type != SCT_AlterTable)
			continue;
		ListCell *cell;
		foreach (cell, collected->d.alterTable.subcmds) {
			auto *sub = static_cast<CollectedATSubcmd *>(lfirst(cell));
			auto *cmd = reinterpret_cast<AlterTableCmd *>(sub->parsetree);
			if (!IsA(cmd, AlterTableCmd) ||
			    (cmd->subtype != AT_DetachPartition && cmd->subtype != AT_DetachPartitionFinalize))
				continue;
			ListCell *partition;
			foreach (partition, fencing::detached_relations(
			                        reinterpret_cast<PartitionCmd *>(cmd->def)->name)) {
				Datum values[2] = {ObjectIdGetDatum(collected->d.alterTable.objectId),
				                   ObjectIdGetDatum(lfirst_oid(partition))};
				bool nulls[2] = {false, false};
				tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
			}
		}
	}
}
