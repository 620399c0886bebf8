/*
 * Refused writes, counted and named before they are raised: see rejections.hpp.
 */
#include "reporting/rejections.hpp"
#include "catalog/citus_names.hpp"
#include "reporting/lease_stats.hpp"
#include "reporting/stats.hpp"
#include "state/token_setting.hpp"

namespace fencing
{

namespace
{

NamedRelation named(Relation rel)
{
	return NamedRelation{rel, relation_name(rel), relation_display_name(rel)};
}

} // namespace

void report_stale(Relation rel, AttrNumber token_attnum, const char *key, Mode mode,
                  int64 presented, int64 stored)
{
	note_rejection(rel, nullptr, Rejection::stale, key, presented, stored);
	raise_stale(named(rel), token_attnum, key, mode, presented, stored);
}

void report_stale_resource(const char *resource, int64 presented, int64 stored)
{
	note_rejection(nullptr, resource, Rejection::stale, nullptr, presented, stored);
	count_stale_lease_token(resource, presented);
	raise_stale_resource(resource, presented, stored);
}

void report_missing(Relation rel, AttrNumber token_attnum, const char *key, const char *operation,
                    int64 stored)
{
	note_rejection(rel, nullptr, Rejection::missing, key, 0, stored);
	const char *ignored = ignored_token_note();
	raise_missing(named(rel), token_attnum, key, operation, stored, ignored);
}

void report_above_ceiling(Relation rel, const char *key, int64 presented, int64 ceiling,
                          bool enforce)
{
	note_rejection(rel, nullptr, Rejection::ceiling, key, presented, ceiling);
	raise_above_ceiling(named(rel), presented, ceiling, enforce);
}

void report_mark_moved(Relation rel, const char *key, int64 kept, int64 stored)
{
	raise_mark_moved(named(rel), key, kept, stored);
}

void report_two_tokens(Relation rel, const char *key, const char *column, int64 assigned,
                       int64 transaction, int64 stored)
{
	raise_two_tokens(named(rel), key, column, assigned, transaction, stored);
}

} // namespace fencing
