/*
 * A protected table's settings (token column, mode, Citus marks id), from the
 * registry or, on a Citus shard, from the guard trigger's arguments.
 */
#pragma once

#include "base/token_compare.hpp"
#include "catalog/relation.hpp"

namespace fencing
{

/* A table's fencing settings. */
struct TableSettings {
	AttrNumber token_attnum;
	Mode mode;
	bool is_protected;
	int64 citus_id; /* a Citus distributed table's marks id (third argument), else 0 */
};

/*
 * The settings of a guard trigger's relation, from the registry (its own
 * registration or its protected partition ancestor's); false if the registry
 * protects neither.  Errors (55000) if the trigger is not one that
 * fencing.protect() installed for those settings.
 */
bool fence_from_trigger(Relation rel, const Trigger *trigger, TableSettings *fence);

/*
 * Reads settings from a guard trigger's arguments (token column, mode[,
 * Citus marks id]): only for a Citus shard, whose triggers Citus copied.
 */
void fence_from_arguments(Relation rel, const Trigger *trigger, TableSettings *fence);

/*
 * Is the Citus marks id of a shard's guard (fence_from_arguments()) the one
 * protect() recorded for its distributed table?  Only then does it act.
 */
bool marks_id_recorded(Relation rel, const TableSettings &fence);

/*
 * The settings of `rel` if the registry protects it (or a Citus shard's
 * guard describes it); false otherwise.
 */
bool find_guard(Relation rel, TableSettings *fence);

/*
 * The settings fenced_update() uses for `rel`: its guard trigger's, or for an
 * unprotected table with a last_fencing_token column, monotonic.
 */
void fence_of_table(Relation rel, TableSettings *fence);
FENCING_PLAIN_DATA(TableSettings);

} // namespace fencing
