/*
 * Acting with another role's rights, the way VACUUM, ANALYZE and REFRESH
 * MATERIALIZED VIEW do: the role becomes the current user for a moment,
 * with SECURITY_RESTRICTED_OPERATION (no SET ROLE, no temporary objects, no
 * session state that outlives the operation) and, when asked, a fresh GUC
 * nest level whose search_path is pg_catalog, pg_temp.  An ERROR in between
 * needs no cleanup: (sub)transaction abort restores the identity and the
 * settings.
 */
#pragma once

#include "base/boundary.hpp"

extern "C" {
#include "utils/rel.h"
}

namespace fencing
{

struct Rights {
	Oid user;
	int context;
	int guc_level; /* 0: search_path left as it was */
};
FENCING_PLAIN_DATA(Rights);

/*
 * Becomes `role` with SECURITY_RESTRICTED_OPERATION and `extra` security
 * flags; with `safe_search_path`, search_path is pg_catalog, pg_temp until
 * restore().
 */
Rights become(Oid role, int extra = 0, bool safe_search_path = true);

/* Back to the rights saved by become(). */
void restore(const Rights &saved);

/* The owner of the extension's objects (of its tables, which every release has). */
Oid extension_owner();

/* The owner of a relation. */
Oid relation_owner(Oid relid);

/*
 * Has the current user USAGE on schema fencing, what calling the API needs?
 * Schema fencing_internal grants USAGE to PUBLIC (protect() runs helpers as
 * the table's owner), so the helpers that change anything or show more
 * than schema fencing_monitor does ask this instead.
 */
bool has_fencing_usage();

} // namespace fencing
