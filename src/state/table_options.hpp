/*
 * A protected table's rollout options (table fencing.table_options): whether
 * its guard enforces or only reports, the highest token it accepts, and the
 * role that may make maintenance writes besides its owner.  Written by
 * protect(), set_enforce() and set_maintainer() as the extension owner; read by the
 * guard once per statement, cached per backend until the table's relcache
 * entry is invalidated (which every change sends at commit).
 */
#pragma once

#include "base/boundary.hpp"

extern "C" {
#include "utils/rel.h"
}

namespace fencing
{

struct TableOptions {
	Oid relid;       /* the protected table whose options these are (InvalidOid: none) */
	bool enforce;    /* false: report-only */
	int64 max_token; /* the highest token accepted; 0: no ceiling */
	Oid maintainer;  /* the role set_maintainer() named, or InvalidOid */
};
FENCING_PLAIN_DATA(TableOptions);

/*
 * The options of the protected table whose guard covers `rel` (itself or a
 * partition ancestor): enforcing and no ceiling when it has none recorded,
 * when it is a Citus shard (a worker has no registry) and before ALTER
 * EXTENSION UPDATE made the table of options.
 */
TableOptions options_of(Relation rel);

/*
 * Is `presented` above the table's max_token?  Refused (22023) also in
 * report-only mode, and for fenced_update(), whose write the guard sees:
 * reporting/rejections.hpp (a write) and errors.hpp (reset_token()).
 */
bool above_ceiling(const TableOptions &options, int64 presented);

/*
 * "enforce => false, max_token => 100": the options protect() takes, as
 * recorded, for a hint that tells to run it again (it sets every option it
 * takes, to its default when not passed).
 */
const char *protect_options_text(const TableOptions &options);

/* Records the options of the protected table `relid` (protect()). */
void record_options(Oid relid, bool enforce, int64 max_token);

/* Sets whether `relid` enforces; false if it is not protected (set_enforce()). */
bool record_enforce(Oid relid, bool enforce);

/* Names `role` (InvalidOid: none) the maintainer of `relid`; false if it is not protected. */
bool record_maintainer(Oid relid, Oid role);

/* Forgets the options of `relid` (unprotect()). */
void forget_options(Oid relid);

} // namespace fencing
