/*
 * A JSON object of column names and values, matched to a relation's columns
 * and converted to their types as a plain statement's literals would be:
 * the key and changes arguments of fenced_update() and the key argument of
 * reset_token().
 */
#pragma once

#include "base/boundary.hpp"

extern "C" {
#include "lib/stringinfo.h"
#include "nodes/bitmapset.h"
#include "utils/jsonb.h"
#include "utils/rel.h"
}

namespace fencing
{

/* A JSON object's members, matched to columns and converted to their types. */
struct Columns {
	int count;
	AttrNumber *attnums;
	Datum *values;
	char *nulls; /* SPI style: 'n' or ' ' */
};
FENCING_PLAIN_DATA(Columns);

/* Room for `count` columns, zeroed. */
void alloc_columns(Columns *columns, int count);

/*
 * The members of jsonb argument `argument` (22023 unless an object): their
 * names and values; returns how many.
 */
int object_members(Jsonb *json, const char *argument, char ***names, JsonbValue **values);

/* The type of column `attnum` of `rel`. */
Oid column_type(Relation rel, AttrNumber attnum);

/* The column a member names, or 42703. */
AttrNumber named_column(Relation rel, const char *name);

/*
 * The text a JSON value stands for in the input function of a column of
 * type `type`; nullptr for JSON null.
 */
char *json_text(const JsonbValue &v, Oid type);

/* Converts `text` (nullptr: NULL) with the column's input function; a bad value names the column.
 */
Datum column_value(Relation rel, AttrNumber attnum, const char *text);

/*
 * Where a column stands among the primary key columns `key_attrs` (the
 * relcache's bitmap, offset by FirstLowInvalidHeapAttributeNumber), or -1.
 */
int key_position(Bitmapset *key_attrs, AttrNumber attnum);

/*
 * A `key` argument: every primary key column of `rel` (`key_attrs`) and
 * nothing else, non-null, in attnum order (22023, 42703, 22004 otherwise).
 */
Columns parse_key(Relation rel, Bitmapset *key_attrs, Jsonb *json);

/* The values of `key` (parse_key()) in the order of the primary key index `pk`. */
Datum *key_in_index_order(const Columns &key, Bitmapset *key_attrs, Relation pk);

/* Column `attnum` of `rel`, quoted for SQL text. */
const char *column_name(Relation rel, AttrNumber attnum);

/*
 * "k1" OPERATOR(s.=) $n AND ...: a match of the key columns of `key`
 * (parse_key()) with parameters from `first_param` on, by the primary key
 * `pk`'s own equality operators, schema-qualified.
 */
void append_key_match(StringInfo sql, Relation rel, Relation pk, const Columns &key,
                      int first_param);

} // namespace fencing
