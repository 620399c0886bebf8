/*
 * Token validation and the SQL face of the token comparison.
 */
#include "token.hpp"

extern "C" {
#include "utils/errcodes.h"
}

namespace fencing
{

bool parse_mode(const char *text, Mode *mode)
{
	if (strcmp(text, "monotonic") == 0)
		*mode = Mode::monotonic;
	else if (strcmp(text, "strict") == 0)
		*mode = Mode::strict;
	else
		return false;
	return true;
}

int64 require_token(Datum value, bool isnull, const char *what)
{
	if (isnull)
		ereport(ERROR,
		        (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("%s must not be null", what),
		         errhint("Fencing tokens are positive bigint values.")));
	int64 token = DatumGetInt64(value);
	if (token <= 0)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		                errmsg("%s must be positive, got " INT64_FORMAT, what, token),
		                errhint("Fencing tokens are positive bigint values.")));
	return token;
}

} // namespace fencing

/*
 * fencing.token_accepts(stored, presented, strict): the comparison above as a
 * predicate, so that SQL built by fenced_update() does not restate it.
 * A NULL stored token counts as 0 (nothing accepted yet).
 */
FENCING_FUNCTION(token_accepts)
{
	if (PG_ARGISNULL(1) || PG_ARGISNULL(2))
		PG_RETURN_NULL();
	int64 stored = PG_ARGISNULL(0) ? 0 : PG_GETARG_INT64(0);
	fencing::Mode mode = PG_GETARG_BOOL(2) ? fencing::Mode::strict : fencing::Mode::monotonic;
	PG_RETURN_BOOL(fencing::token_accepts(mode, stored, PG_GETARG_INT64(1)));
}
