/*
 * Checks of the lease manager's arguments: NULL is 22004, a bad value 22023.
 */
#pragma once

#include "base/boundary.hpp"

namespace fencing
{

/* A non-empty text argument (resource, holder), as a C string. */
char *require_name(FunctionCallInfo fcinfo, int arg, const char *what);

/* A lease TTL: positive and at most 366 days. */
Datum require_ttl(FunctionCallInfo fcinfo, int arg);

} // namespace fencing
