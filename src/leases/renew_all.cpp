/*
 * fencing.renew_all(holder, ttl, resources, tokens): renew() of every lease a
 * holder believes it holds, in one statement (a session's keepalive), each
 * reported renewed or lost.
 */
#include "base/arguments.hpp"
#include "base/spi.hpp"
#include "base/token_compare.hpp"
#include "reporting/lease_stats.hpp"
#include "state/token_issue.hpp"

extern "C" {
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
}

using namespace fencing;

namespace
{

/*
 * The resources and tokens paired by position, in the caller's order;
 * each live lease held by (holder, token) is extended, the others are
 * reported with renewed = false and no expiry.  Every name qualified, the
 * search_path pinned too.
 */
constexpr const char *renew_all_sql =
    "WITH wanted AS (SELECT w.resource, w.token, w.n"
    "  FROM ROWS FROM (pg_catalog.unnest($2::pg_catalog.text[]),"
    "   pg_catalog.unnest($3::pg_catalog.int8[])) WITH ORDINALITY AS w(resource, token, n)),"
    " renewed AS (UPDATE fencing.resources r"
    "  SET expires_at = pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) $4"
    "  FROM wanted w"
    "  WHERE r.resource OPERATOR(pg_catalog.=) w.resource"
    "   AND r.holder OPERATOR(pg_catalog.=) $1 AND r.token OPERATOR(pg_catalog.=) w.token"
    "   AND NOT r.released"
    "   AND r.expires_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()"
    "  RETURNING r.resource, r.expires_at)"
    " SELECT w.resource, w.token, n.resource IS NOT NULL, n.expires_at"
    " FROM wanted w LEFT JOIN renewed n ON n.resource OPERATOR(pg_catalog.=) w.resource"
    " ORDER BY w.n";
SPIPlanPtr renew_all_plan = nullptr;

/* A one-dimensional array argument without NULL elements (22004) or NULL itself (22004). */
ArrayType *require_array(FunctionCallInfo fcinfo, int arg, const char *what)
{
	if (PG_ARGISNULL(arg))
		ereport(ERROR,
		        (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("%s must not be null", what)));
	ArrayType *array = PG_GETARG_ARRAYTYPE_P(arg);
	if (ARR_NDIM(array) > 1)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		                errmsg("%s must be a one-dimensional array", what)));
	if (array_contains_nulls(array))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
		                errmsg("%s must not contain nulls", what)));
	return array;
}

/* qsort's order of C strings (the duplicate check). */
int compare_names(const void *a, const void *b)
{
	CHECK_FOR_INTERRUPTS();
	return strcmp(*static_cast<char *const *>(a), *static_cast<char *const *>(b));
}

} // namespace

/*
 * renew_all(holder, ttl, resources, tokens) RETURNS TABLE(resource, token,
 * renewed, expires_at): the arguments checked as renew()'s, the arrays of one
 * length, each resource named once.
 */
FENCING_FUNCTION(renew_all)
{
	char *holder = require_name(fcinfo, 0, "holder");
	Datum ttl = require_ttl(fcinfo, 1);
	ArrayType *resources = require_array(fcinfo, 2, "resources");
	ArrayType *tokens = require_array(fcinfo, 3, "tokens");
	Datum *names;
	Datum *values;
	int nnames;
	int nvalues;
	deconstruct_array(resources, TEXTOID, -1, false, TYPALIGN_INT, &names, nullptr, &nnames);
	deconstruct_array(tokens, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &values,
	                  nullptr, &nvalues);
	if (nnames != nvalues)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		                errmsg("resources and tokens must have the same length"),
		                errdetail("resources has %d elements, tokens %d.", nnames, nvalues)));
	/* Each name converted once; duplicates found sorted (n log n), interruptible. */
	auto **sorted = static_cast<char **>(palloc(sizeof(char *) * Max(nnames, 1)));
	for (int i = 0; i < nnames; i++) {
		CHECK_FOR_INTERRUPTS();
		sorted[i] = TextDatumGetCString(names[i]);
		if (sorted[i][0] == '\0')
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			                errmsg("resources must not contain an empty name")));
		(void)require_token(values[i], false, "token");
	}
	qsort(sorted, static_cast<size_t>(nnames), sizeof(char *), compare_names);
	for (int i = 1; i < nnames; i++)
		if (strcmp(sorted[i - 1], sorted[i]) == 0)
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			                errmsg("resource \"%s\" appears more than once", sorted[i]),
			                errhint("Name each lease once.")));
	pfree(sorted);

	InitMaterializedSRF(fcinfo, 0);
	auto *rsinfo = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);
	if (nnames == 0)
		return (Datum)0;
	require_grant_confirmation();
	with_spi([&] {
		Oid types[4] = {TEXTOID, TEXTARRAYOID, INT8ARRAYOID, INTERVALOID};
		SPIPlanPtr plan = kept_plan(&renew_all_plan, renew_all_sql, 4, types);
		Datum arguments[4] = {CStringGetTextDatum(holder), PointerGetDatum(resources),
		                      PointerGetDatum(tokens), ttl};
		run_plan(plan, arguments, nullptr, false, SPI_OK_SELECT);
		for (uint64 row = 0; row < SPI_processed; row++) {
			Datum columns[4];
			bool nulls[4];
			for (int c = 0; c < 4; c++)
				columns[c] = result_value(row, c + 1, &nulls[c]);
			count_renewal(TextDatumGetCString(columns[0]), DatumGetInt64(columns[1]), ttl,
			              DatumGetBool(columns[2]));
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, columns, nulls);
		}
	});
	require_durable_commit();
	return (Datum)0;
}
