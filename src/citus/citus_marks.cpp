/*
 * The marks beside Citus shards as a mark store: see citus_marks.hpp.
 */
#include "citus/citus_marks.hpp"
#include "citus/citus.hpp"
#include "citus/token_relay.hpp"

extern "C" {
#include "access/htup_details.h"
#include "utils/memutils.h"
}

namespace fencing
{

namespace
{

/* What a Citus table's store looks up once: its shard's placement, whether it is distributed. */
struct Placement {
	bool shard_known;
	CitusShard shard;
	bool distributed_known;
	bool distributed;
};
FENCING_PLAIN_DATA(Placement);

Placement *placement_of(MarkStore *store)
{
	if (store->placement == nullptr)
		store->placement = MemoryContextAllocZero(store->memory, sizeof(Placement));
	return static_cast<Placement *>(store->placement);
}

/* Where this Citus shard's marks live: worked out once per statement. */
const CitusShard &shard_of(MarkStore *store)
{
	Placement *placement = placement_of(store);
	if (!placement->shard_known) {
		placement->shard = citus_shard(store->rel, store->citus_id);
		placement->shard_known = true;
	}
	return placement->shard;
}

/*
 * Is the relation the distributed table itself (its shell, on the
 * coordinator or the worker a client truncates it from), whose rows are in
 * the shards?  Otherwise its TRUNCATE is that of a table on this server.
 */
bool distributed(MarkStore *store)
{
	Placement *placement = placement_of(store);
	if (!placement->distributed_known) {
		placement->distributed = citus_is_distributed(RelationGetRelid(store->rel));
		placement->distributed_known = true;
	}
	return placement->distributed;
}

/* The shards' floors are the distributed table's, which compact() raises: none per write. */
int64 citus_write_floor(MarkStore *)
{
	return 0;
}

void citus_record(MarkStore *store, HeapTuple row, const KeyHash &key, int64 token)
{
	const CitusShard &shard = shard_of(store);
	bool isnull;
	Datum dist = heap_getattr(row, shard.dist_attnum, RelationGetDescr(store->rel), &isnull);
	citus_record_mark(shard, dist, key, token);
}

bool citus_find(MarkStore *store, const KeyHash &key, int64 *mark)
{
	return citus_find_high_water(shard_of(store), key, mark);
}

bool citus_find_for_table(MarkStore *store, const KeyHash &key, int64 *mark)
{
	return citus_find_high_water_anywhere(store->citus_id, key, mark);
}

/* Citus holds the table's lock on every node by now: no write through Citus runs meanwhile. */
int64 citus_truncate_shown(MarkStore *store, AttrNumber token_attnum)
{
	if (!distributed(store))
		return local_mark_store.truncate_shown(store, token_attnum);
	return citus_highest_stored(store->rel, token_attnum);
}

int64 citus_truncate_bar(MarkStore *store, AttrNumber token_attnum)
{
	if (!distributed(store))
		return local_mark_store.truncate_bar(store, token_attnum);
	return citus_highest_stored(store->rel, token_attnum);
}

void citus_raise_truncate_floor(MarkStore *store, int64 token)
{
	if (!distributed(store)) {
		local_mark_store.raise_truncate_floor(store, token);
		return;
	}
	citus_raise_floor(store->citus_id, token);
}

/* Not read: the marks are on the workers, and reading them all takes long. */
int64 citus_highest_mark(MarkStore *, List *)
{
	return 0;
}

/* The floor on every node, and the marks below it removed at once: none left for batches. */
int64 citus_raise_compaction_floor(MarkStore *store, List *, int64 below, Oid *, int *)
{
	citus_raise_floor(store->citus_id, below);
	return citus_remove_marks(store->citus_id, below);
}

/*
 * The marks of a distributed table are on the workers, and its rows' guards
 * there do not see reset_token()'s registration: refused (reset_token()
 * refuses distributed tables before this).
 */
int64 citus_reset_marks(MarkStore *store, List *relations, const KeyHash &key, int64 token)
{
	if (!distributed(store))
		return local_mark_store.reset_marks(store, relations, key, token);
	ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
	                errmsg("the marks of a Citus distributed table cannot be reset")));
}

int citus_write_alone(MarkStore *, const Node *call)
{
	return citus_call_is_statement(call) ? citus_commit_alone() : -1;
}

const MarkStoreKind citus_mark_store = {
    citus_write_floor,          citus_record,         citus_find,
    citus_find_for_table,       citus_truncate_shown, citus_truncate_bar,
    citus_raise_truncate_floor, citus_highest_mark,   citus_raise_compaction_floor,
    citus_reset_marks,          citus_write_alone,    citus_commit_alone_end,
};

} // namespace

void register_citus_marks()
{
	register_citus_mark_store(&citus_mark_store);
}

} // namespace fencing
