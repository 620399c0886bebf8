/*
 * Settings: fencing.token, the token of the current transaction's writes.
 */
#pragma once

#include "base/boundary.hpp"

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

} // namespace fencing
