/*
 * Issuing tokens: strictly increasing, never issued twice, durable before
 * the caller sees them.
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
 * A new token greater than `floor` (the resource's last token, in case the
 * sequence was ever set back), in this server's generation (its timeline,
 * tokens.cpp) and at least its clock in milliseconds (plus
 * fencing.failover_margin on a timeline or system that has not issued tokens
 * yet); below a bound kept in the sequence fencing.token_seq (a sequence does
 * not roll back with the transaction that used it) that was made durable -
 * flushed locally and confirmed by the synchronous standbys - before it is
 * returned, whatever the caller's synchronous_commit.  Call inside
 * SPI_connect.  Noted for the warning at commit (note_grant) unless `note`
 * is false: the caller notes it once it is sure the token was granted.
 */
int64 issue_token(int64 floor, bool note = true);

/* Notes a token granted in this transaction, for the warning at commit. */
void note_grant(int64 token);

/* The server clock: microseconds since 1970 (0.2.0's tokens followed it). */
int64 clock_token();

/*
 * The highest token this server's lock manager could hand out at this
 * moment by the clock (its generation, the clock), or clock_token() if that
 * is higher: what compaction takes as "seen" besides the stored tokens.
 */
int64 issuable_now();

/*
 * With fencing.grant_confirmation, refuses (55000) a grant or renewal when
 * not enough standbys replied within fencing.standby_reply_timeout.
 */
void require_grant_confirmation();

/*
 * The settings (defined in entry/settings.cpp): fencing.failover_margin and
 * fencing.standby_reply_timeout in milliseconds, fencing.grant_confirmation.
 */
enum Confirmation { confirm_off, confirm_standby, confirm_synchronous };
extern int failover_margin;
extern int grant_confirmation;
extern const struct config_enum_entry confirmation_options[];
extern int standby_reply_timeout;

/* The token windows' shared memory (only when preloaded; base/shared_memory.hpp). */
extern const SharedArea token_windows_area;

/*
 * Makes the current transaction's commit durable whatever the session asks
 * for: flushed locally and confirmed by the synchronous standbys, as with
 * synchronous_commit = on (enforced again just before commit, so a later
 * SET LOCAL in the same transaction cannot undo it).
 */
void require_durable_commit();

/*
 * Around a lease change that may commit without a flush (a renewal within
 * its row's grace_until, a release): note_lease_change_start() before it
 * notes whether the transaction wrote anything else so far,
 * allow_commit_without_flush() after it lets the commit skip the flush and
 * the wait for the synchronous standbys - if the transaction writes nothing
 * else and makes no change that require_durable_commit() covers.  A
 * transaction with other writes keeps the session's synchronous_commit.
 */
void note_lease_change_start();

/*
 * May a renewal rely on the grace_until it reads without a flush?  Only if
 * the synchronous standbys have every durable lease change this server
 * acknowledged or replayed: not while one whose commit wait was cut short
 * (canceled, terminated), or the WAL replayed at the last start, is missing
 * there - the horizon read may be one a promoted standby never had.
 */
bool lease_horizons_confirmed();
void allow_commit_without_flush();

} // namespace fencing
