/*
 * Acting with another role's rights: see rights.hpp.
 */
#include "base/rights.hpp"

extern "C" {
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
}

namespace fencing
{

Rights become(Oid role, int extra, bool safe_search_path)
{
	Rights saved;
	GetUserIdAndSecContext(&saved.user, &saved.context);
	SetUserIdAndSecContext(role, saved.context | SECURITY_LOCAL_USERID_CHANGE |
	                                 SECURITY_RESTRICTED_OPERATION | extra);
	saved.guc_level = 0;
	if (safe_search_path) {
		saved.guc_level = NewGUCNestLevel();
		(void)set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION,
		                        GUC_ACTION_SAVE, true, 0, false);
	}
	return saved;
}

void restore(const Rights &saved)
{
	if (saved.guc_level > 0)
		AtEOXact_GUC(false, saved.guc_level);
	SetUserIdAndSecContext(saved.user, saved.context);
}

Oid relation_owner(Oid relid)
{
	HeapTuple tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tuple))
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
		                errmsg("relation with OID %u does not exist", relid)));
	Oid owner = ((Form_pg_class)GETSTRUCT(tuple))->relowner;
	ReleaseSysCache(tuple);
	return owner;
}

Oid extension_owner()
{
	Oid relid = get_relname_relid("deleted_keys", get_namespace_oid("fencing", false));
	if (!OidIsValid(relid))
		elog(ERROR, "fencing: table fencing.deleted_keys is missing");
	return relation_owner(relid);
}

bool has_fencing_usage()
{
	return DatumGetBool(DirectFunctionCall2(
	    has_schema_privilege_name, CStringGetTextDatum("fencing"), CStringGetTextDatum("USAGE")));
}

} // namespace fencing
