/*
 * Where a protected table's marks live, behind one interface: on this
 * server (fencing.deleted_keys and fencing.floors, state/marks.hpp), or for
 * a Citus distributed table beside its shards (fencing_citus.marks_<id> and
 * fencing_citus.floors, citus/citus_marks.hpp), where its rows live too.
 *
 * A caller opens a MarkStore once per statement (a trigger, in its fn_extra)
 * or call, and asks it; the store keeps what it looked up for the statement
 * (the partition scope, the floor, a Citus shard's placement).  The Citus
 * implementation is a layer above this one: it registers itself when the
 * module loads (entry/module.cpp, _PG_init), so that nothing here includes
 * citus/.
 */
#pragma once

#include "state/marks.hpp"
#include "state/table_settings.hpp"

extern "C" {
#include "nodes/nodes.h"
#include "nodes/pg_list.h"
#include "utils/rel.h"
}

namespace fencing
{

struct MarkStoreKind;

/* One statement's or call's view of where a relation's marks live. */
struct MarkStore {
	const MarkStoreKind *kind;
	Relation rel;         /* the relation written: a table, a partition or a Citus shard */
	int64 citus_id;       /* the Citus marks id of the relation's guard, else 0 */
	MemoryContext memory; /* where the lookups below are kept: as long as the store */
	bool scope_known;
	MarkScope scope; /* this server: the relations the marks are kept under */
	bool floor_known;
	int64 floor;
	void *placement; /* the implementation's own lookup (a Citus shard's placement), or null */
};
FENCING_PLAIN_DATA(MarkStore);

/* What a store does; each implementation fills every entry. */
struct MarkStoreKind {
	/* The floor no write to the relation presents a token below (compact()). */
	int64 (*write_floor)(MarkStore *store);
	/* Records that `row`'s key (of store->rel) went away under `token`. */
	void (*record)(MarkStore *store, HeapTuple row, const KeyHash &key, int64 token);
	/* The high-water mark a new row with `key` must follow, where the row is written. */
	bool (*find)(MarkStore *store, const KeyHash &key, int64 *mark);
	/* The same for a key of the table as clients name it (fenced_update()). */
	bool (*find_for_table)(MarkStore *store, const KeyHash &key, int64 *mark);
	/* TRUNCATE: the highest token the rows hold, for a message; and with the floor, the bar. */
	int64 (*truncate_shown)(MarkStore *store, AttrNumber token_attnum);
	int64 (*truncate_bar)(MarkStore *store, AttrNumber token_attnum);
	/* TRUNCATE: no new key below `token` from now on. */
	void (*raise_truncate_floor)(MarkStore *store, int64 token);
	/* compact(): the highest token the marks of the table's `tree` hold, or 0 if not read. */
	int64 (*highest_mark)(MarkStore *store, List *tree);
	/*
	 * compact(): raises the floor of the table's `tree` to `below`; returns
	 * the marks removed with it, and puts the relations whose marks are left
	 * to remove in batches into `batched` (room for the tree).
	 */
	int64 (*raise_compaction_floor)(MarkStore *store, List *tree, int64 below, Oid *batched,
	                                int *nbatched);
	/*
	 * reset_token(): sets the marks of `key` over `relations` (the table's
	 * tree and its ancestors) to `token`; returns the highest there was, or 0.
	 */
	int64 (*reset_marks)(MarkStore *store, List *relations, const KeyHash &key, int64 token);
	/*
	 * fenced_update() that is its whole statement `call`: may its write
	 * commit where the row lives in the same round trip?  Returns what
	 * write_alone_end() takes, or -1 for no.
	 */
	int (*write_alone)(MarkStore *store, const Node *call);
	void (*write_alone_end)(int nest);
};

/*
 * The store of `rel`, a relation with `fence` (its guard's settings); looks
 * nothing up yet.  `memory` outlives every use of the store.
 */
MarkStore open_mark_store(Relation rel, const TableSettings &fence, MemoryContext memory);

/*
 * A Citus shard of a hash-distributed table whose guard names no marks id
 * (protected before Citus distributed it): its marks, on this server, would
 * not move with it.  Names the table in *qualified and *name then.
 */
bool marks_left_behind(Relation rel, const TableSettings &fence, const char **qualified,
                       const char **name);

/* The implementation of the marks beside Citus shards (citus/citus_marks.cpp), at _PG_init. */
void register_citus_mark_store(const MarkStoreKind *kind);

/* The marks on this server: what a Citus table's store does where Citus does not place rows. */
extern const MarkStoreKind local_mark_store;

/* This server's partition scope of store->rel, worked out once. */
const MarkScope &store_scope(MarkStore *store);

} // namespace fencing
