/*
 * 0.1.0's marks: see marks_0_1_0.hpp.  Read and written as the extension
 * owner, as state/marks.cpp does the current ones.
 */
#include "legacy/marks_0_1_0.hpp"
#include "legacy/installed_release.hpp"
#include "base/spi.hpp"

extern "C" {
#include "catalog/pg_type.h"
}

namespace fencing
{

namespace
{

SPIPlanPtr find_plan = nullptr;
SPIPlanPtr record_plan = nullptr;

} // namespace

bool find_mark_0_1_0(Oid top, const KeyHash &key, int64 *mark, bool *found)
{
	if (installed_layout() != Layout::v0_1_0)
		return false;
	Oid types[2] = {REGCLASSOID, TEXTARRAYOID};
	Datum values[2] = {ObjectIdGetDatum(top), key.text_0_1_0};
	*found = read_mark_as_owner(&find_plan,
	                            "SELECT token FROM fencing.deleted_keys"
	                            " WHERE relid OPERATOR(pg_catalog.=) $1"
	                            " AND key OPERATOR(pg_catalog.=) $2",
	                            2, types, values, mark);
	return true;
}

bool record_mark_0_1_0(Oid top, const KeyHash &key, int64 token)
{
	if (installed_layout() != Layout::v0_1_0)
		return false;
	Oid types[3] = {REGCLASSOID, TEXTARRAYOID, INT8OID};
	Datum values[3] = {ObjectIdGetDatum(top), key.text_0_1_0, Int64GetDatum(token)};
	raise_mark_as_owner(
	    &record_plan,
	    "INSERT INTO fencing.deleted_keys AS d (relid, key, token) VALUES ($1, $2, $3)"
	    " ON CONFLICT (relid, key) DO UPDATE"
	    " SET token = GREATEST(d.token, EXCLUDED.token), deleted_at = pg_catalog.now()",
	    3, types, values);
	return true;
}

bool floor_0_1_0(int64 *floor)
{
	if (installed_layout() != Layout::v0_1_0)
		return false;
	*floor = 0;
	return true;
}

void refuse_floor_0_1_0()
{
	if (installed_layout() == Layout::v0_1_0)
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("the fencing extension's objects are still those of release 0.1.0"),
		                errhint("Run ALTER EXTENSION fencing UPDATE.")));
}

} // namespace fencing
