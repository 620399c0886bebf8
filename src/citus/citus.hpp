/*
 * Citus: the guard on distributed tables.
 *
 * protect() gives a hash-distributed table a third guard argument, the id of
 * its marks table fencing_citus.marks_<id>: a distributed table co-located
 * with it, so that the marks of a shard's deleted keys live in the
 * co-located shard of the marks table, on the same node, and move, split and
 * rebalance with it.  TRUNCATE floors live in the reference table
 * fencing_citus.floors (on every node), keyed by that id.  The shard
 * triggers write and read the local shards of both directly.
 *
 * SET LOCAL fencing.token (or set_config(..., true)) reaches the workers
 * through Citus' own propagation of SET LOCAL, called before each statement
 * whose token differs from the one the workers last got: directly where
 * Citus exports it (12.1), else through its utility hook (14, hidden
 * symbols), which propagates in multi-statement transactions only (a
 * transaction block, DO, a procedure or a function) - elsewhere the workers
 * see no token and refuse the write (23T02).
 */
#pragma once

#include "catalog/citus_names.hpp"
#include "catalog/keys.hpp"

extern "C" {
#include "utils/rel.h"
}

namespace fencing
{

/* Where a shard's marks live: its co-located marks shard and the local floors shard. */
struct CitusShard {
	Oid marks;              /* fencing_citus.marks_<id>_<shard> */
	Oid floors;             /* fencing_citus.floors_<shard> */
	AttrNumber dist_attnum; /* the distribution column, in the shard */
	Oid dist_type;
	int64 id;
};
FENCING_PLAIN_DATA(CitusShard);

/* The placement of `shard` (a shard of a table protected with marks id `id`); errors if none. */
CitusShard citus_shard(Relation shard, int64 id);

/* Is this node Citus' coordinator, and is this not one of Citus' own connections? */
bool on_coordinator();

/*
 * Is this node Citus' coordinator, by its metadata alone (for any
 * connection, whatever its application_name)?
 */
bool citus_node_is_coordinator();

/* Records a deleted key's mark in the shard's marks shard; never lowers it. */
void citus_record_mark(const CitusShard &shard, Datum dist_value, const KeyHash &key, int64 token);

/* The key's mark and the table's floor, whichever is higher; false if none. */
bool citus_find_high_water(const CitusShard &shard, const KeyHash &key, int64 *mark);

/* The same from the coordinator, through the distributed marks table (any shard). */
bool citus_find_high_water_anywhere(int64 id, const KeyHash &key, int64 *mark);

/* The highest token stored in a distributed table (0 if none), read through Citus. */
int64 citus_highest_stored(Relation rel, AttrNumber token_attnum);

/* Raises the floor of the table with marks id `id` on every node; never lowers it. */
void citus_raise_floor(int64 id, int64 token);

/* Removes the marks below `below` of the table with marks id `id`; returns how many. */
int64 citus_remove_marks(int64 id, int64 below);

/*
 * Is schema fencing_citus, with its table floors, the one the extension
 * made (owned by the extension owner)?
 */
bool citus_own_schema();

} // namespace fencing
