/*
 * The lease manager with 0.1.0's and 0.2.0's objects: see leases_0_2_0.hpp.
 */
#include "legacy/leases_0_2_0.hpp"
#include "legacy/installed_release.hpp"

extern "C" {
#include "catalog/pg_type.h"
}

namespace fencing
{

bool grants_lock_first_0_2_0()
{
	return installed_layout() != Layout::current;
}

bool no_resource_floors_0_1_0()
{
	return installed_layout() == Layout::v0_1_0;
}

Statement lock_lease_0_1_0 = {
    "SELECT NOT released AND expires_at > pg_catalog.clock_timestamp(), token, NULL::bigint"
    " FROM fencing.resources WHERE resource = $1 FOR UPDATE",
    1,
    {TEXTOID}};

Statement lock_fence_0_1_0 = {"SELECT token, NULL::bigint"
                              " FROM fencing.fences WHERE resource = $1 FOR UPDATE",
                              1,
                              {TEXTOID}};

} // namespace fencing
