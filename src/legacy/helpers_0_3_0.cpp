/*
 * Where the internal helpers live: see helpers_0_3_0.hpp.  Told by whether
 * schema fencing_internal belongs to the extension (pg_depend), never by its
 * name alone.
 */
#include "legacy/helpers_0_3_0.hpp"

extern "C" {
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "commands/extension.h"
#include "utils/inval.h"
#include "utils/syscache.h"
}

namespace fencing
{

namespace
{

bool known = false;
const char *cached = "fencing_internal";

void forget(Datum, int, uint32)
{
	known = false;
}

} // namespace

const char *helper_schema()
{
	static bool registered = false;
	if (!registered) {
		CacheRegisterSyscacheCallback(NAMESPACEOID, forget, 0);
		registered = true;
	}
	if (known)
		return cached;
	Oid extension = get_extension_oid("fencing", true);
	Oid schema = get_namespace_oid("fencing_internal", true);
	if (!OidIsValid(extension))
		return "fencing_internal"; /* not installed (yet): nothing to call; not kept */
	bool ours =
	    OidIsValid(schema) && getExtensionOfObject(NamespaceRelationId, schema) == extension;
	cached = ours ? "fencing_internal" : "fencing";
	known = true;
	return cached;
}

} // namespace fencing
