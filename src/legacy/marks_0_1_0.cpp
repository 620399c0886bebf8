/*
 * 0.1.0's marks: see marks_0_1_0.hpp.  Read and written as the extension
 * owner, as state/marks.cpp does the current ones.
 */
#include "legacy/marks_0_1_0.hpp"
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

bool find_mark_0_1_0(Oid top, Datum key_text, int64 *mark)
{
	Oid types[2] = {REGCLASSOID, TEXTARRAYOID};
	Datum values[2] = {ObjectIdGetDatum(top), key_text};
	return read_mark_as_owner(&find_plan,
	                          "SELECT token FROM fencing.deleted_keys"
	                          " WHERE relid OPERATOR(pg_catalog.=) $1"
	                          " AND key OPERATOR(pg_catalog.=) $2",
	                          2, types, values, mark);
}

void record_mark_0_1_0(Oid top, Datum key_text, int64 token)
{
	Oid types[3] = {REGCLASSOID, TEXTARRAYOID, INT8OID};
	Datum values[3] = {ObjectIdGetDatum(top), key_text, Int64GetDatum(token)};
	raise_mark_as_owner(
	    &record_plan,
	    "INSERT INTO fencing.deleted_keys AS d (relid, key, token) VALUES ($1, $2, $3)"
	    " ON CONFLICT (relid, key) DO UPDATE"
	    " SET token = GREATEST(d.token, EXCLUDED.token), deleted_at = pg_catalog.now()",
	    3, types, values);
}

} // namespace fencing
