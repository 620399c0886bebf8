/*
 * What PostgreSQL's catalogs say about a relation (the relcache and syscache,
 * and pg_class for a detached partition): its columns, primary key and key values, partition
 * ancestors, what the caller may read of it, the tokens its rows store; the names of the guard's
 * triggers and function; and the tables a DETACH PARTITION named.
 */
#pragma once

#include "base/boundary.hpp"

extern "C" {
#include "access/htup.h"
#include "commands/trigger.h"
#include "nodes/primnodes.h"
#include "utils/rel.h"
}

namespace fencing
{

/* Name of the guard trigger that fencing.protect() installs. */
constexpr const char *guard_trigger_name = "fencing_guard";

/* Is `name` one of the triggers fencing.protect() installs? */
bool guard_trigger_named(const char *name);

/* Default token column (docs/design.md) and of unprotected tables used by fenced_update(). */
constexpr const char *default_token_column = "last_fencing_token";

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

KeyColumns key_columns(Relation pk);

/*
 * key_columns() of the primary key of `rel` (errors if it has none), without
 * opening the index when the key has one column.
 */
KeyColumns primary_key_columns(Relation rel);

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

/* Is `function` fencing.guard()? */
bool calls_guard(Oid function);

/*
 * May the current user read these columns of `rel`: SELECT on the table or
 * the columns, directly or through a partition ancestor, and no row-level
 * security in the way?  Messages show key values and tokens only then.
 */
bool may_read(Relation rel, int ncolumns, const AttrNumber *attnums);

/* "(id)=(101)" for key values of `rel` (`pk` its primary key), or NULL when the user may not read
 * them. */
char *describe_key(Relation rel, Relation pk, Datum *values, bool *isnull);

/*
 * The highest token stored in a relation's own rows (0 if none), as of the
 * latest snapshot, read in C: no operator, cast or function is looked up,
 * so nothing its owner defined runs.  0 for relations without storage.
 */
int64 highest_stored_token(Relation rel, AttrNumber token_attnum);

/* The same over a table and its partitions, by token column name (bigint columns only). */
int64 highest_stored_token_below(Relation rel, const char *token_column);

/* The stored token of a row (NULL counts as 0: nothing accepted yet). */
int64 stored_token(Relation rel, HeapTuple tuple, AttrNumber token_attnum);

/*
 * The relations a DETACH PARTITION named: PostgreSQL does not tell event
 * triggers which one it detached, and the name it was given may be
 * unqualified, to be read under a search_path the event trigger does not
 * have.  So: the tables of that name (in that schema if one was given) that
 * are no longer partitions and whose catalog row this transaction changed.
 * Only tables: a view or anything else of that name is never one.
 */
List *detached_relations(const RangeVar *name);

} // namespace fencing
