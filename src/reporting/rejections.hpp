/*
 * Refused writes: each is counted (fencing.stats, fencing.log_rejections),
 * its relation named for messages (a Citus shard by its table), and then
 * raised with the wording of errors.hpp.  The guard trigger, fenced_update()
 * and fence() refuse through these.
 */
#pragma once

#include "reporting/errors.hpp"

namespace fencing
{

/* Counts and raises 23T01 for a write to `rel`: see raise_stale(). */
[[noreturn]] void report_stale(Relation rel, AttrNumber token_attnum, const char *key, Mode mode,
                               int64 presented, int64 stored);

/* Counts and raises 23T01 for fence() on `resource`. */
[[noreturn]] void report_stale_resource(const char *resource, int64 presented, int64 stored);

/* Counts and raises 23T02 for an `operation` on `rel` without a token: see raise_missing(). */
[[noreturn]] void report_missing(Relation rel, AttrNumber token_attnum, const char *key,
                                 const char *operation, int64 stored);

/*
 * Counts (logs, per fencing.log_rejections) and raises 22023 for a write to
 * `rel` whose token `presented` is above the table's max_token `ceiling`:
 * see raise_above_ceiling().
 */
[[noreturn]] void report_above_ceiling(Relation rel, const char *key, int64 presented,
                                       int64 ceiling, bool enforce);

/* Raises 40001 in report-only mode, a deleted key's mark moved: see raise_mark_moved(). */
[[noreturn]] void report_mark_moved(Relation rel, const char *key, int64 kept, int64 stored);

/* Raises 22023, two tokens in one write (not a rejection: not counted): see raise_two_tokens(). */
[[noreturn]] void report_two_tokens(Relation rel, const char *key, const char *column,
                                    int64 assigned, int64 transaction, int64 stored);

} // namespace fencing
