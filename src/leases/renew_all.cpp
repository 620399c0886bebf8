/*
 * fencing.renew_all(holder, ttl, resources, tokens): renew() of every lease a
 * holder believes it holds, in one statement (a session's keepalive), each
 * reported renewed or lost.
 */
#include "base/arguments.hpp"
#include "base/spi.hpp"
#include "base/token_compare.hpp"
#include "legacy/helpers_0_3_0.hpp"
#include "legacy/leases_0_3_0.hpp"
#include "leases/renew_memory.hpp"
#include "state/lease_grace.hpp"
#include "reporting/lease_stats.hpp"
#include "state/token_issue.hpp"

extern "C" {
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
}

using namespace fencing;

namespace
{

/*
 * The resources and tokens paired by position, in the caller's order;
 * each live lease held by (holder, token) is extended, the others are
 * reported with renewed = false and no expiry.  As renew() (leases.cpp):
 * grace_until and the epoch kept, or advanced; 0.3.0's rows have none
 * (legacy/leases_0_3_0.hpp).  Every name qualified, the search_path pinned
 * too.
 */
Statement renew_all_statement = {
    "WITH wanted AS (SELECT w.resource, w.token, w.n"
    "  FROM ROWS FROM (pg_catalog.unnest($2::pg_catalog.text[]),"
    "   pg_catalog.unnest($3::pg_catalog.int8[])) WITH ORDINALITY AS w(resource, token, n)),"
    " renewed AS (UPDATE fencing.resources r"
    "  SET expires_at = c.now OPERATOR(pg_catalog.+) $4,"
    " epoch = CASE WHEN $5"
    " AND (c.now OPERATOR(pg_catalog.+) $4) OPERATOR(pg_catalog.<=) r.grace_until"
    " THEN r.epoch ELSE fencing_internal._lease_epoch() END,"
    " grace_until = CASE WHEN $5"
    " AND (c.now OPERATOR(pg_catalog.+) $4) OPERATOR(pg_catalog.<=) r.grace_until"
    " THEN r.grace_until"
    " ELSE c.now OPERATOR(pg_catalog.+) $4 OPERATOR(pg_catalog.+) $6 END"
    "  FROM wanted w, (SELECT pg_catalog.clock_timestamp() AS now) c"
    "  WHERE r.resource OPERATOR(pg_catalog.=) w.resource"
    "   AND r.holder OPERATOR(pg_catalog.=) $1 AND r.token OPERATOR(pg_catalog.=) w.token"
    "   AND NOT r.released"
    "   AND GREATEST(fencing_internal._lease_expiry(r.resource, r.holder, r.token, r.epoch,"
    " r.expires_at), CASE WHEN r.epoch OPERATOR(pg_catalog.<>) fencing_internal._lease_epoch()"
    " THEN r.grace_until END) OPERATOR(pg_catalog.>) c.now"
    "  RETURNING r.resource, r.expires_at, r.grace_until OPERATOR(pg_catalog.=)"
    " (c.now OPERATOR(pg_catalog.+) $4 OPERATOR(pg_catalog.+) $6) AS advanced)"
    " SELECT w.resource, w.token, n.resource IS NOT NULL, n.expires_at, n.advanced"
    " FROM wanted w LEFT JOIN renewed n ON n.resource OPERATOR(pg_catalog.=) w.resource"
    " ORDER BY w.n",
    6,
    {TEXTOID, TEXTARRAYOID, INT8ARRAYOID, INTERVALOID, BOOLOID, INTERVALOID}};

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

/*
 * Every lease renewed in memory only (renew_memory.hpp), its rows returned:
 * true.  False if one of them needs its row written or is lost: then the
 * statement renews them all as before (those renewed here are written too,
 * harmlessly: the later expiry counts).
 */
bool renew_all_in_memory(ReturnSetInfo *rsinfo, const char *holder, Datum ttl, const Datum *names,
                         const Datum *tokens, int count)
{
	auto *expiries = static_cast<TimestampTz *>(palloc(sizeof(TimestampTz) * count));
	for (int i = 0; i < count; i++) {
		CHECK_FOR_INTERRUPTS();
		if (!renew_in_memory(TextDatumGetCString(names[i]), holder, DatumGetInt64(tokens[i]), ttl,
		                     &expiries[i]))
			return false;
	}
	for (int i = 0; i < count; i++) {
		Datum columns[4] = {names[i], tokens[i], BoolGetDatum(true),
		                    TimestampTzGetDatum(expiries[i])};
		bool nulls[4] = {false, false, false, false};
		count_renewal(TextDatumGetCString(names[i]), DatumGetInt64(tokens[i]), ttl, true);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, columns, nulls);
	}
	return true;
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
	bool flush_optional = lease_flush_optional() && lease_horizons_confirmed();
	if (flush_optional && !lease_rows_without_grace() &&
	    renew_all_in_memory(rsinfo, holder, ttl, names, values, nnames))
		return (Datum)0;
	note_lease_change_start();
	bool advanced = with_spi([&] {
		Datum arguments[6] = {CStringGetTextDatum(holder),  PointerGetDatum(resources),
		                      PointerGetDatum(tokens),      ttl,
		                      BoolGetDatum(flush_optional), lease_grace_interval()};
		run_statement(for_installed_release(&renew_all_statement, &renew_all_0_3_0), arguments,
		              SPI_OK_SELECT);
		bool any_advanced = false;
		for (uint64 row = 0; row < SPI_processed; row++) {
			Datum columns[5];
			bool nulls[5];
			for (int c = 0; c < 5; c++)
				columns[c] = result_value(row, c + 1, &nulls[c]);
			if (!nulls[4] && DatumGetBool(columns[4]))
				any_advanced = true;
			count_renewal(TextDatumGetCString(columns[0]), DatumGetInt64(columns[1]), ttl,
			              DatumGetBool(columns[2]));
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, columns, nulls);
		}
		return any_advanced;
	});
	/* A renewal that advanced grace_until must be durable; the others need no flush. */
	if (advanced || !flush_optional)
		require_durable_commit();
	else
		allow_commit_without_flush();
	return (Datum)0;
}
