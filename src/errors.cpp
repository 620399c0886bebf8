/*
 * FN001 and FN002, worded once for the guard trigger, fenced_update() and fence().
 */
#include "errors.hpp"

extern "C" {
#include "utils/builtins.h"
#include "utils/lsyscache.h"
}

namespace fencing
{

char *relation_display_name(Relation rel)
{
	return quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
	                                  RelationGetRelationName(rel));
}

/*
 * FN001: `target` names what was written in the message ("relation \"t\""),
 * `subject` in DETAIL ("Relation public.t, key (id)=(1)"); `rel` may be NULL.
 */
[[noreturn]] static void stale(Relation rel, const char *target, const char *subject, Mode mode,
                               int64 presented, int64 stored)
{
	ereport(
	    ERROR,
	    (errcode(ERRCODE_FENCING_STALE_TOKEN),
	     errmsg("stale fencing token " INT64_FORMAT " for %s", presented, target),
	     errdetail("%s: presented token " INT64_FORMAT ", stored token " INT64_FORMAT " (%s mode).",
	               subject, presented, stored, mode_name(mode)),
	     errhint("A newer lock holder has taken over: stop, roll back, and acquire the lock "
	             "again for a new token."),
	     rel ? errtable(rel) : 0));
	pg_unreachable();
}

void report_stale(Relation rel, const char *key, Mode mode, int64 presented, int64 stored)
{
	stale(rel, psprintf("relation \"%s\"", RelationGetRelationName(rel)),
	      psprintf("Relation %s, key %s", relation_display_name(rel), key ? key : "(not visible)"),
	      mode, presented, stored);
}

void report_stale_resource(const char *resource, int64 presented, int64 stored)
{
	stale(nullptr, psprintf("resource \"%s\"", resource), psprintf("Resource \"%s\"", resource),
	      Mode::monotonic, presented, stored);
}

void report_missing(Relation rel, const char *key, const char *operation, int64 stored)
{
	ereport(ERROR,
	        (errcode(ERRCODE_FENCING_MISSING_TOKEN),
	         errmsg("missing fencing token for %s on relation \"%s\"", operation,
	                RelationGetRelationName(rel)),
	         errdetail("Relation %s, key %s: no token presented, stored token " INT64_FORMAT ".",
	                   relation_display_name(rel), key ? key : "(not visible)", stored),
	         errhint("Assign the token column in the statement, or run SET LOCAL fencing.token "
	                 "= <token> in the transaction first."),
	         errtable(rel)));
	pg_unreachable();
}

} // namespace fencing
