/*
 * Serves 0.3.0's objects (until ALTER EXTENSION fencing UPDATE): the calls
 * of the extension's internal helpers, which 0.3.0 has in schema fencing
 * (0.4.0 in fencing_internal: its script makes that schema a member of the
 * extension, and fails if a schema of that name exists).  A schema
 * fencing_internal that another role made in a database still at 0.3.0 is
 * never named.  Each is the counterpart of the 0.4.0 call named in its
 * comment.
 */
#pragma once

#include "base/spi.hpp"

namespace fencing
{

/*
 * The statement for the installed objects: `current`, or its 0.3.0
 * counterpart (here, or in leases_0_3_0.hpp) while they are 0.3.0's or
 * older.  Each has its own kept plan, so the choice keys the plan cache by
 * release: a backend that sees ALTER EXTENSION UPDATE picks the other one.
 */
Statement *for_installed_release(Statement *current, Statement *v0_3_0);

extern Statement protect_call_0_3_0;           /* protect_call (admin/ddl.hpp) */
extern Statement unprotect_call_0_3_0;         /* unprotect_call (admin/protect.cpp) */
extern Statement guard_truncate_call_0_3_0;    /* guard_truncate_call (admin/ddl.cpp) */
extern Statement guard_key_changes_call_0_3_0; /* guard_key_changes_call (admin/ddl.cpp) */

} // namespace fencing
