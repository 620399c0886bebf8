/*
 * Functions that throw C++ exceptions through FENCING_FUNCTION, in the
 * situations guarded() must survive: out of memory, a throw that skips a
 * PG_TRY's PG_END_TRY, and a throw that skips popping an error context.
 */
#include "base/boundary.hpp"

extern "C" {
PG_MODULE_MAGIC;
}

#include <new>
#include <stdexcept>

/* std::bad_alloc must reach the client as 53200, out of memory. */
FENCING_FUNCTION(throw_bad_alloc)
{
	throw std::bad_alloc();
}

/*
 * A throw inside PG_TRY leaves PG_exception_stack pointing at this dead
 * frame; unless guarded() restores it, the session's next ERROR jumps there.
 */
FENCING_FUNCTION(throw_inside_pg_try)
{
	PG_TRY();
	{
		throw std::runtime_error("thrown inside PG_TRY");
	}
	PG_CATCH();
	{
		PG_RE_THROW();
	}
	PG_END_TRY();
	PG_RETURN_VOID();
}

static void stale_context(void *)
{
	errcontext("a stale error context callback ran");
}

/*
 * A throw with an error context pushed on this frame: unless guarded()
 * restores error_context_stack, later errors call into this dead frame.
 */
FENCING_FUNCTION(throw_with_error_context)
{
	ErrorContextCallback callback;
	callback.callback = stale_context;
	callback.arg = nullptr;
	callback.previous = error_context_stack;
	error_context_stack = &callback;
	throw std::runtime_error("thrown with an error context pushed");
}
