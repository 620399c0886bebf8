/*
 * The lease manager's grant, for fencing.acquire() (acquire.cpp): one attempt,
 * which the caller may repeat while it waits.
 */
#pragma once

#include "base/boundary.hpp"

namespace fencing
{

/*
 * Grants the lease on `resource` to `holder` for `ttl` (an interval) if no
 * live lease holds it: returns the new token, durable by commit; else 0, and
 * the resource's row may stay locked until the (sub)transaction ends.
 * Arguments checked by the caller.
 */
int64 grant_if_free(const char *resource, const char *holder, Datum ttl);

} // namespace fencing
