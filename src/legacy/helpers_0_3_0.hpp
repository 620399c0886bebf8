/*
 * Serves 0.3.0's objects (until ALTER EXTENSION fencing UPDATE): where the
 * extension's internal helpers (fencing._protect() and the others) live.
 */
#pragma once

#include "base/boundary.hpp"

namespace fencing
{

/*
 * The schema of the extension's internal helpers, to name one in SQL text:
 * "fencing_internal" with 0.4.0's objects (the 0.4.0 script makes it a
 * member of the extension, and fails if a schema of that name exists),
 * "fencing" with 0.3.0's and older.  A schema fencing_internal that another
 * role made in a database still at 0.3.0 is never named.
 */
const char *helper_schema();

} // namespace fencing
