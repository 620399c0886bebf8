/*
 * A dynahash table in CacheMemoryContext from a shape's fixed part plus a
 * hash of its column list to the plans; the full column list is stored too,
 * so a hash collision only costs a re-prepare.  Each entry remembers when it
 * was last used; past the capacity the least recently used unused one goes.
 * A relcache invalidation marks the table's entries stale (a callback must
 * not free what a caller up the stack may be using); stale entries are freed
 * at the next lookup once no call runs them.
 */
#include "guard/plan_cache.hpp"
#include "base/relid_cache.hpp"

extern "C" {
#include "common/hashfn.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
}

namespace fencing
{

namespace
{

struct Key {
	Oid relid;
	AttrNumber token_attnum;
	bool strict;
	int nkeys;
	int nchanged;
	uint32 columns_hash;
};
FENCING_PLAIN_DATA(Key);

struct Entry {
	Key key;
	AttrNumber *columns; /* in CacheMemoryContext */
	FencedPlans plans;
	uint64 used; /* `clock` at its last use */
	bool stale;  /* its table was invalidated: free once unused */
};
FENCING_PLAIN_DATA(Entry);

HTAB *cache = nullptr;
uint64 clock = 0; /* counts lookups */
bool some_stale = false;

void forget_relation(Datum, Oid relid)
{
	if (cache == nullptr)
		return;
	HASH_SEQ_STATUS status;
	hash_seq_init(&status, cache);
	for (Entry *entry; (entry = static_cast<Entry *>(hash_seq_search(&status))) != nullptr;) {
		if (relid == InvalidOid || entry->key.relid == relid) {
			entry->stale = true;
			some_stale = true;
		}
	}
}

size_t columns_size(const PlanShape &shape)
{
	return sizeof(AttrNumber) * (shape.nkeys + shape.nchanged);
}

Key key_of(const PlanShape &shape)
{
	Key key;
	memset(&key, 0, sizeof key);
	key.relid = shape.relid;
	key.token_attnum = shape.token_attnum;
	key.strict = shape.strict;
	key.nkeys = shape.nkeys;
	key.nchanged = shape.nchanged;
	key.columns_hash = hash_bytes(reinterpret_cast<const unsigned char *>(shape.columns),
	                              static_cast<int>(columns_size(shape)));
	return key;
}

void free_plan(SPIPlanPtr plan)
{
	if (plan != nullptr)
		SPI_freeplan(plan);
}

void remove(Entry *entry)
{
	free_plan(entry->plans.update);
	free_plan(entry->plans.probe);
	pfree(entry->columns);
	bool found;
	hash_search(cache, &entry->key, HASH_REMOVE, &found);
}

/* Frees stale entries nobody runs, then unused ones, least recently used first, down to `keep`. */
void sweep(long keep)
{
	HASH_SEQ_STATUS status;
	if (some_stale) {
		some_stale = false;
		hash_seq_init(&status, cache);
		for (Entry *entry; (entry = static_cast<Entry *>(hash_seq_search(&status))) != nullptr;) {
			if (entry->stale && entry->plans.users > 0)
				some_stale = true;
			else if (entry->stale)
				remove(entry);
		}
	}
	while (hash_get_num_entries(cache) > keep) {
		Entry *oldest = nullptr;
		hash_seq_init(&status, cache);
		for (Entry *entry; (entry = static_cast<Entry *>(hash_seq_search(&status))) != nullptr;)
			if (entry->plans.users == 0 && (oldest == nullptr || entry->used < oldest->used))
				oldest = entry;
		if (oldest == nullptr)
			break; /* all in use by nested calls: the bound is exceeded until they return */
		remove(oldest);
	}
}

Entry *lookup(const PlanShape &shape, HASHACTION action, bool *found)
{
	if (cache == nullptr) {
		HASHCTL ctl;
		ctl.keysize = sizeof(Key);
		ctl.entrysize = sizeof(Entry);
		ctl.hcxt = CacheMemoryContext;
		cache = hash_create("fencing fenced_update plans", plan_cache_capacity, &ctl,
		                    HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		on_relcache_invalidation(forget_relation, 0);
	}
	Key key = key_of(shape);
	return static_cast<Entry *>(hash_search(cache, &key, action, found));
}

} // namespace

FencedPlans *find_plans(const PlanShape &shape)
{
	bool found;
	Entry *entry = lookup(shape, HASH_FIND, &found);
	if (entry == nullptr || entry->stale ||
	    memcmp(entry->columns, shape.columns, columns_size(shape)) != 0)
		return nullptr;
	if (!SPI_plan_is_valid(entry->plans.update) || !SPI_plan_is_valid(entry->plans.probe))
		return nullptr;
	entry->used = ++clock;
	return &entry->plans;
}

FencedPlans *keep_plans(const PlanShape &shape, SPIPlanPtr update, SPIPlanPtr probe)
{
	bool found;
	Entry *entry = lookup(shape, HASH_FIND, &found);
	if (entry != nullptr && entry->plans.users > 0)
		return nullptr;
	if (entry != nullptr)
		remove(entry);
	sweep(plan_cache_capacity - 1);
	/* Everything that can fail happens before the entry is made. */
	AttrNumber *columns =
	    static_cast<AttrNumber *>(MemoryContextAlloc(CacheMemoryContext, columns_size(shape)));
	memcpy(columns, shape.columns, columns_size(shape));
	if (SPI_keepplan(update) != 0 || SPI_keepplan(probe) != 0)
		elog(ERROR, "fencing: SPI_keepplan failed");

	entry = lookup(shape, HASH_ENTER, &found);
	entry->columns = columns;
	entry->plans = FencedPlans{update, probe, 0};
	entry->stale = false;
	entry->used = ++clock;
	return &entry->plans;
}

} // namespace fencing
