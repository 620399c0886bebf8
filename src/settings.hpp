/*
 * Settings: fencing.token, the token of the current transaction's writes.
 */
#pragma once

#include "boundary.hpp"

namespace fencing
{

/* The value of fencing.token, if it is set. */
bool session_token(int64 *token);

} // namespace fencing
