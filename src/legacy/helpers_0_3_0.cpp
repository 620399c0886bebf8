/*
 * Where the internal helpers live: see helpers_0_3_0.hpp.  Told by the
 * installed release (legacy/installed_release.hpp), never by a schema's name.
 */
#include "legacy/helpers_0_3_0.hpp"
#include "legacy/installed_release.hpp"

namespace fencing
{

const char *helper_schema()
{
	return objects_before_0_4_0() ? "fencing" : "fencing_internal";
}

} // namespace fencing
