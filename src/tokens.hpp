/*
 * Issuing tokens: strictly increasing, never issued twice, durable before
 * the caller sees them.
 */
#pragma once

#include "boundary.hpp"

namespace fencing
{

/*
 * A new token greater than `floor` (the resource's last token, in case the
 * sequence was ever set back) and than the server clock in microseconds
 * since 1970 (plus fencing.failover_margin on a timeline or system that has
 * not issued tokens yet), taken from the sequence fencing.token_seq (a
 * sequence does not roll back with the transaction that used it) and made
 * durable - flushed locally and confirmed by the synchronous standbys - before
 * it is returned, whatever the caller's synchronous_commit.  Call inside
 * SPI_connect.
 */
int64 issue_token(int64 floor);

/* The server clock as tokens follow it: microseconds since 1970. */
int64 clock_token();

/* Defines fencing.failover_margin; from _PG_init. */
void define_token_settings();

/*
 * Makes the current transaction's commit durable whatever the session asks
 * for: flushed locally and confirmed by the synchronous standbys, as with
 * synchronous_commit = on (enforced again just before commit, so a later
 * SET LOCAL in the same transaction cannot undo it).
 */
void require_durable_commit();

} // namespace fencing
