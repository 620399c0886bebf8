/*
 * Issuing tokens: strictly increasing, never issued twice, durable before
 * the caller sees them.
 */
#pragma once

#include "boundary.hpp"

namespace fencing {

/*
 * A new token greater than `floor`, taken from the sequence fencing.token_seq
 * (a sequence does not roll back with the transaction that used it) and made
 * durable - flushed locally and confirmed by the synchronous standbys - before
 * it is returned, whatever the caller's synchronous_commit.
 */
int64 issue_token(int64 floor);

/*
 * Raises the current transaction's synchronous_commit to at least 'on'
 * (SET LOCAL), so that its commit is flushed and reaches the synchronous
 * standbys whatever the session asked for.
 */
void require_durable_commit();

} // namespace fencing
