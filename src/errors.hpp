/*
 * The extension's own SQLSTATEs (class FN) and the errors that carry them.
 */
#pragma once

#include "token.hpp"

extern "C" {
#include "utils/rel.h"
}

/* FN001: the presented token is older than the stored one (or equal, in strict mode). */
#define ERRCODE_FENCING_STALE_TOKEN MAKE_SQLSTATE('F', 'N', '0', '0', '1')
/* FN002: a write to a protected table carries no token. */
#define ERRCODE_FENCING_MISSING_TOKEN MAKE_SQLSTATE('F', 'N', '0', '0', '2')

namespace fencing
{

/*
 * Raises FN001 for a write to `rel` (key described by `key`, may be NULL when
 * the caller may not see it) that presented `presented` against `stored`.
 */
[[noreturn]] void report_stale(Relation rel, const char *key, Mode mode, int64 presented,
                               int64 stored);

/* Raises FN001 for fence() on `resource`. */
[[noreturn]] void report_stale_resource(const char *resource, int64 presented, int64 stored);

/* Raises FN002 for an `operation` ("UPDATE", ...) on `rel` that carries no token. */
[[noreturn]] void report_missing(Relation rel, const char *key, const char *operation,
                                 int64 stored);

/* "schema.table" for messages. */
char *relation_display_name(Relation rel);

} // namespace fencing
