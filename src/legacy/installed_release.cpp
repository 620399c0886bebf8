/*
 * The installed layout: see installed_release.hpp.  Told by which of the extension's
 * tables exist (each release added one): fencing.registry (0.3.0),
 * fencing.floors (0.2.0).  The answer is kept until a relation is created,
 * renamed or dropped anywhere in the database (a pg_class change), which
 * ALTER EXTENSION UPDATE is.
 */
#include "legacy/installed_release.hpp"

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
Layout cached = Layout::current;

void forget(Datum, int, uint32)
{
	known = false;
}

} // namespace

Layout installed_layout()
{
	static bool registered = false;
	if (!registered) {
		CacheRegisterSyscacheCallback(RELNAMENSP, forget, 0);
		registered = true;
	}
	if (known)
		return cached;
	Oid schema = get_namespace_oid("fencing", true);
	if (OidIsValid(schema) && OidIsValid(get_relname_relid("registry", schema)))
		cached = Layout::current;
	else if (OidIsValid(schema) && OidIsValid(get_relname_relid("floors", schema)))
		cached = Layout::v0_2_0;
	else if (OidIsValid(schema) && OidIsValid(get_relname_relid("deleted_keys", schema)))
		cached = Layout::v0_1_0;
	else
		return Layout::current; /* not installed (yet): nothing to read; not kept */
	known = true;
	return cached;
}

const char *layout_release(Layout layout)
{
	switch (layout) {
	case Layout::v0_1_0:
		return "0.1.0";
	case Layout::v0_2_0:
		return "0.2.0";
	default:
		return "0.3.0";
	}
}

} // namespace fencing
