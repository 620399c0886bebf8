/*
 * The guard with 0.1.0's objects: see guard_0_1_0.hpp.
 */
#include "legacy/guard_0_1_0.hpp"
#include "legacy/installed_release.hpp"

namespace fencing
{

const char *key_changes_trigger_0_1_0(const char *current)
{
	return installed_layout() == Layout::v0_1_0 ? "fencing_guard_keys" : current;
}

} // namespace fencing
