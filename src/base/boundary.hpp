/*
 * The C++/PostgreSQL boundary: every SQL-callable function of this extension
 * is declared with FENCING_FUNCTION and so runs its body inside guarded().
 *
 * Two rules keep the two error models apart:
 *  - no C++ exception may reach PostgreSQL: guarded() catches everything,
 *    copies the message into static storage, leaves the catch block, puts
 *    back PostgreSQL's error-handling state as it was on entry (the throw may
 *    have skipped a PG_TRY's PG_END_TRY or an error context's pop: a bug,
 *    reported with a WARNING, and an assertion failure in assert-enabled
 *    builds) and only then raises the PostgreSQL error;
 *  - no PostgreSQL error (a longjmp) may cross a C++ frame that owns an object
 *    with a destructor: code that calls into PostgreSQL keeps its state in
 *    palloc'd memory and plain data only, which FENCING_PLAIN_DATA checks.
 */
#pragma once

extern "C" {
#include "postgres.h"
#include "fmgr.h"
}

#include <exception>
#include <new>
#include <type_traits>

/*
 * Compile-time proof that a type may live on a frame that calls into
 * PostgreSQL: an ERROR longjmps over such frames without running destructors.
 */
#define FENCING_PLAIN_DATA(type)                                                                   \
	static_assert(std::is_trivially_destructible_v<type>,                                          \
	              #type " lives on frames that PostgreSQL errors unwind: it must be plain data")

namespace fencing
{

/*
 * Runs body() and returns what it returns; a C++ exception becomes an ERROR
 * once the catch block is left: std::bad_alloc as out of memory (53200),
 * anything else as an internal error.  Hooks and callbacks that PostgreSQL
 * calls use it too.
 */
template <typename Body> auto guarded(const char *where, Body body) -> decltype(body())
{
	static char message[512];
	sigjmp_buf *exception_stack = PG_exception_stack;
	ErrorContextCallback *context_stack = error_context_stack;
	int code = ERRCODE_INTERNAL_ERROR;
	try {
		return body();
	} catch (const std::bad_alloc &) {
		code = ERRCODE_OUT_OF_MEMORY;
		strlcpy(message, "out of memory", sizeof message);
	} catch (const std::exception &e) {
		strlcpy(message, e.what(), sizeof message);
	} catch (...) {
		strlcpy(message, "unknown C++ exception", sizeof message);
	}
	bool repaired = PG_exception_stack != exception_stack || error_context_stack != context_stack;
	PG_exception_stack = exception_stack;
	error_context_stack = context_stack;
	if (repaired) {
		/* A bug of the code that threw: said, and fatal where asserts are on. */
		ereport(
		    WARNING,
		    (errmsg("%s: a C++ exception skipped the end of a PG_TRY or an error context", where),
		     errdetail("The error-handling state was restored; the code that threw must not "
		               "throw there.")));
		Assert(!repaired);
	}
	ereport(ERROR, (errcode(code), errmsg("%s: %s", where, message)));
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
