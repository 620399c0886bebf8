/*
 * A dynahash table in CacheMemoryContext from a shape's fixed part plus a
 * hash of its column list to the plans; the full column list is stored too,
 * so a hash collision only costs a re-prepare.
 */
#include "plan_cache.hpp"

extern "C" {
#include "common/hashfn.h"
#include "utils/hsearch.h"
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

struct Entry {
	Key key;
	AttrNumber *columns; /* in CacheMemoryContext */
	FencedPlans plans;
};

HTAB *cache = nullptr;

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
	                              sizeof(AttrNumber) * (shape.nkeys + shape.nchanged));
	return key;
}

size_t columns_size(const PlanShape &shape)
{
	return sizeof(AttrNumber) * (shape.nkeys + shape.nchanged);
}

Entry *lookup(const PlanShape &shape, HASHACTION action, bool *found)
{
	if (cache == nullptr) {
		HASHCTL ctl;
		ctl.keysize = sizeof(Key);
		ctl.entrysize = sizeof(Entry);
		ctl.hcxt = CacheMemoryContext;
		cache = hash_create("fencing fenced_update plans", 64, &ctl,
		                    HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	Key key = key_of(shape);
	return static_cast<Entry *>(hash_search(cache, &key, action, found));
}

void free_plan(SPIPlanPtr plan)
{
	if (plan != nullptr)
		SPI_freeplan(plan);
}

} // namespace

FencedPlans *find_plans(const PlanShape &shape)
{
	bool found;
	Entry *entry = lookup(shape, HASH_FIND, &found);
	if (entry == nullptr || memcmp(entry->columns, shape.columns, columns_size(shape)) != 0)
		return nullptr;
	if (!SPI_plan_is_valid(entry->plans.update) || !SPI_plan_is_valid(entry->plans.probe))
		return nullptr;
	return &entry->plans;
}

FencedPlans *keep_plans(const PlanShape &shape, SPIPlanPtr update, SPIPlanPtr probe)
{
	bool found;
	Entry *entry = lookup(shape, HASH_FIND, &found);
	if (entry != nullptr && entry->plans.users > 0)
		return nullptr;
	/* Everything that can fail happens before the entry changes. */
	AttrNumber *columns =
	    static_cast<AttrNumber *>(MemoryContextAlloc(CacheMemoryContext, columns_size(shape)));
	memcpy(columns, shape.columns, columns_size(shape));
	if (SPI_keepplan(update) != 0 || SPI_keepplan(probe) != 0)
		elog(ERROR, "fencing: SPI_keepplan failed");

	entry = lookup(shape, HASH_ENTER, &found);
	if (found) {
		free_plan(entry->plans.update);
		free_plan(entry->plans.probe);
		pfree(entry->columns);
	}
	entry->columns = columns;
	entry->plans.update = update;
	entry->plans.probe = probe;
	entry->plans.users = 0;
	return &entry->plans;
}

} // namespace fencing
