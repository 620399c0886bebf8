/*
 * fencing.resources: one row per resource, holding its current lease and its
 * fence high-water mark.  Written only by the extension's SECURITY DEFINER
 * functions.
 */
#pragma once

#include "boundary.hpp"

namespace fencing {

/* A resource's row, locked FOR UPDATE until the transaction ends. */
struct Resource {
	bool leased;      /* a lease was ever granted */
	bool live;        /* that lease is neither released nor expired (server clock, now) */
	int64 token;      /* its token, or 0 */
	int64 fence_mark; /* high-water mark of fence(), or 0 */
};

/* Locks the resource's row, creating it if needed. Call inside SPI_connect. */
Resource lock_resource(const char *resource);

} // namespace fencing
