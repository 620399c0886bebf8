/*
 * Backend caches keyed by relation OID, and the module's one relcache
 * callback: see relid_cache.hpp.
 */
#include "base/relid_cache.hpp"

namespace fencing
{

namespace
{

/* What listens to the module's relcache callback, in the order it started to. */
struct Listener {
	RelcacheCallbackFunction function;
	Datum arg;
};
FENCING_PLAIN_DATA(Listener);
constexpr int max_listeners = 16;
Listener listeners[max_listeners];
int listener_count = 0;

/* The module's relcache callback: every listener hears of the invalidation. */
void tell_listeners(Datum, Oid relid)
{
	for (int i = 0; i < listener_count; i++)
		listeners[i].function(listeners[i].arg, relid);
}

/* The relcache listener of one cache: `arg` is the address of its HTAB pointer. */
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

} // namespace

void on_relcache_invalidation(RelcacheCallbackFunction listener, Datum arg)
{
	if (listener_count == max_listeners)
		elog(ERROR, "fencing: more than %d relcache listeners", max_listeners);
	if (listener_count == 0)
		CacheRegisterRelcacheCallback(tell_listeners, 0);
	listeners[listener_count++] = Listener{listener, arg};
}

HTAB *relid_cache(HTAB **cache, const char *name, Size entry_size)
{
	if (*cache == nullptr) {
		HASHCTL control{};
		control.keysize = sizeof(Oid);
		control.entrysize = entry_size;
		*cache = hash_create(name, 64, &control, HASH_ELEM | HASH_BLOBS);
		on_relcache_invalidation(forget, PointerGetDatum(cache));
	}
	return *cache;
}

} // namespace fencing
