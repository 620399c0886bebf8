/*
 * Backend caches keyed by relation OID: see relid_cache.hpp.
 */
#include "base/relid_cache.hpp"

extern "C" {
#include "utils/inval.h"
}

namespace fencing
{

namespace
{

/* The relcache callback of one cache: `arg` is the address of its HTAB pointer. */
void forget(Datum arg, Oid relid)
{
	HTAB *cache = *reinterpret_cast<HTAB **>(DatumGetPointer(arg));
	if (cache == nullptr)
		return;
	if (OidIsValid(relid)) {
		(void)hash_search(cache, &relid, HASH_REMOVE, nullptr);
		return;
	}
	HASH_SEQ_STATUS scan;
	hash_seq_init(&scan, cache);
	while (auto *relid_of_entry = static_cast<Oid *>(hash_seq_search(&scan)))
		(void)hash_search(cache, relid_of_entry, HASH_REMOVE, nullptr);
}

/* The callbacks watch_relations() was given; one PostgreSQL slot calls them all. */
struct Watcher {
	void (*forget)(Datum, Oid);
	Datum arg;
};
FENCING_PLAIN_DATA(Watcher);
constexpr int watchers_kept = 8;
Watcher watchers[watchers_kept];
int watcher_count = 0;

void forget_in_every_cache(Datum, Oid relid)
{
	for (int i = 0; i < watcher_count; i++)
		watchers[i].forget(watchers[i].arg, relid);
}

} // namespace

void watch_relations(void (*forget)(Datum arg, Oid relid), Datum arg)
{
	if (watcher_count == watchers_kept)
		elog(ERROR, "fencing: more than %d relation caches", watchers_kept);
	if (watcher_count == 0)
		CacheRegisterRelcacheCallback(forget_in_every_cache, 0);
	watchers[watcher_count].forget = forget;
	watchers[watcher_count].arg = arg;
	watcher_count++;
}

HTAB *relid_cache(HTAB **cache, const char *name, Size entry_size)
{
	if (*cache == nullptr) {
		HASHCTL control{};
		control.keysize = sizeof(Oid);
		control.entrysize = entry_size;
		*cache = hash_create(name, 64, &control, HASH_ELEM | HASH_BLOBS);
		watch_relations(forget, PointerGetDatum(cache));
	}
	return *cache;
}

} // namespace fencing
