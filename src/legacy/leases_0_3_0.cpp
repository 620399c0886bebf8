/*
 * 0.3.0's lease rows: see leases_0_3_0.hpp.  The column
 * fencing.resources.grace_until comes with 0.4.0's objects (ALTER EXTENSION
 * UPDATE adds it).
 */
#include "legacy/leases_0_3_0.hpp"
#include "legacy/installed_release.hpp"

namespace fencing
{

bool lease_rows_without_grace()
{
	return objects_before_0_4_0();
}

} // namespace fencing
