/*
 * 0.3.0's lease rows: see leases_0_3_0.hpp.  Told by the column
 * fencing.resources.grace_until, which ALTER EXTENSION UPDATE adds; the
 * answer is kept until a column or relation changes anywhere in the
 * database.
 */
#include "legacy/leases_0_3_0.hpp"

extern "C" {
#include "catalog/namespace.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
}

namespace fencing
{

namespace
{

bool known = false;
bool without = false;

void forget(Datum, int, uint32)
{
	known = false;
}

} // namespace

bool lease_rows_without_grace()
{
	static bool registered = false;
	if (!registered) {
		CacheRegisterSyscacheCallback(ATTNAME, forget, 0);
		CacheRegisterSyscacheCallback(RELNAMENSP, forget, 0);
		registered = true;
	}
	if (known)
		return without;
	Oid schema = get_namespace_oid("fencing", true);
	Oid resources = OidIsValid(schema) ? get_relname_relid("resources", schema) : InvalidOid;
	if (!OidIsValid(resources))
		return false; /* not installed (yet): nothing to read; not kept */
	without = get_attnum(resources, "grace_until") == InvalidAttrNumber;
	known = true;
	return without;
}

} // namespace fencing
