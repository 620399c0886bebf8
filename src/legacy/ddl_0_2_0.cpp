/*
 * 0.2.0: its DDL event trigger, in PL/pgSQL, asks C which partitions the
 * command detached (fencing._detached_partitions(), dropped by the update
 * to 0.3.0, whose event trigger is in C: admin/ddl.cpp).  Served until
 * ALTER EXTENSION fencing UPDATE.
 */
#include "base/spi.hpp"
#include "catalog/relation.hpp"

extern "C" {
#include "executor/spi.h"
#include "funcapi.h"
#include "nodes/parsenodes.h"
#include "tcop/deparse_utility.h"
#include "utils/tuplestore.h"
}

static void put_detached_partitions(ReturnSetInfo *rsinfo);

/*
 * fencing._detached_partitions() of 0.2.0's objects: (parent, partition)
 * for every partition the current DDL command detached; only inside a
 * ddl_command_end event trigger.  PostgreSQL tells event triggers this only
 * through the commands it collected, whose type (pg_ddl_command) only C can
 * read.
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
