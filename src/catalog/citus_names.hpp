/*
 * Names of relations for messages (a Citus shard's is its distributed
 * table's), and what Citus' metadata says about a relation.  The rest of
 * Citus (marks beside shards, floors, fencing.token sent to the workers) is
 * in citus/.
 */
#pragma once

#include "base/boundary.hpp"
#include "base/spi.hpp"

extern "C" {
#include "commands/trigger.h"
#include "utils/rel.h"
}

namespace fencing
{

/* "schema.table" for messages (a Citus shard's is its distributed table's). */
char *relation_display_name(Relation rel);

/* "table" for messages (a Citus shard's is its distributed table's). */
const char *relation_name(Relation rel);

/* Is Citus loaded in this backend? */
bool citus_loaded();

/* Is `relid` a Citus distributed (or reference) table's shell, here? */
bool citus_is_distributed(Oid relid);

/*
 * The Citus table `rel` is a shard of, as "schema.table" and "table", and
 * whether it is distributed by hash (if `hash_distributed` is not NULL);
 * false if `rel` is not a shard (or Citus is not loaded).
 */
bool citus_logical_name(Relation rel, const char **qualified, const char **name,
                        bool *hash_distributed);

/*
 * The table `rel` is named as a Citus shard of, from the names alone: `rel`
 * is "table_<shard id>" and `trigger` one of the guard's triggers with the
 * same suffix, as Citus names a shard's copies.  For messages only, when the
 * shard's metadata is not visible (see fence_of_unprotected()).
 */
bool citus_shard_named(Relation rel, const Trigger *trigger, const char **qualified,
                       const char **name);

/* The shard id a shard relation's name ends with ("orders_102008"), or 0. */
int64 citus_shard_id(Relation rel);

/*
 * Inside SPI: runs a read-only query of Citus' metadata as the extension
 * owner (the caller may have no rights on fencing_citus); `caller` is the
 * memory citus_result_text() and citus_caller_context() give.
 */
void citus_metadata_execute(MemoryContext caller, const char *sql, int nargs, Oid *types,
                            Datum *values);

/*
 * The query in a connection of its own: read() reads the result
 * (citus_result_text(), or in citus_caller_context()) before SPI_finish()
 * and returns what citus_metadata_query() returns.
 */
template <typename Read>
auto citus_metadata_query(const char *sql, int nargs, Oid *types, Datum *values, Read read)
    -> decltype(read())
{
	MemoryContext caller = CurrentMemoryContext;
	return with_spi([&] {
		citus_metadata_execute(caller, sql, nargs, types, values);
		return read();
	});
}

/* The text of column `column` of the first result row, copied out of SPI; NULL if NULL. */
char *citus_result_text(int column);

/*
 * The marks id that fencing.protect() recorded (fencing_citus.shards, the
 * extension owner's) for the distributed table of `rel`, a shell or a shard
 * placed on this node; 0 if none.  A shard's guard acts only with that id.
 */
int64 citus_recorded_id(Relation rel);

/* The memory of citus_metadata_query()'s caller, for what must outlive SPI_finish(). */
MemoryContext citus_caller_context();

} // namespace fencing
