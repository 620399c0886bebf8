/*
 * 0.3.0's objects, without a table of options: see table_options_0_3_0.hpp.
 */
#include "legacy/table_options_0_3_0.hpp"

extern "C" {
#include "catalog/namespace.h"
#include "utils/lsyscache.h"
}

namespace fencing
{

bool no_table_options_0_3_0()
{
	Oid schema = get_namespace_oid("fencing", true);
	return !OidIsValid(schema) || !OidIsValid(get_relname_relid("table_options", schema));
}

} // namespace fencing
