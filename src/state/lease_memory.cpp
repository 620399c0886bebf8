/*
 * The lease memory (lease_memory.hpp): a fixed table in shared memory, in
 * partitions of its own LWLock each, an entry per resource (found by the
 * hash of its name, told apart by the name itself: no false match), and
 * fencing_internal._lease_expiry() for the SQL that reads a lease's expiry.
 *
 * A partition is a small array searched whole.  An entry is taken for a
 * resource by its renewal and stays until another renewal needs the slot:
 * an expiry already passed, or one of an older grant of the resource, says
 * nothing a reader needs (the reader takes the later of the row's expiry
 * and the entry's, and a past one never makes a lease live).
 */
#include "state/lease_memory.hpp"
#include "base/compat.hpp"

extern "C" {
#include "common/hashfn.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
}

namespace fencing
{

int lease_memory_size = 8192;

namespace
{

constexpr int partitions = 64;
constexpr const char *tranche = "fencing lease memory";

struct Entry {
	uint64 hash; /* of the resource; 0: a free slot */
	int64 token;
	int64 epoch;
	TimestampTz expires;
	uint16 resource_len;
	uint16 holder_len;
	char names[lease_memory_key_max]; /* the resource, then the holder, without terminators */
};
FENCING_PLAIN_DATA(Entry);

Entry *entries = nullptr;
LWLockPadded *locks = nullptr;
int per_partition = 0;

int slots_per_partition()
{
	return (lease_memory_size + partitions - 1) / partitions;
}

Size table_size()
{
	return mul_size(sizeof(Entry), mul_size(partitions, slots_per_partition()));
}

uint64 resource_hash(const LeaseKey &key)
{
	uint64 hash = DatumGetUInt64(hash_any_extended(
	    reinterpret_cast<const unsigned char *>(key.resource), key.resource_len, 0));
	return hash == 0 ? 1 : hash;
}

int partition_of(uint64 hash)
{
	return static_cast<int>(hash % partitions);
}

bool same_resource(const Entry &entry, uint64 hash, const LeaseKey &key)
{
	return entry.hash == hash && entry.resource_len == key.resource_len &&
	       memcmp(entry.names, key.resource, key.resource_len) == 0;
}

bool same_grant(const Entry &entry, const LeaseKey &key)
{
	return entry.token == key.token && entry.epoch == key.epoch &&
	       entry.holder_len == key.holder_len &&
	       memcmp(entry.names + entry.resource_len, key.holder, key.holder_len) == 0;
}

bool fits(const LeaseKey &key)
{
	return key.resource_len >= 0 && key.holder_len >= 0 &&
	       key.resource_len + key.holder_len <= lease_memory_key_max;
}

Entry *find_entry(int partition, uint64 hash, const LeaseKey &key)
{
	Entry *slots = entries + static_cast<Size>(partition) * per_partition;
	for (int i = 0; i < per_partition; i++)
		if (same_resource(slots[i], hash, key))
			return &slots[i];
	return nullptr;
}

} // namespace

bool lease_memory_enabled()
{
	return entries != nullptr && per_partition > 0;
}

namespace
{

Size memory_size()
{
	return lease_memory_size <= 0 ? 0 : table_size();
}

/* The table starts zeroed (every slot free); the partitions' locks are the area's tranche. */
void attach_memory(void *memory, bool, LWLockPadded *area_locks)
{
	locks = area_locks;
	per_partition = slots_per_partition();
	entries = static_cast<Entry *>(memory);
}

} // namespace

const SharedArea lease_memory_area =
    shared_struct("fencing lease memory", memory_size, attach_memory, tranche, partitions);

TimestampTz lease_memory_expiry(const LeaseKey &key)
{
	if (!lease_memory_enabled() || !fits(key))
		return 0;
	uint64 hash = resource_hash(key);
	int partition = partition_of(hash);
	TimestampTz expires = 0;
	LWLockAcquire(&locks[partition].lock, LW_SHARED);
	Entry *entry = find_entry(partition, hash, key);
	if (entry != nullptr && same_grant(*entry, key))
		expires = entry->expires;
	LWLockRelease(&locks[partition].lock);
	return expires;
}

int lease_memory_lock(const LeaseKey &key)
{
	int partition = partition_of(resource_hash(key));
	LWLockAcquire(&locks[partition].lock, LW_EXCLUSIVE);
	return partition;
}

void lease_memory_unlock(int partition)
{
	LWLockRelease(&locks[partition].lock);
}

TimestampTz lease_memory_find(int partition, const LeaseKey &key, bool *later_grant)
{
	*later_grant = false;
	if (!fits(key))
		return 0;
	Entry *entry = find_entry(partition, resource_hash(key), key);
	if (entry == nullptr)
		return 0;
	if (same_grant(*entry, key))
		return entry->expires;
	*later_grant = entry->token > key.token;
	return 0;
}

bool lease_memory_store(int partition, const LeaseKey &key, TimestampTz expires, TimestampTz now)
{
	if (!fits(key))
		return false;
	uint64 hash = resource_hash(key);
	Entry *entry = find_entry(partition, hash, key);
	if (entry == nullptr) {
		Entry *slots = entries + static_cast<Size>(partition) * per_partition;
		for (int i = 0; i < per_partition && entry == nullptr; i++)
			if (slots[i].hash == 0 || slots[i].expires <= now)
				entry = &slots[i];
	}
	if (entry == nullptr)
		return false;
	entry->hash = hash;
	entry->token = key.token;
	entry->epoch = key.epoch;
	entry->expires = expires;
	entry->resource_len = static_cast<uint16>(key.resource_len);
	entry->holder_len = static_cast<uint16>(key.holder_len);
	memcpy(entry->names, key.resource, key.resource_len);
	memcpy(entry->names + key.resource_len, key.holder, key.holder_len);
	return true;
}

} // namespace fencing

/*
 * _lease_expiry(resource, holder, token, epoch, row_expires) RETURNS
 * timestamptz: the later of the row's expiry and the one the lease memory
 * keeps for this grant (the row's own if any argument is NULL or the memory
 * keeps none).  Reads only its arguments and shared memory: nothing a caller
 * defines is looked up or run.
 */
FENCING_FUNCTION(fencing_lease_expiry)
{
	bool row_null = PG_ARGISNULL(4);
	TimestampTz row = row_null ? 0 : PG_GETARG_TIMESTAMPTZ(4);
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_ARGISNULL(3) ||
	    !fencing::lease_memory_enabled()) {
		if (row_null)
			PG_RETURN_NULL();
		PG_RETURN_TIMESTAMPTZ(row);
	}
	text *resource = PG_GETARG_TEXT_PP(0);
	text *holder = PG_GETARG_TEXT_PP(1);
	fencing::LeaseKey key = {VARDATA_ANY(resource), static_cast<int>(VARSIZE_ANY_EXHDR(resource)),
	                         VARDATA_ANY(holder),   static_cast<int>(VARSIZE_ANY_EXHDR(holder)),
	                         PG_GETARG_INT64(2),    PG_GETARG_INT64(3)};
	TimestampTz memory = fencing::lease_memory_expiry(key);
	if (memory == 0 && row_null)
		PG_RETURN_NULL();
	PG_RETURN_TIMESTAMPTZ(row_null ? memory : Max(row, memory));
}
