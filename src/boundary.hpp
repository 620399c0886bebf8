/*
 * The C++/PostgreSQL boundary: every SQL-callable function of this extension
 * is declared with FENCING_FUNCTION and so runs its body inside guarded().
 *
 * Two rules keep the two error models apart:
 *  - no C++ exception may reach PostgreSQL: guarded() catches everything,
 *    copies the message into static storage, leaves the catch block and only
 *    then raises the PostgreSQL error;
 *  - no PostgreSQL error (a longjmp) may cross a C++ frame that owns an object
 *    with a destructor: code that calls into PostgreSQL keeps its state in
 *    palloc'd memory and trivially destructible values only.
 */
#pragma once

extern "C" {
#include "postgres.h"
#include "fmgr.h"
}

#include <exception>

namespace fencing
{

/* Runs body(); a C++ exception becomes an ERROR once the catch block is left. */
template <typename Body> Datum guarded(const char *where, Body body)
{
	static char message[512];
	try {
		return body();
	} catch (const std::exception &e) {
		strlcpy(message, e.what(), sizeof message);
	} catch (...) {
		strlcpy(message, "unknown C++ exception", sizeof message);
	}
	ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR), errmsg("%s: %s", where, message)));
	pg_unreachable();
}

} // namespace fencing

/*
 * Declares a C-linkage, version-1 SQL function `name` whose C++ body follows
 * the macro, e.g. FENCING_FUNCTION(fenced_update) { ... }.
 */
#define FENCING_FUNCTION(name)                                                                     \
	static Datum name##_body(PG_FUNCTION_ARGS);                                                    \
	extern "C" {                                                                                   \
	PG_FUNCTION_INFO_V1(name);                                                                     \
	Datum name(PG_FUNCTION_ARGS)                                                                   \
	{                                                                                              \
		return fencing::guarded(#name, [fcinfo]() { return name##_body(fcinfo); });                \
	}                                                                                              \
	}                                                                                              \
	static Datum name##_body(PG_FUNCTION_ARGS)
