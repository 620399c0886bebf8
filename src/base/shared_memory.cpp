/*
 * The shared-memory registry: one request, one attachment (see
 * shared_memory.hpp).
 */
#include "base/shared_memory.hpp"

extern "C" {
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"
}

namespace fencing
{

namespace
{

Size area_size(const SharedArea &area)
{
	if (area.size != nullptr)
		return MAXALIGN(area.size());
	return MAXALIGN(hash_estimate_size(area.entries(), area.entry_size));
}

} // namespace

void request_shared_areas(const SharedArea *const *areas, int count)
{
	Size total = 0;
	for (int i = 0; i < count; i++)
		total = add_size(total, area_size(*areas[i]));
	RequestAddinShmemSpace(total);
	for (int i = 0; i < count; i++)
		if (areas[i]->locks > 0)
			RequestNamedLWLockTranche(areas[i]->tranche, areas[i]->locks);
}

void attach_shared_areas(const SharedArea *const *areas, int count)
{
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	for (int i = 0; i < count; i++) {
		const SharedArea &area = *areas[i];
		LWLockPadded *locks = area.locks > 0 ? GetNamedLWLockTranche(area.tranche) : nullptr;
		if (area.size != nullptr) {
			Size size = area.size();
			if (size == 0)
				continue;
			bool found;
			void *memory = ShmemInitStruct(area.name, size, &found);
			if (!found)
				memset(memory, 0, size);
			area.attach(memory, found, locks);
		} else {
			HASHCTL ctl;
			ctl.keysize = area.key_size;
			ctl.entrysize = area.entry_size;
			long entries = area.entries();
			area.attach(ShmemInitHash(area.name, entries, entries, &ctl,
			                          HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE),
			            false, locks);
		}
	}
	LWLockRelease(AddinShmemInitLock);
}

} // namespace fencing
