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

} // namespace

HTAB *relid_cache(HTAB **cache, const char *name, Size entry_size)
{
	if (*cache == nullptr) {
		HASHCTL control{};
		control.keysize = sizeof(Oid);
		control.entrysize = entry_size;
		*cache = hash_create(name, 64, &control, HASH_ELEM | HASH_BLOBS);
		CacheRegisterRelcacheCallback(forget, PointerGetDatum(cache));
	}
	return *cache;
}

} // namespace fencing
