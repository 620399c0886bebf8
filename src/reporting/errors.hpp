/*
 * The extension's own SQLSTATEs and the errors that carry them.  Both are in
 * class 23 (integrity constraint violation), so that drivers raise them as
 * the exception a refused write is expected to be (psycopg IntegrityError,
 * JDBC SQLIntegrityConstraintViolationException, ...).
 */
#pragma once

#include "base/token_compare.hpp"

extern "C" {
#include "utils/rel.h"
}

/* 23T01: the presented token is older than the stored one (or equal, in strict mode). */
#define ERRCODE_FENCING_STALE_TOKEN MAKE_SQLSTATE('2', '3', 'T', '0', '1')
/* 23T02: a write to a protected table carries no token. */
#define ERRCODE_FENCING_MISSING_TOKEN MAKE_SQLSTATE('2', '3', 'T', '0', '2')
/*
 * 01T01, a NOTICE: acquire() by the holder of the live lease it asks for
 * returns NULL (class 01, warning: the call completed with a condition).
 */
#define ERRCODE_FENCING_LEASE_HELD MAKE_SQLSTATE('0', '1', 'T', '0', '1')

/*
 * The constraint names that 23T01 and 23T02 carry (PG_DIAG_CONSTRAINT_NAME),
 * with the table and the token column: a driver tells a stale write from an
 * unfenced one by the name, as it tells one unique constraint from another.
 * They name no catalog object: the rule is the guard's, not a constraint's.
 */
#define FENCING_STALE_CONSTRAINT "fencing_stale_token"
#define FENCING_MISSING_CONSTRAINT "fencing_missing_token"

namespace fencing
{

/* The key description of a statement that writes every row (TRUNCATE). */
extern const char *const all_rows;

/* A relation as messages name it (a Citus shard by its table: rejections.cpp). */
struct NamedRelation {
	Relation rel;
	const char *name;         /* "table" */
	const char *display_name; /* "schema.table" */
};
FENCING_PLAIN_DATA(NamedRelation);

/*
 * Raises 23T01 for a write to `rel` (token column `token_attnum`, key
 * described by `key`, NULL when the caller may not see it) that presented
 * `presented` against `stored` (hidden_token when the caller may not learn it).
 */
[[noreturn]] void raise_stale(const NamedRelation &rel, AttrNumber token_attnum, const char *key,
                              Mode mode, int64 presented, int64 stored);

/* Raises 23T01 for fence() on `resource`. */
[[noreturn]] void raise_stale_resource(const char *resource, int64 presented, int64 stored);

/*
 * Raises 23T02 for an `operation` ("UPDATE", ...) on `rel` (token column
 * `token_attnum`) that carries no token; `ignored` (or NULL) says why a value
 * of fencing.token did not count.
 */
[[noreturn]] void raise_missing(const NamedRelation &rel, AttrNumber token_attnum, const char *key,
                                const char *operation, int64 stored, const char *ignored);

/*
 * Raises 40001 in report-only mode for a write to `rel` (key described by
 * `key`) that kept its key's mark `kept`, when the unique check, waiting for
 * a concurrent DELETE of that key, let a newer mark `stored` in: the row
 * would stay below it, and a retry takes the new mark.
 */
[[noreturn]] void raise_mark_moved(const NamedRelation &rel, const char *key, int64 kept,
                                   int64 stored);

/*
 * Raises 22023 for an UPDATE of `rel` (key described by `key`) that assigns
 * `assigned` to the token column `column` while fencing.token is
 * `transaction`, and the row's stored token is `stored` (hidden_token when
 * the caller may not learn it): two tokens in one write.
 */
[[noreturn]] void raise_two_tokens(const NamedRelation &rel, const char *key, const char *column,
                                   int64 assigned, int64 transaction, int64 stored);

/*
 * Raises 22023 for token `presented` above the max_token `ceiling` of `rel`
 * (whose guard enforces or only reports: `enforce`, for the hint).
 */
[[noreturn]] void raise_above_ceiling(const NamedRelation &rel, int64 presented, int64 ceiling,
                                      bool enforce);

} // namespace fencing
