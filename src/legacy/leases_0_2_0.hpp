/*
 * Serves 0.1.0's and 0.2.0's objects (until ALTER EXTENSION fencing
 * UPDATE) in the lease manager (src/leases/): each entry says which
 * release needs it.
 */
#pragma once

#include "base/spi.hpp"

namespace fencing
{

/*
 * 0.1.0 and 0.2.0: no _grant_token(), so no grant of a free
 * resource in one statement: acquire() always locks the row first.
 */
bool grants_lock_first_0_2_0();

/*
 * 0.1.0: no resource floors (fencing.resource_floors): the statements that
 * lock a lease's or a fence's row read NULL for the floor.
 */
bool no_resource_floors_0_1_0();
extern Statement lock_lease_0_1_0;
extern Statement lock_fence_0_1_0;

} // namespace fencing
