/*
 * What the extension knows about a table: its fencing settings (carried by
 * the guard trigger's arguments) and its primary key.
 */
#pragma once

#include "token.hpp"

extern "C" {
#include "access/htup.h"
#include "commands/trigger.h"
#include "utils/rel.h"
}

namespace fencing
{

/* Name of the guard trigger that fencing.protect() installs. */
constexpr const char *guard_trigger_name = "fencing_guard";

/* Default token column (SPEC §2) and of unprotected tables used by fenced_update(). */
constexpr const char *default_token_column = "last_fencing_token";

/* A table's fencing settings. */
struct TableFence {
	AttrNumber token_attnum;
	Mode mode;
	bool is_protected;
	int64 citus_id; /* a Citus distributed table's marks id (third argument), else 0 */
};

/* Reads the settings from a guard trigger's arguments (token column, mode[, Citus marks id]). */
void fence_from_trigger(Relation rel, const Trigger *trigger, TableFence *fence);

/* The settings of `rel`'s enabled guard trigger; false if it has none. */
bool find_guard(Relation rel, TableFence *fence);

/*
 * The settings fenced_update() uses for `rel`: its guard trigger's, or for an
 * unprotected table with a last_fencing_token column, monotonic.
 */
void fence_of_table(Relation rel, TableFence *fence);

/* Attribute number of a user column of `rel`, or InvalidAttrNumber. */
AttrNumber user_column(Relation rel, const char *name);

/* Errors (55000) if `rel` has no immediate primary key. */
void require_primary_key(Relation rel);

/* Opens the primary key index of `rel` (AccessShareLock); errors if it has none. */
Relation open_primary_key(Relation rel);

/* A table's primary key columns, in index column order. */
struct KeyColumns {
	int count;
	AttrNumber attnums[INDEX_MAX_KEYS];
};
FENCING_PLAIN_DATA(KeyColumns);
FENCING_PLAIN_DATA(TableFence);

KeyColumns key_columns(Relation pk);

/* Extracts a tuple's key values, in index column order. */
void key_values(Relation rel, const KeyColumns &key, HeapTuple tuple, Datum *values, bool *isnull);

/*
 * "OPERATOR(schema.=)": the equality operator of key column `column` (index
 * order), for SQL that no search_path can redirect.
 */
const char *key_equality_operator(Relation pk, int column);

/*
 * The partitioned tables above a partition, nearest first (NIL for a table
 * that is not a partition), including one it is being detached from
 * concurrently (get_partition_ancestors() stops there): until the detach is
 * finished the partition's rows are still that table's.
 */
List *partition_ancestors(Relation rel);

/*
 * May the current user read these columns of `rel`: SELECT on the table or
 * the columns, directly or through a partition ancestor, and no row-level
 * security in the way?  Messages show key values and tokens only then.
 */
bool may_read(Relation rel, int ncolumns, const AttrNumber *attnums);

/* "(id)=(101)" for key values of `rel` (`pk` its primary key), or NULL when the user may not read them. */
char *describe_key(Relation rel, Relation pk, Datum *values, bool *isnull);

/* The stored token of a row (NULL counts as 0: nothing accepted yet). */
int64 stored_token(Relation rel, HeapTuple tuple, AttrNumber token_attnum);

} // namespace fencing
