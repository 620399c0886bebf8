/*
 * A renewal that writes no row (state/lease_memory.hpp): for renew() and
 * renew_all() (leases.cpp, renew_all.cpp).
 */
#pragma once

#include "base/boundary.hpp"

extern "C" {
#include "datatype/timestamp.h"
}

namespace fencing
{

/*
 * Renews the lease held by (holder, token) in memory only, if it may: the
 * lease memory exists and has room, the row is live and of this epoch, the
 * flush may be skipped, and the new expiry stays within the row's
 * grace_until and does not come before the row's expiry.  Returns true with
 * the new expiry in *expires, writing nothing (no transaction id); false if
 * the caller must renew by writing the row as before (which also tells a
 * lost lease).
 */
bool renew_in_memory(const char *resource, const char *holder, int64 token, Datum ttl,
                     TimestampTz *expires);

} // namespace fencing
