/*
 * 0.3.0's objects, without a table of options: see table_options_0_3_0.hpp.
 * fencing.table_options comes with 0.4.0's objects.
 */
#include "legacy/table_options_0_3_0.hpp"
#include "legacy/installed_release.hpp"

namespace fencing
{

bool no_table_options_0_3_0()
{
	return installed_release() != Release::current;
}

} // namespace fencing
