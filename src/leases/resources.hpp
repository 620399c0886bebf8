/*
 * Rows of the lease manager, one per resource: fencing.resources (its lease)
 * and fencing.fences (its fence mark).  Written only by the extension's
 * SECURITY DEFINER functions.
 */
#pragma once

#include "base/boundary.hpp"

namespace fencing
{

/* A resource's lease row, locked FOR UPDATE until the transaction ends. */
struct Lease {
	bool live;   /* granted, neither released nor expired (server clock, now) */
	int64 token; /* token of the last grant, or the resource's floor if higher, or 0 */
};
FENCING_PLAIN_DATA(Lease);

/* Locks the resource's lease row, creating it if needed. Call inside SPI_connect. */
Lease lock_lease(const char *resource);

/*
 * Locks the resource's fence row, creating it if needed; returns its mark (0
 * if new), or the resource's floor if that is higher.
 */
int64 lock_fence(const char *resource);

} // namespace fencing
