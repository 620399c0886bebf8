/*
 * Serves 0.1.0's objects (until ALTER EXTENSION fencing UPDATE) in the
 * guard (src/guard/).
 */
#pragma once

#include "base/boundary.hpp"

namespace fencing
{

/*
 * The name of the guard's AFTER UPDATE trigger that checks key changes
 * (on a Citus shard, with a suffix): `current`, or 0.1.0's
 * fencing_guard_keys with its objects.
 */
const char *key_changes_trigger_0_1_0(const char *current);

} // namespace fencing
