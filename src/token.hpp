/*
 * Fencing tokens and the one rule that compares them.
 */
#pragma once

#include "boundary.hpp"

namespace fencing
{

/* How a table (or a resource) accepts a token that equals the stored one. */
enum class Mode { monotonic, strict };

/*
 * The token comparison, the only one in the extension: may a write presenting
 * `presented` follow a stored high-water mark `stored`?  monotonic lets the
 * same holder write again under its token, strict allows one write per grant.
 */
inline bool token_accepts(Mode mode, int64 stored, int64 presented)
{
	return mode == Mode::strict ? presented > stored : presented >= stored;
}

/* Parses 'monotonic' or 'strict'; false for anything else. */
bool parse_mode(const char *text, Mode *mode);

inline const char *mode_name(Mode mode)
{
	return mode == Mode::strict ? "strict" : "monotonic";
}

/*
 * Checks a token argument: NULL raises 22004, zero or negative 22023.
 * `what` names the argument in the message.
 */
int64 require_token(Datum value, bool isnull, const char *what);

} // namespace fencing
