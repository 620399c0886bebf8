/*
 * Tokens issued with 0.1.0's and 0.2.0's objects: see token_issue_0_2_0.hpp.
 */
#include "legacy/token_issue_0_2_0.hpp"
#include "legacy/installed_release.hpp"
#include "base/compat.hpp"
#include "base/spi.hpp"

extern "C" {
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
}

#include <algorithm>

namespace fencing
{

namespace
{

SPIPlanPtr base_plan = nullptr;
SPIPlanPtr record_plan = nullptr;

} // namespace

bool generation_base_0_2_0(int64 *base)
{
	Layout layout = installed_layout();
	if (layout == Layout::current)
		return false;
	if (layout == Layout::v0_1_0)
		return true;
	/* A generation is the token's top bits less 512 (generation_start()). */
	Oid types[1] = {INT8OID};
	SPIPlanPtr plan = kept_plan(
	    &base_plan,
	    "SELECT GREATEST("
	    " (SELECT pg_catalog.max((t.first_token OPERATOR(pg_catalog.>>) 42)"
	    "   OPERATOR(pg_catalog.-) 512 OPERATOR(pg_catalog.-) t.timeline)"
	    "  FROM fencing.token_timelines t WHERE t.system_identifier OPERATOR(pg_catalog.=) $1"
	    "  AND t.first_token OPERATOR(pg_catalog.>=) (513::pg_catalog.int8"
	    "   OPERATOR(pg_catalog.<<) 42)),"
	    " (SELECT pg_catalog.max((t.first_token OPERATOR(pg_catalog.>>) 42)"
	    "   OPERATOR(pg_catalog.-) 512)"
	    "  FROM fencing.token_timelines t WHERE t.system_identifier OPERATOR(pg_catalog.<>) $1"
	    "  AND t.first_token OPERATOR(pg_catalog.>=) (513::pg_catalog.int8"
	    "   OPERATOR(pg_catalog.<<) 42)) OPERATOR(pg_catalog.+) 1,"
	    " 1)",
	    1, types);
	Datum values[1] = {Int64GetDatum(static_cast<int64>(GetSystemIdentifier()))};
	run_plan(plan, values, nullptr, true, SPI_OK_SELECT);
	bool isnull = true;
	Datum value = SPI_processed > 0 ? result_value(0, 1, &isnull) : 0;
	if (!isnull)
		*base = std::max(int64{1}, DatumGetInt64(value));
	return true;
}

bool record_history_0_2_0(int64 token)
{
	if (installed_layout() == Layout::current)
		return false;
	Oid types[3] = {INT8OID, INT4OID, INT8OID};
	SPIPlanPtr plan = kept_plan(&record_plan,
	                            "INSERT INTO fencing.token_timelines"
	                            " (system_identifier, timeline, first_token, started_at)"
	                            " VALUES ($1, $2, $3, pg_catalog.clock_timestamp())"
	                            " ON CONFLICT DO NOTHING",
	                            3, types);
	Datum values[3] = {Int64GetDatum(static_cast<int64>(GetSystemIdentifier())),
	                   Int32GetDatum(static_cast<int32>(GetWALInsertionTimeLine())),
	                   Int64GetDatum(token)};
	run_plan(plan, values, nullptr, false, SPI_OK_INSERT);
	return true;
}

bool no_history_0_1_0()
{
	return installed_layout() == Layout::v0_1_0;
}

} // namespace fencing
