/*
 * The module's shared memory, in one registry (only when preloaded): each
 * feature declares its areas (a struct or a hash table, the LWLocks it
 * needs) as a SharedArea; entry/module.cpp lists them, requests their sizes
 * and tranches once at shmem_request and attaches them all at
 * shmem_startup.  Without shared_preload_libraries nothing is attached: the
 * pointers the attach functions set stay nullptr, which every feature tests.
 */
#pragma once

#include "base/boundary.hpp"

extern "C" {
#include "access/twophase.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
}

namespace fencing
{

/*
 * Called at shmem_startup under AddinShmemInitLock: `memory` is the struct
 * (`found`: it was set up already, by another process or before a crash
 * restart; if not, it is zeroed) or the HTAB * of a hash table (`found`
 * false); `locks` the area's tranche, or nullptr.
 */
using AttachArea = void (*)(void *memory, bool found, LWLockPadded *locks);

/* The size of an area that is one T. */
template <typename T> Size size_of()
{
	return sizeof(T);
}

/* The size of an area of one T per prepared transaction (0 without them: no area). */
template <typename T> Size size_per_prepared_xact()
{
	return mul_size(sizeof(T), static_cast<Size>(max_prepared_xacts));
}

/* An AttachArea that only sets `*Pointer`: for an area that starts zeroed and has no locks. */
template <typename T, T **Pointer> void attach_pointer(void *memory, bool, LWLockPadded *)
{
	*Pointer = static_cast<T *>(memory);
}

/*
 * One area, named `name` in pg_shmem_allocations: a struct of size() bytes
 * (0: not made, attach not called), or a fixed-size hash table of entries()
 * entries.  With locks > 0, that many LWLocks of the tranche `tranche`.
 */
struct SharedArea {
	const char *name;
	Size (*size)();    /* a struct; nullptr for a hash table */
	long (*entries)(); /* a hash table; nullptr for a struct */
	Size key_size;
	Size entry_size;
	AttachArea attach;
	const char *tranche;
	int locks;
};

constexpr SharedArea shared_struct(const char *name, Size (*size)(), AttachArea attach,
                                   const char *tranche = nullptr, int locks = 0)
{
	return SharedArea{name, size, nullptr, 0, 0, attach, tranche, locks};
}

/* A hash table of fixed size whose keys are compared as bytes (HASH_BLOBS). */
constexpr SharedArea shared_hash(const char *name, long (*entries)(), Size key_size,
                                 Size entry_size, AttachArea attach, const char *tranche = nullptr,
                                 int locks = 0)
{
	return SharedArea{name, nullptr, entries, key_size, entry_size, attach, tranche, locks};
}

/* At shmem_request: the space of every area, requested once, and their tranches, in order. */
void request_shared_areas(const SharedArea *const *areas, int count);

/* At shmem_startup: every area made or found and attached, in order, under AddinShmemInitLock. */
void attach_shared_areas(const SharedArea *const *areas, int count);

} // namespace fencing
