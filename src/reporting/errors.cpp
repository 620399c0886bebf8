/*
 * 23T01 and 23T02, worded once for the guard trigger, fenced_update() and
 * fence().  Only the wording: rejections.cpp counts a rejection and names
 * its relation (a Citus shard's by its table) before raising it here.
 */
#include "reporting/errors.hpp"

extern "C" {
#include "utils/builtins.h"
#include "utils/lsyscache.h"
}

namespace fencing
{

const char *const all_rows = "all rows";

/* "Relation public.t, key (id)=(1)" or "Relation public.t, all rows" for DETAIL. */
static const char *detail_subject(const NamedRelation &rel, const char *key)
{
	if (key == all_rows)
		return psprintf("Relation %s, all rows", rel.display_name);
	return psprintf("Relation %s, key %s", rel.display_name, key ? key : "(not visible)");
}

/* A stored token for DETAIL: its number, or "(not visible)". */
static const char *token_text(int64 token)
{
	return token == hidden_token ? "(not visible)" : psprintf(INT64_FORMAT, token);
}

/*
 * The fields a driver reads from a refused write: schema, table, the token
 * column, and the constraint name that tells stale from missing.  Not
 * errtableconstraint() after errtablecol(): both set schema and table, and
 * an error's field is set once.
 */
static int errtokencolumn(Relation rel, AttrNumber token_attnum, const char *constraint)
{
	errtablecol(rel, token_attnum);
	return err_generic_string(PG_DIAG_CONSTRAINT_NAME, constraint);
}

/*
 * 23T01: `target` names what was written in the message ("relation \"t\""),
 * `subject` in DETAIL ("Relation public.t, key (id)=(1)"); `rel` may be NULL
 * (a resource), and then the error names no table.
 */
[[noreturn]] static void stale(Relation rel, AttrNumber token_attnum, const char *target,
                               const char *subject, Mode mode, int64 presented, int64 stored)
{
	ereport(ERROR,
	        (errcode(ERRCODE_FENCING_STALE_TOKEN),
	         errmsg("stale fencing token " INT64_FORMAT " for %s", presented, target),
	         errdetail("%s: presented token " INT64_FORMAT ", stored token %s (%s mode).", subject,
	                   presented, token_text(stored), mode_name(mode)),
	         errhint("A newer lock holder has taken over: stop, roll back, and acquire the lock "
	                 "again for a new token."),
	         rel ? errtokencolumn(rel, token_attnum, FENCING_STALE_CONSTRAINT) : 0));
	pg_unreachable();
}

void raise_stale(const NamedRelation &rel, AttrNumber token_attnum, const char *key, Mode mode,
                 int64 presented, int64 stored)
{
	stale(rel.rel, token_attnum, psprintf("relation \"%s\"", rel.name), detail_subject(rel, key),
	      mode, presented, stored);
}

void raise_stale_resource(const char *resource, int64 presented, int64 stored)
{
	stale(nullptr, InvalidAttrNumber, psprintf("resource \"%s\"", resource),
	      psprintf("Resource \"%s\"", resource), Mode::monotonic, presented, stored);
}

void raise_missing(const NamedRelation &rel, AttrNumber token_attnum, const char *key,
                   const char *operation, int64 stored, const char *ignored)
{
	ereport(ERROR,
	        (errcode(ERRCODE_FENCING_MISSING_TOKEN),
	         errmsg("missing fencing token for %s on relation \"%s\"", operation, rel.name),
	         errdetail("%s: no token presented, stored token %s.%s%s", detail_subject(rel, key),
	                   token_text(stored), ignored ? " " : "", ignored ? ignored : ""),
	         strcmp(operation, "UPDATE") == 0 || strcmp(operation, "INSERT") == 0
	             ? errhint("Assign the token column in the statement, or run SET LOCAL "
	                       "fencing.token = <token> in the transaction first.")
	             : errhint("Run SET LOCAL fencing.token = <token> in the transaction first."),
	         errtokencolumn(rel.rel, token_attnum, FENCING_MISSING_CONSTRAINT)));
	pg_unreachable();
}

void raise_two_tokens(const NamedRelation &rel, const char *key, const char *column, int64 assigned,
                      int64 transaction, int64 stored)
{
	ereport(ERROR,
	        (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
	         errmsg("two fencing tokens in one write to relation \"%s\"", rel.name),
	         errdetail("%s: the statement assigns token " INT64_FORMAT " to column \"%s\", "
	                   "fencing.token is " INT64_FORMAT ", stored token %s.",
	                   detail_subject(rel, key), assigned, column, transaction, token_text(stored)),
	         errhint("Assign no value to column \"%s\" (fencing.token applies), or assign it "
	                 "the transaction's token " INT64_FORMAT ".",
	                 column, transaction),
	         errtable(rel.rel)));
	pg_unreachable();
}

void raise_mark_moved(const NamedRelation &rel, const char *key, int64 kept, int64 stored)
{
	ereport(ERROR,
	        (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
	         errmsg("could not keep the deleted key's fencing token in relation \"%s\"", rel.name),
	         errdetail("%s: the write kept the key's token %s, and a concurrent delete of the "
	                   "key left token %s.",
	                   detail_subject(rel, key), token_text(kept), token_text(stored)),
	         errhint("Retry the transaction: it will keep the newer token."), errtable(rel.rel)));
	pg_unreachable();
}

void raise_above_ceiling(const NamedRelation &rel, int64 presented, int64 ceiling, bool enforce)
{
	ereport(ERROR,
	        (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
	         errmsg("fencing token " INT64_FORMAT " is above the max_token of relation \"%s\"",
	                presented, rel.name),
	         errdetail("The table accepts tokens up to " INT64_FORMAT ".", ceiling),
	         errhint("Present a token from the lease manager, or raise the ceiling with "
	                 "fencing.protect(..., enforce => %s, max_token => ...).",
	                 enforce ? "true" : "false"),
	         errtable(rel.rel)));
	pg_unreachable();
}

} // namespace fencing
