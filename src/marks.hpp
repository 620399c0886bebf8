/*
 * High-water marks of deleted keys: the token under which a key was last
 * deleted outlives the row, so that a stale holder cannot re-insert it.
 * Stored in fencing.deleted_keys, which only the extension owner may write.
 */
#pragma once

#include "token.hpp"

extern "C" {
#include "utils/array.h"
#include "utils/rel.h"
}

namespace fencing
{

/* A key as the marks table stores it: the relation (the partition root) and the key's text. */
struct MarkKey {
	Oid relid;
	ArrayType *key;
};

/*
 * Key types whose equal values the marks normalize before printing them
 * (numeric: 1.0 = 1.00; float: -0 = 0); other types must be "equalimage".
 */
bool normalized_key_type(Oid type);

/* Builds the mark key of `values` (primary key values of `rel`, in index column order). */
MarkKey mark_key(Relation rel, Relation pk, const Datum *values, const bool *isnull);

/* The key's mark as of the latest committed state; false if there is none. */
bool find_mark(const MarkKey &key, int64 *mark);

/* Records that the key was deleted under `token`; a mark never goes down. */
void record_mark(const MarkKey &key, int64 token);

} // namespace fencing
