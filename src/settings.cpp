/*
 * Module entry: PG_MODULE_MAGIC, _PG_init and the fencing.token setting.
 */
#include "settings.hpp"

extern "C" {
#include "utils/builtins.h"
#include "utils/guc.h"

PG_MODULE_MAGIC;
void _PG_init(void);
}

namespace
{

char *token_text = nullptr;
int64 token_value = 0; /* 0: not set */

/* fencing.token must be empty (unset) or a positive bigint. */
bool check_token(char **newval, void **extra, GucSource)
{
	int64 parsed = 0;
	const char *text = *newval;
	if (text != nullptr && text[0] != '\0') {
		char *end = nullptr;
		errno = 0;
		parsed = strtoi64(text, &end, 10);
		while (end != nullptr && isspace((unsigned char)*end))
			end++;
		if (errno != 0 || end == text || *end != '\0' || parsed <= 0) {
			GUC_check_errcode(ERRCODE_INVALID_PARAMETER_VALUE);
			GUC_check_errmsg("invalid value for parameter \"fencing.token\": \"%s\"", text);
			GUC_check_errdetail("fencing.token must be a positive bigint.");
			return false;
		}
	}
	int64 *value = static_cast<int64 *>(malloc(sizeof(int64)));
	if (value == nullptr)
		return false;
	*value = parsed;
	*extra = value;
	return true;
}

void assign_token(const char *, void *extra)
{
	token_value = *static_cast<int64 *>(extra);
}

} // namespace

namespace fencing
{

bool session_token(int64 *token)
{
	*token = token_value;
	return token_value > 0;
}

} // namespace fencing

extern "C" void _PG_init(void)
{
	DefineCustomStringVariable(
	    "fencing.token", "Fencing token presented by this transaction's writes.",
	    "Use SET LOCAL fencing.token = <token> before writing to a protected table.", &token_text,
	    "", PGC_USERSET, 0, check_token, assign_token, nullptr);
	MarkGUCPrefixReserved("fencing");
}
