/*
 * Where marks live: see mark_store.hpp.  This file holds the marks on this
 * server and the choice between them and Citus' (registered at _PG_init).
 */
#include "state/mark_store.hpp"
#include "catalog/citus_names.hpp"
#include "base/spi.hpp"

extern "C" {
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/memutils.h"
}

#include <algorithm>

namespace fencing
{

namespace
{

const MarkStoreKind *citus_kind = nullptr;

int64 local_write_floor(MarkStore *store)
{
	if (!store->floor_known) {
		store->floor = floor_of(store->rel);
		store->floor_known = true;
	}
	return store->floor;
}

void local_record(MarkStore *store, HeapTuple, const KeyHash &key, int64 token)
{
	record_mark(store_scope(store), key, token);
}

bool local_find(MarkStore *store, const KeyHash &key, int64 *mark)
{
	return find_high_water(store_scope(store), key, mark);
}

/* Every partition's rows, each a TRUNCATE of its own empties (its trigger checks its rows). */
int64 local_truncate_shown(MarkStore *store, AttrNumber token_attnum)
{
	Relation rel = store->rel;
	return highest_stored_token_below(
	    rel, NameStr(TupleDescAttr(RelationGetDescr(rel), token_attnum - 1)->attname));
}

int64 local_truncate_bar(MarkStore *store, AttrNumber token_attnum)
{
	return std::max(highest_stored_token(store->rel, token_attnum),
	                floor_of(mark_scope(store->rel)));
}

void local_raise_truncate_floor(MarkStore *store, int64 token)
{
	raise_floor(RelationGetRelid(store->rel), token);
}

/* The highest token a table's tree has seen (marks and floors), or 0. */
int64 local_highest_mark(MarkStore *, List *tree)
{
	Oid type = REGCLASSARRAYOID;
	Datum value = relid_array(tree);
	return run_sql("SELECT GREATEST("
	               " (SELECT pg_catalog.max(token) FROM fencing.deleted_keys"
	               "   WHERE relid OPERATOR(pg_catalog.=) ANY ($1)),"
	               " (SELECT pg_catalog.max(token) FROM fencing.floors"
	               "   WHERE relid OPERATOR(pg_catalog.=) ANY ($1)))",
	               1, &type, &value, InvalidSnapshot, true, true, [&](int rc) {
		               expect_result(rc, SPI_OK_SELECT, "reading tokens");
		               bool isnull = true;
		               Datum token = SPI_processed > 0 ? result_value(0, 1, &isnull) : 0;
		               return isnull ? 0 : DatumGetInt64(token);
	               });
}

/*
 * Every relation of the tree gets the floor: a partition detached later
 * keeps it, as it keeps its marks.  They go in batches after.
 */
int64 local_raise_compaction_floor(MarkStore *, List *tree, int64 below, Oid *batched,
                                   int *nbatched)
{
	ListCell *cell;
	foreach (cell, tree) {
		raise_floor(lfirst_oid(cell), below, true);
		batched[(*nbatched)++] = lfirst_oid(cell);
	}
	return 0;
}

int64 local_reset_marks(MarkStore *, List *relations, const KeyHash &key, int64 token)
{
	return reset_marks(relations, key, token);
}

int local_write_alone(MarkStore *, const Node *)
{
	return -1;
}

void local_write_alone_end(int) {}

} // namespace

const MarkStoreKind local_mark_store = {
    local_write_floor,
    local_record,
    local_find,
    local_find,
    local_truncate_shown,
    local_truncate_bar,
    local_raise_truncate_floor,
    local_highest_mark,
    local_raise_compaction_floor,
    local_reset_marks,
    local_write_alone,
    local_write_alone_end,
};

void register_citus_mark_store(const MarkStoreKind *kind)
{
	citus_kind = kind;
}

MarkStore open_mark_store(Relation rel, const TableSettings &fence, MemoryContext memory)
{
	MarkStore store{};
	store.kind = fence.citus_id == 0 ? &local_mark_store : citus_kind;
	if (store.kind == nullptr)
		elog(ERROR, "fencing: the marks of Citus tables are not available");
	store.rel = rel;
	store.citus_id = fence.citus_id;
	store.memory = memory;
	return store;
}

bool marks_left_behind(Relation rel, const TableSettings &fence, const char **qualified,
                       const char **name)
{
	bool hash = false;
	return fence.citus_id == 0 && citus_loaded() &&
	       citus_logical_name(rel, qualified, name, &hash) && hash;
}

const MarkScope &store_scope(MarkStore *store)
{
	if (!store->scope_known) {
		MemoryContext old = MemoryContextSwitchTo(store->memory);
		store->scope = mark_scope(store->rel);
		MemoryContextSwitchTo(old);
		store->scope_known = true;
	}
	return store->scope;
}

} // namespace fencing
