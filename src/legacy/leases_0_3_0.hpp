/*
 * Lease rows of 0.3.0 and older (legacy/installed_release.hpp): no
 * grace_until and no epoch, so every lease change is flushed and a lease is
 * held until its stored expires_at, as 0.3.0 did.
 */
#pragma once

#include "base/boundary.hpp"

namespace fencing
{

/* Does fencing.resources lack grace_until (objects of 0.3.0 or older)? */
bool lease_rows_without_grace();

} // namespace fencing
