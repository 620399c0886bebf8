/*
 * The fencing.token setting (defined in entry/settings.cpp).
 *
 * fencing.token is the token of the current transaction only.  A value
 * counts when it was assigned by the session (SET, SET LOCAL, set_config, a
 * function's SET clause: source PGC_S_SESSION, recorded with the value) and
 * in this transaction: PostgreSQL keeps a setting's earlier values on a stack
 * while the transaction that set it runs, and drops that stack when the
 * transaction ends (also for a plain SET, whose value then stays as the
 * session's).  A session value left by an earlier transaction, a role or
 * database default, PGOPTIONS or postgresql.conf - also when RESET brings it
 * back - never counts, and a pooled connection cannot hand one client's
 * token to the next client's write.
 *
 * A value set with SET (not LOCAL) or set_config(..., false) stays the
 * session's after its transaction, shown by SHOW and never used.  So that
 * nobody is misled by it, the commit of a transaction that leaves one behind
 * without any write having used it warns (docs/pooling.md), and 23T02 says
 * why such a value did not count.
 */
#include "state/token_setting.hpp"
#include "base/token_compare.hpp"
#include "base/compat.hpp"

extern "C" {
#include "access/xact.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/guc_tables.h"
}

namespace
{

/* A checked value of fencing.token: the token (0: unset), and whether the session assigned it. */
struct TokenValue {
	int64 token;
	bool assigned;
};

TokenValue token_value = {0, false};
const config_generic *token_setting = nullptr;

/*
 * Did the current transaction use fencing.token: read it for a write (the
 * guard), or send it to the workers (Citus)?  Everything that reads it does
 * so for one of those.
 */
bool token_used = false;

/*
 * fencing.token must be empty (unset) or a bigint in the token domain
 * (fencing::token_domain_error(), as for every other token).  A check hook
 * reports an error rather than raising it: a bad value in postgresql.conf
 * or a role's settings is a warning there, not a failed start or login.
 */
bool check_token_value(char **newval, void **extra, GucSource source)
{
	int64 parsed = 0;
	const char *text = *newval;
	if (text != nullptr && text[0] != '\0') {
		char *end = nullptr;
		errno = 0;
		parsed = strtoi64(text, &end, 10);
		while (end != nullptr && isspace((unsigned char)*end))
			end++;
		bool bigint = errno == 0 && end != nullptr && end != text && *end == '\0';
		int code =
		    bigint ? fencing::token_domain_error(false, parsed) : ERRCODE_INVALID_PARAMETER_VALUE;
		if (code != 0) {
			GUC_check_errcode(code);
			GUC_check_errmsg("invalid value for parameter \"fencing.token\": \"%s\"", text);
			GUC_check_errdetail("fencing.token must be a positive bigint.");
			return false;
		}
	}
	auto *value = static_cast<TokenValue *>(fencing::guc_extra_alloc(sizeof(TokenValue)));
	if (value == nullptr)
		return false;
	value->token = parsed;
	value->assigned = source == PGC_S_SESSION;
	*extra = value;
	return true;
}

void assign_token_value(const char *, void *extra)
{
	token_value = *static_cast<TokenValue *>(extra);
}

/* The setting's own entry, where PostgreSQL keeps its stack. */
const config_generic *find_token_setting()
{
	if (const config_generic *setting = fencing::find_setting("fencing.token"))
		return setting;
	elog(ERROR, "fencing: setting fencing.token is not defined");
	return nullptr;
}

/*
 * The value a commit leaves as the session's when this transaction assigned
 * it with SET (not LOCAL) or set_config(..., false), or nullptr.  Read at
 * commit, before PostgreSQL pops the setting's stack: its one entry, of
 * nesting level 1, is GUC_SET when the last assignment was a SET (the value
 * is the current one) and GUC_SET_LOCAL when a SET LOCAL came after a SET
 * (the SET's value, the one kept, is the entry's masked value).  RESET and
 * SET ... TO DEFAULT are SETs too, of a value that is no token.
 */
const TokenValue *kept_session_value()
{
	const GucStack *entry = token_setting->stack;
	if (entry == nullptr || entry->prev != nullptr || entry->nest_level != 1)
		return nullptr;
	const TokenValue *kept = nullptr;
	if (entry->state == GUC_SET)
		kept = &token_value;
	else if (entry->state == GUC_SET_LOCAL)
		kept = static_cast<const TokenValue *>(entry->masked.extra);
	if (kept == nullptr || kept->token <= 0 || !kept->assigned)
		return nullptr;
	return kept;
}

/*
 * At commit (or PREPARE): a session-level value of fencing.token that no
 * write of this transaction used will not be used by any later transaction
 * either.  A WARNING and not an ERROR: a SET that changes nothing should not
 * break an application that runs it (docs/pooling.md).
 */
void warn_unused_session_token(XactEvent event, bool installed)
{
	switch (event) {
	case XACT_EVENT_COMMIT:
	case XACT_EVENT_PREPARE:
		if (installed && !token_used)
			if (const TokenValue *kept = kept_session_value())
				ereport(WARNING,
				        (errmsg("fencing.token " INT64_FORMAT
				                " is set for the session and will not be used",
				                kept->token),
				         errdetail("A fencing token applies only to the transaction that sets "
				                   "it, and no write of this transaction used it; SET without "
				                   "LOCAL and set_config(..., false) keep the value for the "
				                   "session, where no later transaction uses it."),
				         errhint("Set the token inside the transaction that writes: BEGIN; SET "
				                 "LOCAL fencing.token = <token>; ...; COMMIT, or "
				                 "set_config('fencing.token', <token>, true).")));
		token_used = false;
		break;
	case XACT_EVENT_ABORT:
	case XACT_EVENT_PARALLEL_COMMIT:
	case XACT_EVENT_PARALLEL_ABORT:
		token_used = false;
		break;
	default:
		break;
	}
}

} // namespace

namespace fencing
{

char *token_setting_text = nullptr;

bool check_token(char **newval, void **extra, GucSource source)
{
	return check_token_value(newval, extra, source);
}

void assign_token(const char *newval, void *extra)
{
	assign_token_value(newval, extra);
}

void token_setting_defined()
{
	token_setting = find_token_setting();
}

void token_setting_end_of_transaction(XactEvent event, bool installed)
{
	warn_unused_session_token(event, installed);
}

bool session_token(int64 *token)
{
	*token = token_value.token;
	bool counts = token_value.token > 0 && token_value.assigned && token_setting->stack != nullptr;
	token_used = token_used || counts;
	return counts;
}

const char *ignored_token_note()
{
	int64 token;
	if (token_value.token <= 0 || session_token(&token))
		return nullptr;
	if (token_value.assigned)
		return psprintf("fencing.token is " INT64_FORMAT ", set for the session by an earlier "
		                "transaction (SET without LOCAL, or set_config(..., false)): it is not "
		                "used, a token counts only in the transaction that sets it.",
		                token_value.token);
	return psprintf("fencing.token is " INT64_FORMAT ", a default (role or database setting, "
	                "connection options or server configuration): it is not used, a token "
	                "counts only in the transaction that sets it.",
	                token_value.token);
}

} // namespace fencing
