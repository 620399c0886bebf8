/*
 * Fencing tokens and the one rule that compares them.
 */
#pragma once

#include "base/boundary.hpp"

extern "C" {
#include "common/int.h"
}

namespace fencing
{

/* A stored token the caller may not learn (row-level security hides the key). */
constexpr int64 hidden_token = -1;

/*
 * Arithmetic on tokens, the only arithmetic on them: it saturates at the
 * ends of bigint instead of overflowing, so that no value a writer can store
 * (2^63 - 1 included) makes a later sum - seen + 1, previous + 1, clock +
 * margin - fail.  A saturated sum is still the right bound: nothing is above
 * 2^63 - 1.
 */
inline int64 saturating_add(int64 a, int64 b)
{
	int64 sum;
	if (!pg_add_s64_overflow(a, b, &sum))
		return sum;
	return b > 0 ? PG_INT64_MAX : PG_INT64_MIN;
}

inline int64 saturating_sub(int64 a, int64 b)
{
	int64 difference;
	if (!pg_sub_s64_overflow(a, b, &difference))
		return difference;
	return b < 0 ? PG_INT64_MAX : PG_INT64_MIN;
}

/* One above `token`, or 2^63 - 1 if it is that already. */
inline int64 one_above(int64 token)
{
	return saturating_add(token, 1);
}

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

/* Is `presented` above the ceiling `max_token` (a table's max_token; 0: none)? */
inline bool above_max_token(int64 max_token, int64 presented)
{
	return max_token != 0 && presented > max_token;
}

/* Parses 'monotonic' or 'strict'; false for anything else. */
bool parse_mode(const char *text, Mode *mode);

inline const char *mode_name(Mode mode)
{
	return mode == Mode::strict ? "strict" : "monotonic";
}

/*
 * The token domain, one for every entry point (docs/design.md): a token is a
 * positive bigint, 1 to 2^63 - 1.  A write may present any of them; only
 * fencing.acquire() keeps the tokens it issues lower (src/state/token_issue.cpp).
 *
 * Is this value a token?  0 if it is, else the SQLSTATE that refusing it
 * raises: 22004 for NULL, 22023 for zero or negative.  The one test of the
 * domain: require_token() raises what it finds, and fencing.token's check
 * hook, which must not raise, reports it.
 */
int token_domain_error(bool isnull, int64 value);

/* The hint of every error about a value outside the domain. */
extern const char *const token_domain_hint;

/*
 * Checks a token argument, the way every entry point checks its tokens:
 * NULL raises 22004, zero or negative 22023.  `what` names the argument in
 * the message.
 */
int64 require_token(Datum value, bool isnull, const char *what);

} // namespace fencing
