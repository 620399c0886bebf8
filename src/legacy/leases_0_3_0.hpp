/*
 * Lease rows of 0.3.0 and older (legacy/installed_release.hpp): no
 * grace_until and no epoch, so every lease change is flushed and a lease is
 * held until its stored expires_at, as 0.3.0 did.  0.3.0's statements, each
 * the counterpart of the current one named in its comment, as complete
 * texts.
 */
#pragma once

#include "base/spi.hpp"

namespace fencing
{

/* Does fencing.resources lack grace_until (objects of 0.3.0 or older)? */
bool lease_rows_without_grace();

extern Statement renew_0_3_0;                      /* renew (leases.cpp) */
extern Statement release_0_3_0;                    /* release (leases.cpp) */
extern Statement grant_free_0_3_0;                 /* the grant in one statement (leases.cpp) */
extern Statement grant_0_3_0;                      /* the grant after the row lock (leases.cpp) */
extern Statement live_lease_0_3_0;                 /* the live lease (acquire.cpp) */
extern Statement renew_all_0_3_0;                  /* renew_all (renew_all.cpp) */
extern Statement lock_lease_0_3_0;                 /* the row lock (resources.cpp) */
extern const char *const resource_batch_sql_0_3_0; /* compaction (admin/compact.cpp) */

} // namespace fencing
