/*
 * Maintenance writes: in a transaction that set fencing.maintenance
 * (state/maintenance_setting.hpp), a write without a token to a protected
 * table is accepted from the table's owner or the maintainer that
 * fencing.set_maintainer() named (or a role with the privileges of either),
 * and keeps the stored token; anyone else's is refused (42501).  A write that
 * presents a token is checked as always.
 */
#pragma once

#include "base/token_compare.hpp"
#include "catalog/keys.hpp"
#include "state/table_options.hpp"

namespace fencing
{

/*
 * A write to `rel` without a token, in a transaction that asked for
 * maintenance writes: counted and logged if the role may make it (true),
 * else 42501.  `key` and `stored` are for the LOG line.
 */
bool maintenance_write(Relation rel, const TableOptions &options, Mode mode, const char *key,
                       int64 stored);

/*
 * An INSERT without a token (a maintenance write, or report-only) gave the
 * row of `key` in `relid` its key's mark `token`: the AFTER trigger, which
 * would refuse that token in strict mode, takes the note (true) and lets the
 * row be if the mark is still `token`.  Only strict mode makes notes; a
 * note not taken (the row was never inserted) lives until the transaction
 * ends.
 */
void note_kept_insert(Oid relid, const KeyHash &key, int64 token);
bool take_kept_insert(Oid relid, const KeyHash &key, int64 token);

} // namespace fencing
