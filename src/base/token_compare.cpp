/*
 * Token validation and the SQL face of the token comparison.
 */
#include "base/token_compare.hpp"

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

const char *const token_domain_hint = "Fencing tokens are positive bigint values.";

int token_domain_error(bool isnull, int64 value)
{
	if (isnull)
		return ERRCODE_NULL_VALUE_NOT_ALLOWED;
	if (value <= 0)
		return ERRCODE_INVALID_PARAMETER_VALUE;
	return 0;
}

int64 require_token(Datum value, bool isnull, const char *what)
{
	int64 token = isnull ? 0 : DatumGetInt64(value);
	int code = token_domain_error(isnull, token);
	if (code != 0)
		ereport(ERROR, (errcode(code),
		                isnull ? errmsg("%s must not be null", what)
		                       : errmsg("%s must be positive, got " INT64_FORMAT, what, token),
		                errhint("%s", token_domain_hint)));
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
