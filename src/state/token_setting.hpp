/*
 * Settings: fencing.token, the token of the current transaction's writes.
 */
#pragma once

#include "base/boundary.hpp"

extern "C" {
#include "access/xact.h"
#include "utils/guc.h"
}

namespace fencing
{

/* The value of fencing.token, if it is set. */
bool session_token(int64 *token);

/*
 * Why fencing.token has a value that does not count in this transaction (set
 * by an earlier transaction, or a default), as a sentence for DETAIL; nullptr
 * when it has none or the value counts.
 */
const char *ignored_token_note();

/*
 * The setting's variable and hooks, for its definition (entry/settings.cpp):
 * empty or a token (token_domain_error()); the value counts only where the
 * session assigned it.
 */
extern char *token_setting_text;
bool check_token(char **newval, void **extra, GucSource source);
void assign_token(const char *newval, void *extra);

/* After the definition: finds the setting's entry, where PostgreSQL keeps its stack. */
void token_setting_defined();

/*
 * At commit (or PREPARE): warns of a session-level value that no write of
 * the transaction used, where the extension is `installed` (elsewhere no
 * write uses one either, and nothing says so); forgets whether one was used.
 */
void token_setting_end_of_transaction(XactEvent event, bool installed);

} // namespace fencing
