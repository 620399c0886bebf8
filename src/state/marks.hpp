/*
 * High-water marks that outlive rows: a key deleted under token t cannot be
 * inserted again under an older token (fencing.deleted_keys), and a table
 * truncated under token t accepts no new key under an older token
 * (fencing.floors).  Both tables are written only with the extension
 * owner's rights.
 *
 * Where marks live: under the relation that held the row and under each of
 * its partition ancestors, and a new key is checked against all of them.
 * So a partition detached from its table takes its marks along and leaves
 * the table its own copy, and a table attached as a partition brings its
 * marks into the tree.
 */
#pragma once

#include "catalog/keys.hpp"
#include "base/token_compare.hpp"

extern "C" {
#include "utils/snapshot.h"
}

namespace fencing
{

/* The relations a row's marks are kept under: its own, then its partition ancestors. */
struct MarkScope {
	int count;
	Oid *relids; /* palloc'd */
};
FENCING_PLAIN_DATA(MarkScope);

MarkScope mark_scope(Relation rel);

/*
 * The highest token a new row with this key must follow, as of the latest
 * committed state: the key's deletion marks and the tables' floors over the
 * scope.  False if there is none.
 */
bool find_high_water(const MarkScope &scope, const KeyHash &key, int64 *mark);

/* Records that the key was deleted under `token`; a mark never goes down. */
void record_mark(const MarkScope &scope, const KeyHash &key, int64 token);

/*
 * reset_token(): sets every mark of `key` kept under `relations` (a table's
 * partition tree and its ancestors) to `token`, lower or higher; returns the
 * highest mark there was, 0 if none.
 */
int64 reset_marks(List *relations, const KeyHash &key, int64 token);

/*
 * Records that `relid` takes no new key below `token` (TRUNCATE), or with
 * `every_write` no write at all (compact()); a floor never goes down.
 */
void raise_floor(Oid relid, int64 token, bool every_write = false);

/*
 * The highest compaction floor over the scope (0 if none): no write may
 * present a token below it.  Cached per backend; raise_floor(..., true) invalidates.
 */
int64 floor_of(const MarkScope &scope);

/* floor_of(mark_scope(rel)), working the scope out only when the floor is not cached. */
int64 floor_of(Relation rel);

} // namespace fencing
