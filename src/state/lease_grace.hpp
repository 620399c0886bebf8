/*
 * The lease manager's durable horizon: each lease row keeps grace_until,
 * written only by durable writes (server time + ttl + fencing.lease_grace);
 * a renewal that stays within it commits without a flush.  After a restart
 * or a promotion (a new server epoch) a lease not released is held until its
 * grace_until, so no renewal lost in between lets another holder in early.
 */
#pragma once

#include "base/boundary.hpp"
#include "base/shared_memory.hpp"

extern "C" {
#include "utils/guc.h"
}

namespace fencing
{

/*
 * A lease row is held until its expiry, as the lease statements write it
 * (leases/): GREATEST(_lease_expiry(resource, holder, token, epoch,
 * expires_at), CASE WHEN epoch <> _lease_epoch() THEN grace_until END) - its
 * expires_at or the later one a renewal kept in memory (state/lease_memory),
 * or its grace_until if that is later and the row was last written in
 * another epoch (before the last restart or promotion).  Rows of 0.3.0
 * (legacy/leases_0_3_0.hpp) have only expires_at.  A statement that judges a
 * lease free and then acts reads the clock before this expression (the clock
 * on the comparison's left: leases/renew_memory.cpp says why).
 */

/* The settings (defined in entry/settings.cpp). */
enum LeaseDurability { durability_grace, durability_always };
extern int lease_grace;      /* fencing.lease_grace, milliseconds */
extern int lease_durability; /* fencing.lease_durability */
extern const struct config_enum_entry lease_durability_options[];

/*
 * This server's epoch: a number that changes with the system identifier,
 * the timeline, the postmaster's start and (preloaded) every
 * reinitialisation of shared memory after a crash; 0 during recovery.  A
 * lease row written in another epoch is held until its grace_until.
 */
int64 lease_epoch();

/*
 * May a renewal or release skip the flush?  Only under lease_durability
 * 'grace', and only when the epoch changes with every crash (preloaded:
 * without shared memory a backend's crash keeps the postmaster's epoch).
 */
bool lease_flush_optional();

/* The grace G written into a row by a durable write: an interval Datum (0 if no flush is skipped).
 */
Datum lease_grace_interval();

/* The epoch's start in shared memory (only when preloaded; base/shared_memory.hpp). */
extern const SharedArea lease_epoch_area;

} // namespace fencing
