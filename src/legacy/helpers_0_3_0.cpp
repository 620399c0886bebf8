/*
 * 0.3.0's calls of the internal helpers: see helpers_0_3_0.hpp.
 */
#include "legacy/helpers_0_3_0.hpp"
#include "legacy/installed_release.hpp"

extern "C" {
#include "catalog/pg_type.h"
}

namespace fencing
{

Statement *for_installed_release(Statement *current, Statement *v0_3_0)
{
	return objects_before_0_4_0() ? v0_3_0 : current;
}

Statement protect_call_0_3_0 = {
    "SELECT fencing._protect($1, $2, $3)", 3, {REGCLASSOID, NAMEOID, TEXTOID}};

Statement unprotect_call_0_3_0 = {"SELECT fencing._unprotect($1)", 1, {REGCLASSOID}};

Statement guard_truncate_call_0_3_0 = {
    "SELECT fencing._guard_truncate($1, $2, $3)", 3, {REGCLASSOID, NAMEOID, TEXTOID}};

Statement guard_key_changes_call_0_3_0 = {
    "SELECT fencing._guard_key_changes($1, $2, $3)", 3, {REGCLASSOID, NAMEOID, TEXTOID}};

} // namespace fencing
