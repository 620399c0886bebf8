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
 * "fencing_internal" once it is a member of the extension (0.4.0 on), else
 * "fencing" (0.3.0 and older).  A schema fencing_internal that another role
 * made in a database still at 0.3.0 is not the extension's, and is never
 * named.  The answer is kept until a schema changes anywhere in the database.
 */
const char *helper_schema();

} // namespace fencing
